"""Engine plumbing without an engine: exports, binary lookup, the build entry point, GGUF headers, processes."""

from __future__ import annotations

import json
import struct
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

import tokometer.engines
from tokometer.bundled import file_sha256
from tokometer.engines import find_llama_server
from tokometer.engines.build import built_binary_path
from tokometer.engines.build import main as build_main
from tokometer.engines.cpu import cpu_fingerprint
from tokometer.engines.process import EngineProcess, free_port, port_in_use
from tokometer.util.errors import EngineError
from tokometer.util.gguf import gguf_metadata, quantization_of


def test_exported_names() -> None:
    assert sorted(tokometer.engines.__all__) == [
        "EngineHandle", "LlamaCppSettings", "bundled_model_path", "find_llama_server", "start_llamacpp"]


@pytest.fixture
def no_llama(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An environment with no llama-server anywhere: empty PATH, empty cache dir, no env override."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TOKOMETER_LLAMA_SERVER", raising=False)
    return empty


def _fake_exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 'version: 1 (fake)'\n")
    path.chmod(0o755)
    if path == built_binary_path():  # a cached build already known to run on this CPU: no smoke run at lookup
        info = {"verified_cpus": [cpu_fingerprint()]}
        (path.parent.parent / "BUILD-INFO.json").write_text(json.dumps(info))
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths and executables")
def test_lookup_order(no_llama: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"llama-server not found: run `tokometer serve --prepare`"):
        find_llama_server()
    cached = _fake_exe(built_binary_path())
    assert str(tmp_path / "cache") in str(cached)
    assert find_llama_server() == str(cached)
    on_path = _fake_exe(no_llama / "llama-server")
    assert find_llama_server() == str(on_path)
    override = _fake_exe(tmp_path / "mine" / "llama-server")
    monkeypatch.setenv("TOKOMETER_LLAMA_SERVER", str(override))
    assert find_llama_server() == str(override)
    assert find_llama_server(str(cached)) == str(cached)
    with pytest.raises(EngineError, match="not an executable file"):
        find_llama_server(str(tmp_path / "nope"))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths and executables")
def test_build_entry_point(no_llama: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert build_main(["-q"]) == 2  # no cmake on PATH
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs cmake" in err
    cached = _fake_exe(built_binary_path())
    assert build_main(["-q"]) == 0  # already built: returns at once
    assert capsys.readouterr().out.strip() == str(cached)


def _gguf(path: Path, kvs: list[tuple[str, int, bytes]]) -> Path:
    def string(text: str) -> bytes:
        return struct.pack("<Q", len(text.encode())) + text.encode()

    body = b"".join(string(key) + struct.pack("<I", kind) + value for key, kind, value in kvs)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + body)
    return path


def test_gguf_header(tmp_path: Path) -> None:
    tokens = struct.pack("<IQ", 8, 2) + b"".join(struct.pack("<Q", len(t)) + t for t in (b"<s>", b"hi"))
    scores = struct.pack("<IQ", 6, 2) + struct.pack("<2f", 0.0, -1.0)
    path = _gguf(tmp_path / "model.gguf", [
        ("general.architecture", 8, struct.pack("<Q", 5) + b"llama"),
        ("tokenizer.ggml.tokens", 9, tokens),
        ("tokenizer.ggml.scores", 9, scores),
        ("general.file_type", 4, struct.pack("<I", 17)),
        ("llama.context_length", 4, struct.pack("<I", 8192)),
    ])
    meta = gguf_metadata(path)
    assert meta["general.architecture"] == "llama"
    assert meta["llama.context_length"] == 8192
    assert "tokenizer.ggml.tokens" not in meta
    assert quantization_of(path, meta) == "Q5_K_M"
    (tmp_path / "bad.gguf").write_bytes(b"GGML" + bytes(20))
    with pytest.raises(ValueError, match="not a GGUF"):
        gguf_metadata(tmp_path / "bad.gguf")


def test_quantization_from_file_name() -> None:
    assert quantization_of(Path("Llama-3.1-8B-Instruct-Q4_K_M.gguf")) == "Q4_K_M"
    assert quantization_of(Path("qwen2.5-0.5b-instruct-q8_0.gguf")) == "Q8_0"
    assert quantization_of(Path("model-f16.gguf")) == "F16"
    assert quantization_of(Path("model.gguf")) == "unknown"


def test_sha256_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "m.gguf"
    path.write_bytes(b"abc")
    digest = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert file_sha256(path) == digest
    assert digest in (tmp_path / "cache" / "tokometer" / "sha256-cache.json").read_text()
    assert file_sha256(path) == digest


def test_ports() -> None:
    port = free_port()
    assert not port_in_use("127.0.0.1", port)


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
def test_stop_takes_the_whole_process_group() -> None:
    # The child ignores SIGTERM and forks a grandchild: stop() must SIGKILL both after the grace period.
    script = "trap '' TERM; sleep 60 & echo started; wait"
    process = EngineProcess(["sh", "-c", script], "fake-engine")
    deadline = time.monotonic() + 5
    while "started" not in process.log_tail() and time.monotonic() < deadline:
        time.sleep(0.02)
    family = [process.pid] + [p.pid for p in psutil.Process(process.pid).children(recursive=True)]
    assert len(family) == 2
    started = time.monotonic()
    assert process.stop(grace_s=0.5) == -9
    assert time.monotonic() - started < 5
    time.sleep(0.1)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in family)
    assert process.stop() == -9  # idempotent
    assert "started" in process.log_tail()
    assert not process.log_path.exists()


def test_engine_process_of_missing_program(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        EngineProcess([str(tmp_path / "no-such-program")], "ghost")
    assert not list(Path(tempfile.gettempdir()).glob("tokometer-ghost-*.log"))


def test_file_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    import threading

    from tokometer.util.cachedir import file_lock

    order: list[str] = []
    with file_lock(tmp_path / "x.lock"):
        def second() -> None:
            with file_lock(tmp_path / "x.lock"):
                order.append("second")

        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.3)
        order.append("first done")
    thread.join(5)
    assert order == ["first done", "second"]


def test_readiness_refuses_an_endless_answer_without_keeping_it() -> None:
    """A raw server written for the purpose: its /v1/models answer never ends (no Content-Length, no close).
    The readiness check reads at most 1 MiB of it, refuses it, and gives up at its deadline."""
    import socket
    import threading

    from tokometer.engines.ready import MAX_ANSWER_BYTES, wait_ready
    from tokometer.util.errors import EngineError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"data\": [")
                    chunk = b'{"id": "m"},' * 4096
                    for _ in range(2 * MAX_ANSWER_BYTES // len(chunk) + 2):
                        conn.sendall(chunk)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        with pytest.raises(EngineError, match="did not answer GET"):
            wait_ready(f"http://127.0.0.1:{listener.getsockname()[1]}", None, timeout_s=2.0)
        assert time.monotonic() - started < 15
    finally:
        stop.set()
        thread.join(5)
        listener.close()
