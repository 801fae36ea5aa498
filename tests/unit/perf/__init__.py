"""Unit tests of `tokometer.perf`."""
