"""Unit tests of `tokometer.inbound`."""
