"""Unit tests of `tokometer.metrics`."""
