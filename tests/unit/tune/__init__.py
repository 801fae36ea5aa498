"""Unit tests of `tokometer.tune`."""
