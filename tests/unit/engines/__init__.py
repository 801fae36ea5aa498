"""Unit tests of `tokometer.engines`."""
