"""Unit tests of `tokometer.report`."""
