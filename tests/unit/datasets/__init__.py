"""Unit tests of `tokometer.datasets`."""
