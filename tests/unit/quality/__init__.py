"""Unit tests of `tokometer.quality`."""
