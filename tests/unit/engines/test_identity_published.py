"""What `tokometer serve` publishes of a running engine, and what a later benchmark reads back (issue 31)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokometer.engines.identity import argv_facts, publish_identity, published, published_identity


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_a_published_identity_reads_back_for_its_loopback_port_while_it_runs() -> None:
    identity = {"engine": "vllm", "model_file": "/models/m", "tensor_parallel_size": 2}
    with published("http://127.0.0.1:8123", identity) as path:
        assert path is not None and path.is_file()
        for url in ("http://127.0.0.1:8123/v1", "http://localhost:8123", "http://[::1]:8123/v1"):
            assert published_identity(url) == identity
        assert published_identity("http://127.0.0.1:8124/v1") is None
        assert published_identity("http://10.1.2.3:8123/v1") is None  # another host's port 8123 is not this one
    assert not path.exists() and published_identity("http://127.0.0.1:8123/v1") is None


def test_a_file_of_a_process_that_is_gone_or_not_such_a_file_is_ignored(_cache: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    path = publish_identity("http://127.0.0.1:8125", {"engine": "vllm"})
    assert path is not None
    path.write_text(json.dumps({"pid": int(dead.stdout), "identity": {"engine": "vllm"}}))
    assert published_identity("http://127.0.0.1:8125") is None
    for garbage in ("[1, 2]", "{", json.dumps({"pid": True, "identity": {}}),
                    json.dumps({"pid": os.getpid(), "identity": "vllm"}), "x" * (2 << 20)):
        path.write_text(garbage)
        assert published_identity("http://127.0.0.1:8125") is None
    assert publish_identity("http://example.com:8000", {}) is None
    assert published_identity("not a url:99999") is None


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_published_file_replaced_by_a_fifo_or_a_device_is_ignored(_cache: Path) -> None:
    """A FIFO in a published identity's place had waited for a writer forever (its size, 0, passed the check);
    ``/dev/zero`` (size 0 too) had been read until memory ran out: both read within the bound, and ignored."""
    path = publish_identity("http://127.0.0.1:8126", {"engine": "vllm"})
    assert path is not None
    path.unlink()
    os.mkfifo(path)
    assert published_identity("http://127.0.0.1:8126") is None
    path.unlink()
    path.symlink_to("/dev/zero")
    assert published_identity("http://127.0.0.1:8126") is None


def test_the_flags_an_estimate_needs() -> None:
    argv = ["/venv/bin/vllm", "serve", "/models/m", "--dtype", "bfloat16", "--quantization=fp8", "-tp", "4",
            "--kv-cache-dtype", "fp8", "--pipeline-parallel-size", "x", "--max-model-len", "4096"]
    assert argv_facts(argv) == {"model_file": "/models/m", "dtype": "bfloat16", "quantization": "fp8",
                                "tensor_parallel_size": 4, "kv_cache_dtype": "fp8"}
    assert argv_facts(["--dtype"]) == {} and argv_facts(["vllm", "serve", "--help"]) == {}
