"""The results store: every run, step and request, saved as it happens."""

from __future__ import annotations

from tokometer.store.runs import EngineIdentity, StoredRun, StoredStep
from tokometer.store.store import ResultStore, configured_store_url, default_store_url

__all__ = ["EngineIdentity", "ResultStore", "StoredRun", "StoredStep", "configured_store_url", "default_store_url"]
