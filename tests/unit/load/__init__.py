"""Unit tests of `tokometer.load`."""
