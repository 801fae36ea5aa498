"""Unit tests of `tokometer.wire`."""
