"""Unit tests of `tokometer.observe`."""
