"""Unit tests of `tokometer.sim`."""
