"""Presenting results: the console (`console`), JSON (`json_out`, schema ``tokometer.bench/2``) and CSV
(`csv_out`). Import from the submodules: this package's own namespace stays empty so that importing one
part does not load the others."""

from __future__ import annotations

__all__: list[str] = []
