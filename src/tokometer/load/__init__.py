"""Load generation: load profiles and schedules (`profiles`), one step on the event loop (`runner`), in
worker processes (`processes`) or on Ray actors across a cluster (`cluster`, `ray_actor`), each generator's
share of a step (`share`), and the client's check of itself (`selfcheck`). Import from the
submodules: this package's own namespace stays empty so that importing one part does not load the others."""

from __future__ import annotations

__all__: list[str] = []
