"""Unit tests of `tokometer.store`."""
