"""The results store: every run, step and request, saved as it happens."""

from __future__ import annotations

from tokometer.store.store import ResultStore, default_store_url

__all__ = ["ResultStore", "default_store_url"]
