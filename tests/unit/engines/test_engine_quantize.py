"""``llama-quantize`` in the llama.cpp build, with the fake compiler of test_engine_build (no 10-minute compile):
a fresh build installs it beside the server; a cached build without it gets that one target built, with the
flags the server was built with, and the server is left alone; the lookup order; a bad quant type."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import pytest

from tests.unit.engines.test_engine_build import FakeSteps, RecordingProgress, _script, cache, model  # noqa: F401
from tokometer.engines.build import FlagSet, build_llama_server, built_binary_path, read_build_info
from tokometer.engines.buildprogress import BuildProgress
from tokometer.engines.quantize import build_llama_quantize, find_llama_quantize, quantize_gguf
from tokometer.util.errors import EngineError

QUANTIZE = textwrap.dedent("""\
    #!/bin/sh
    # A fake llama-quantize: usage and exit 1 without arguments, as the real one does.
    echo "usage: llama-quantize [--allow-requantize] model-f32.gguf [model-quant.gguf] type [nthreads]" >&2
    exit 1
    """)


class FakeQuantizeSteps(FakeSteps):
    """The fake compiler, also making ``llama-quantize`` (beside the server, or alone)."""

    def __init__(self, model_path: Path, outcomes: dict[str, str], *, with_quantize: bool = True) -> None:
        super().__init__(model_path, outcomes)
        self.with_quantize = with_quantize
        self.quantize_flags: list[list[str]] = []

    def compile(self, source: Path, build: Path, flags: FlagSet, jobs: int, log: TextIO,
                progress: BuildProgress) -> Path:
        server = super().compile(source, build, flags, jobs, log, progress)
        if self.with_quantize:
            _script(server.with_name("llama-quantize"), QUANTIZE)
        return server

    def compile_quantize(self, source: Path, build: Path, cmake_flags: Sequence[str], jobs: int, log: TextIO,
                         progress: BuildProgress) -> Path:
        assert source.is_dir()
        self.quantize_flags.append(list(cmake_flags))
        return _script(build / "bin" / "llama-quantize", QUANTIZE)


def test_a_fresh_build_installs_llama_quantize_beside_the_server(cache: Path, model: Path) -> None:  # noqa: F811
    steps = FakeQuantizeSteps(model, {"native": "works"})
    assert build_llama_quantize(progress=RecordingProgress(), steps=steps) == built_binary_path().with_name(
        "llama-quantize")
    assert steps.compiled == ["native"] and steps.quantize_flags == []  # one build made both
    assert read_build_info()["tools"] == ["llama-server", "llama-quantize"]
    assert find_llama_quantize() == str(built_binary_path().with_name("llama-quantize"))


def test_a_cached_build_without_it_gets_only_that_target(cache: Path, model: Path,  # noqa: F811
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    old = FakeQuantizeSteps(model, {"native": "works"}, with_quantize=False)  # a build from before llama-quantize
    build_llama_server(progress=RecordingProgress(), steps=old)
    assert read_build_info()["tools"] == ["llama-server"]
    server_mtime = built_binary_path().stat().st_mtime_ns
    with pytest.raises(EngineError, match=r"llama-quantize not found: run `tokometer serve --prepare`"):
        find_llama_quantize()
    progress = RecordingProgress()
    path = build_llama_quantize(progress=progress, steps=old)
    assert path.name == "llama-quantize" and path.is_file()
    assert old.compiled == ["native"]  # the server was not rebuilt
    assert old.quantize_flags == [read_build_info()["cmake_flags"]]  # with the flags the server was built with
    assert old.fetches == 2 and built_binary_path().stat().st_mtime_ns == server_mtime
    assert "has no llama-quantize: building that one target" in progress.lines[0]
    assert read_build_info()["tools"] == ["llama-quantize", "llama-server"]
    assert build_llama_quantize(progress=RecordingProgress(), steps=old) == path
    assert len(old.quantize_flags) == 1  # cached now
    mine = _script(cache.parent / "mine" / "llama-quantize", QUANTIZE)
    monkeypatch.setenv("TOKOMETER_LLAMA_QUANTIZE", str(mine))
    assert find_llama_quantize() == str(mine)
    monkeypatch.setenv("TOKOMETER_LLAMA_QUANTIZE", str(cache.parent / "missing"))
    with pytest.raises(EngineError, match=r"llama-quantize from \$TOKOMETER_LLAMA_QUANTIZE .* is not an executable"):
        find_llama_quantize()


def test_a_quant_type_that_cannot_be_right(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="'Q9_ZZ!' is not a llama-quantize type"):
        quantize_gguf(tmp_path / "a.gguf", tmp_path / "b.gguf", "Q9_ZZ!", binary="/bin/false")
