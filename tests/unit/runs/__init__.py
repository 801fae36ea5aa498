"""Unit tests of `tokometer.runs`."""
