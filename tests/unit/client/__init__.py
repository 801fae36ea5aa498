"""Unit tests of `tokometer.wire.apis`."""
