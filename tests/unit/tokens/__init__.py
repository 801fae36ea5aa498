"""Unit tests of `tokometer.tokens`."""
