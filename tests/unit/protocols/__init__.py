"""Unit tests of `tokometer.protocols`."""
