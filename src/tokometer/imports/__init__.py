"""Other tools' results as tokometer runs: one module per tool, a detector, and the saver.

`read_import` (`detect`) finds which tool wrote a file and reads it into an `ImportedRun` of
`RequestRecord` s (`source`); `save_import` (`save`) stores it as a run summarised by `tokometer.metrics`.
Readers: `vllm_bench` (``vllm bench serve --save-detailed``), `guidellm` (GuideLLM's benchmarks JSON),
`aiperf` (AIPerf's ``profile_export.jsonl``).
"""

from __future__ import annotations

from tokometer.imports.detect import TOOLS, read_import
from tokometer.imports.save import save_import
from tokometer.imports.source import ImportedRun, ImportFormatError

__all__ = ["TOOLS", "ImportFormatError", "ImportedRun", "read_import", "save_import"]
