"""What the server and its GPUs were doing while tokometer measured: scraped, normalised, summarised per step.

`snapshot` holds the shared types: a `Snapshot` is one scrape of a server's Prometheus ``/metrics``
in tokometer's vocabulary (raw samples kept); a `GpuSample` is one reading of one GPU (NVML, or a
DCGM exporter's ``/metrics``). Import from the submodules.
"""

from __future__ import annotations

__all__: list[str] = []
