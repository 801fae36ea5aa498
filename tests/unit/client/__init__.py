"""Unit tests of `tokometer.protocols.registry`."""
