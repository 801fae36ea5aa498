"""Running a benchmark: the spec (`spec.BenchSpec`), the checks and preparation before it (`preflight`,
`prepare`), and the run itself (`run.run_benchmark`). Import from the submodules: this package's own
namespace stays empty so that importing one part does not load the others (the CLI imports lazily)."""

from __future__ import annotations

__all__: list[str] = []
