"""Which tool wrote a file: `read_import` reads any of them, found by shape, into an `ImportedRun`.

A JSON document with vLLM's per-request lists is ``vllm bench serve``'s; one with GuideLLM's
``benchmarks`` list is GuideLLM's report; a file of JSON lines whose records carry AIPerf's ``metadata`` and
``metrics`` is AIPerf's ``profile_export.jsonl``; a JSON report (or list of them) with llm-d's ``version`` and
its ``run``/``results`` (v0.2) or ``scenario``/``metrics`` (v0.1) is llm-d's Benchmark Report. Anything else
is refused, in one line, naming the formats. The file is read once, front to back, parsed as it is read
(`tokometer.imports.jsonstream`): its size costs no memory of its own.
"""

from __future__ import annotations

from pathlib import Path

from tokometer.imports import aiperf, guidellm, llmd, vllm_bench
from tokometer.imports.jsonstream import ImportStream
from tokometer.imports.source import ImportedRun, ImportFormatError, check_version, date_run

__all__ = ["TOOLS", "read_import"]

TOOLS = (vllm_bench.TOOL, guidellm.TOOL, aiperf.TOOL, llmd.TOOL)
CHECKED_VERSIONS = {vllm_bench.TOOL: vllm_bench.CHECKED_VERSIONS, guidellm.TOOL: guidellm.CHECKED_VERSIONS,
                    aiperf.TOOL: aiperf.CHECKED_VERSIONS, llmd.TOOL: llmd.CHECKED_VERSIONS}
"""The versions of each tool whose files the reader was checked on (tests/fixtures/imports)."""


def read_import(path: Path) -> ImportedRun:
    """The run in ``path``, whichever tool wrote it, dated and its version checked; ImportFormatError (one
    line) otherwise."""
    run = _read(path)
    date_run(run, path)
    check_version(run, CHECKED_VERSIONS[run.tool])
    return run


def _read(path: Path) -> ImportedRun:
    stream = ImportStream(path)
    if aiperf.looks_like_jsonl(stream.head()):
        return aiperf.read(stream, path)
    data = stream.document()
    if vllm_bench.looks_like(data):
        return vllm_bench.read(data, path)
    if guidellm.looks_like(data):
        return guidellm.read(data, path)
    if llmd.looks_like(data):
        return llmd.read(data, path)
    if isinstance(data, dict) and "mean_ttft_ms" in data and "completed" in data:
        raise ImportFormatError(f"{path}: a vllm bench serve result saved without --save-detailed: it holds no "
                                "per-request data to recompute from (run it again with --save-detailed)")
    raise ImportFormatError(f"{path}: not a result tokometer can import: it reads vllm bench serve JSON "
                            "saved with --save-detailed, GuideLLM's benchmarks JSON, AIPerf's "
                            "profile_export.jsonl and llm-d's Benchmark Report (v0.1, v0.2) as JSON")
