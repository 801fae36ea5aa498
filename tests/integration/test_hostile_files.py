"""No traceback from any file (issue 22, category E).

Every file here is crafted by the test to hold what no real one does: GGUF headers with arrays nested
20,000 deep, ``head_count = 0``, a tensor whose shape multiplies past any size, an infinite
``embedding_length``, a text ``expert_count``, tokenizer tokens that are numbers, a 200,000-character token;
a dataset line nested 100,000 deep; a gateway config whose upstream name holds a NUL. Each goes through the
real command line (`count`, `estimate`, `serve`, `bench`, `gateway --check`), which must answer in one line
(``tokometer: error: ...``), exit 2, and print no traceback. The logprobs a hostile server sends to
`quality` come from a hostile HTTP server written for the test (`test_quality_malformed_logprobs`).
"""

from __future__ import annotations

import json
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli

STRING, ARRAY, UINT32, FLOAT32 = 8, 9, 4, 6


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, kind: int, value: bytes) -> bytes:
    return _s(key) + struct.pack("<I", kind) + value


def _gguf(path: Path, kvs: list[bytes], tensors: list[tuple[str, tuple[int, ...]]] | None = None) -> Path:
    tensors = tensors if tensors is not None else [("token_embd.weight", (64, 100))]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    for name, shape in tensors:
        out += _s(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        out += struct.pack("<IQ", 0, 0)
    out += b"\0" * (-len(out) % 32)
    path.write_bytes(out + b"\0" * 4096)
    return path


def _model_kvs(**overrides: bytes) -> list[bytes]:
    """A llama header that `estimate` reads (the values as GGUF bytes: kind and value)."""
    fields = {
        "llama.embedding_length": struct.pack("<I", UINT32) + struct.pack("<I", 64),
        "llama.attention.head_count": struct.pack("<I", UINT32) + struct.pack("<I", 4),
        "llama.block_count": struct.pack("<I", UINT32) + struct.pack("<I", 2),
        **overrides,
    }
    kvs = [_kv("general.architecture", STRING, _s("llama"))]
    for key, value in fields.items():
        kind, = struct.unpack_from("<I", value)
        kvs.append(_kv(key, kind, value[4:]))
    return kvs


def _tokens(values: bytes, count: int, item_kind: int = STRING) -> list[bytes]:
    return [_kv("general.architecture", STRING, _s("gemma3")), _kv("tokenizer.ggml.model", STRING, _s("llama")),
            _kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", item_kind, count) + values)]


def _nested(depth: int) -> bytes:
    return b"".join(struct.pack("<IQ", ARRAY, 1) for _ in range(depth)) + struct.pack("<IQ", UINT32, 0)


def _one_line_exit_2(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    err = done.stderr.strip()
    assert "Traceback" not in err and "Traceback" not in done.stdout, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]  # progress lines may come first
    assert err.splitlines()[-1].startswith("tokometer: error:") and len(errors) == 1, err
    for word in words:
        assert word in err, err


ESTIMATE_CASES: dict[str, tuple[list[bytes], list[tuple[str, tuple[int, ...]]] | None, str]] = {
    "nested-20k": ([_kv("general.architecture", STRING, _s("llama")), _kv("llama.deep", ARRAY, _nested(20_000))],
                   None, "nested more than"),
    "head-count-0": (_model_kvs(**{"llama.attention.head_count": struct.pack("<II", UINT32, 0)}), None,
                     "llama.attention.head_count"),
    "shape-overflow": (_model_kvs(), [("token_embd.weight", (2**40, 2**40, 2**40))], "elements"),
    "infinite-width": (_model_kvs(**{"llama.embedding_length": struct.pack("<If", FLOAT32, float("inf"))}), None,
                       "llama.embedding_length"),
    "text-expert-count": (_model_kvs(**{"llama.expert_count": struct.pack("<I", STRING) + _s("eight")}), None,
                          "llama.expert_count"),
    "nine-dimensions": (_model_kvs(), [("token_embd.weight", (2,) * 9)], "dimensions"),
    "huge-array-count": ([_kv("general.architecture", STRING, _s("llama")),
                          _kv("llama.many", ARRAY, struct.pack("<IQ", UINT32, 2**60))], None, "past the end"),
}


@pytest.mark.parametrize("name", sorted(ESTIMATE_CASES))
def test_estimate_refuses_a_crafted_gguf(tmp_path: Path, name: str) -> None:
    kvs, tensors, phrase = ESTIMATE_CASES[name]
    path = _gguf(tmp_path / f"{name}.gguf", kvs, tensors)
    _one_line_exit_2(run_cli("estimate", "--model", str(path), "--hardware", "H100"), phrase)


COUNT_CASES = {
    "nested-20k": ([_kv("general.architecture", STRING, _s("gemma3")), _kv("tokenizer.deep", ARRAY, _nested(20_000))],
                   "nested more than"),
    "tokens-are-numbers": (_tokens(struct.pack("<3I", 1, 2, 3), 3, UINT32), "not a list of strings"),
    "a-200k-token": (_tokens(_s("a") + _s("b" * 200_000), 2), "200,000 characters"),
    "types-are-text": ([*_tokens(_s("a") + _s("b"), 2),
                        _kv("tokenizer.ggml.token_type", ARRAY, struct.pack("<IQ", STRING, 2) + _s("x") + _s("y"))],
                       "tokenizer.ggml.token_type"),
}


@pytest.mark.parametrize("name", sorted(COUNT_CASES))
def test_count_refuses_a_crafted_gguf_tokenizer(tmp_path: Path, name: str) -> None:
    kvs, phrase = COUNT_CASES[name]
    path = _gguf(tmp_path / f"{name}.gguf", kvs, [])
    started = time.monotonic()
    done = run_cli("count", "--tokenizer", str(path), "hello", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    _one_line_exit_2(done, phrase)
    assert time.monotonic() - started < 60


def test_serve_refuses_a_crafted_gguf(tmp_path: Path) -> None:
    """``serve`` reads the header before anything starts: arrays nested 20k deep are a one-line error."""
    path = _gguf(tmp_path / "deep.gguf", ESTIMATE_CASES["nested-20k"][0])
    _one_line_exit_2(run_cli("serve", "--model", str(path), "--port", "0", timeout=120), "nested more than")


def test_dataset_nested_100k_deep(tmp_path: Path, sim_factory: Callable[..., SimServer]) -> None:
    """A JSONL dataset line nested 100,000 deep: a one-line dataset error before anything is measured."""
    dataset = tmp_path / "deep.jsonl"
    dataset.write_text('{"prompt": "hi"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    sim = sim_factory()
    done = run_cli("bench", "--url", sim.openai_url, "--dataset", str(dataset), "--no-check", "--no-store",
                   "--requests", "1", "--tokenizer", "none")
    _one_line_exit_2(done, "nested too deep", "deep.jsonl:2")


def test_gateway_config_with_a_nul_in_a_name(tmp_path: Path) -> None:
    """``--check`` refuses an upstream name holding NUL (and a route model with a newline)."""
    config = tmp_path / "gateway.toml"
    config.write_text('[[upstreams]]\nname = "a\\u0000b"\nurl = "http://127.0.0.1:9/v1"\n'
                      '[[routes]]\nmodel = "m"\nupstreams = ["a\\u0000b"]\n')
    _one_line_exit_2(run_cli("gateway", "--config", str(config), "--check"), "upstreams.0.name", "U+0000")
    config.write_text('[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9/v1"\n'
                      '[[routes]]\nmodel = "m\\nX-Forged: 1"\nupstreams = ["a"]\n')
    _one_line_exit_2(run_cli("gateway", "--config", str(config), "--check"), "routes.0.model", "U+000A")


class _LogprobServer(ThreadingHTTPServer):
    """A hostile server written for this test: streams a short answer to a streamed request (the speed pass),
    and answers a non-streamed one (the token-path pass) with the logprobs shape it was given."""

    daemon_threads = True

    def __init__(self, logprobs: object) -> None:
        super().__init__(("127.0.0.1", 0), _LogprobHandler)
        self.logprobs = logprobs
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"


class _LogprobHandler(BaseHTTPRequestHandler):
    server: _LogprobServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return None

    def _send(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path.endswith("/models"):
            self._send(200, "application/json", json.dumps({"data": [{"id": "m"}]}).encode())
        else:
            self._send(404, "application/json", b"{}")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if body.get("stream"):
            events = [{"choices": [{"index": 0, "text": "4", "finish_reason": None}]},
                      {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]},
                      {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}]
            sse = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            self._send(200, "text/event-stream", sse)
            return
        answer = {"choices": [{"index": 0, "text": "4", "finish_reason": "stop", "logprobs": self.server.logprobs}]}
        self._send(200, "application/json", json.dumps(answer).encode())


MALFORMED_LOGPROBS = [
    {"content": [1, 2, 3]},
    {"content": [{"token": "a", "top_logprobs": 5}]},
    {"content": [{"token": "a", "top_logprobs": [{"token": "a", "logprob": "high"}]}]},
    {"content": [{"token": "a", "top_logprobs": [{"token": "a", "logprob": 1e308}]}]},
    {"tokens": ["a"], "top_logprobs": [["a", -1.0]]},
    {"tokens": ["a"], "top_logprobs": 7},
]


@pytest.mark.parametrize("shape", range(len(MALFORMED_LOGPROBS)))
def test_quality_malformed_logprobs(tmp_path: Path, shape: int) -> None:
    """A hostile server written for this test answers `quality`'s requests with a logprobs shape that is
    neither OpenAI's nor the legacy one: every item fails with a classified reason, no traceback."""
    server = _LogprobServer(MALFORMED_LOGPROBS[shape])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = run_cli("quality", server.url, server.url, "--model-a", "m", "--model-b", "m", "--limit", "2",
                       "--json", timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    printed = done.stdout + done.stderr
    assert "Traceback" not in printed, printed[-3000:]
    assert "malformed logprobs from the server" in printed, printed[-3000:]
