"""Unit tests of `tokometer.backends`."""
