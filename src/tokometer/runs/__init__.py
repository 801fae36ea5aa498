"""A run as one idea: how a step's summary is finished (`finish.finish_step`), for a run measured live, one
recovered after its process was killed and one imported from another tool alike. Import from the submodules."""

from __future__ import annotations

__all__: list[str] = []
