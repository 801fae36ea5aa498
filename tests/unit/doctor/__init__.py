"""Unit tests of `tokometer.doctor`."""
