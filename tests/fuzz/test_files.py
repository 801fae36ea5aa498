"""Fuzzing the file readers: GGUF headers (and what `estimate` and the tokenizer converter make of them),
dataset files (JSONL, ShareGPT, traces, eval sets) and the gateway's config.

Documented behaviour under any file: `read_gguf` raises ``ValueError`` (or ``OSError``); `model_from_gguf`
raises `ConfigError`; `check_vocabulary` raises `TokenizerError`; the dataset readers raise `DatasetError`;
`load_config` raises `ConfigError`, and a config it accepts has no control character in any name. Files are
written by the tests.
"""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import json_values
from tokometer.datasets.files import JsonlSource, ShareGPTSource
from tokometer.datasets.trace import read_trace
from tokometer.gateway.config import load_config
from tokometer.perf.loaders import model_from_gguf
from tokometer.quality.evalset import load_evalset
from tokometer.tokens.gguf_vocab import check_vocabulary
from tokometer.util.errors import ConfigError, DatasetError, TokenizerError
from tokometer.util.gguf import read_gguf


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _s(raw: bytes) -> bytes:
    return struct.pack("<Q", len(raw)) + raw


_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
                   12: "<d"}


@st.composite
def gguf_values(draw: st.DrawFn, depth: int = 0) -> tuple[int, bytes]:
    """(GGUF value type, its bytes): a well-formed value, or the occasional lie (a wrong length or type)."""
    kind = draw(st.sampled_from([*_SCALAR_FORMATS, 8, 9] if depth < 3 else [*_SCALAR_FORMATS, 8]))
    if kind == 8:
        text = draw(st.text(max_size=10)).encode()
        return kind, _s(text) if draw(st.booleans()) else struct.pack("<Q", draw(st.integers(0, 2**64 - 1))) + text
    if kind == 9:
        items = draw(st.lists(gguf_values(depth + 1), max_size=3))
        item_kind = items[0][0] if items else draw(st.integers(0, 20))
        count = len(items) if draw(st.booleans()) else draw(st.integers(0, 2**64 - 1))
        return kind, struct.pack("<IQ", item_kind, count) + b"".join(v for k, v in items if k == item_kind)
    fmt = _SCALAR_FORMATS[kind]
    if fmt in ("<f", "<d"):
        value: Any = draw(st.floats(width=32 if fmt == "<f" else 64))
    elif fmt == "<?":
        value = draw(st.booleans())
    else:
        size = struct.calcsize(fmt) * 8
        signed = fmt.islower()
        value = draw(st.integers(-(2 ** (size - 1)) if signed else 0, 2 ** (size - 1) - 1 if signed else 2**size - 1))
    return kind, struct.pack(fmt, value)


KEYS = ["general.architecture", "general.alignment", "general.file_type", "llama.embedding_length",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.block_count", "llama.expert_count",
        "llama.expert_used_count", "llama.context_length", "llama.attention.key_length", "llama.feed_forward_length",
        "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores", "tokenizer.ggml.model",
        "tokenizer.chat_template"]


@st.composite
def gguf_files(draw: st.DrawFn) -> bytes:
    kvs = [(b"general.architecture", 8, _s(b"llama"))] if draw(st.booleans()) else []
    for key in draw(st.lists(st.sampled_from(KEYS) | st.text(max_size=8), max_size=8)):
        kind, value = draw(gguf_values())
        kvs.append((key.encode(), kind, value))
    tensors = draw(st.lists(st.tuples(st.sampled_from(["token_embd.weight", "output.weight", "blk.0.ffn_exps.w"]),
                                      st.lists(st.integers(0, 2**64 - 1) | st.integers(1, 64), max_size=10)),
                            max_size=3))
    out = b"GGUF" + struct.pack("<IQQ", draw(st.sampled_from([1, 2, 3, 2**32 - 1])),
                                len(tensors) if draw(st.booleans()) else draw(st.integers(0, 2**64 - 1)),
                                len(kvs) if draw(st.booleans()) else draw(st.integers(0, 2**64 - 1)))
    out += b"".join(_s(key) + struct.pack("<I", kind) + value for key, kind, value in kvs)
    for name, shape in tensors:
        out += _s(name.encode()) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        out += struct.pack("<IQ", draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**64 - 1)))
    cut = draw(st.none() | st.integers(0, len(out)))
    return out[:cut] if cut is not None else out + b"\0" * 64


@given(gguf_files())
def test_gguf_headers(folder: Path, raw: bytes) -> None:
    path = folder / "fuzz.gguf"
    path.write_bytes(raw)
    try:
        gguf = read_gguf(path)
    except ValueError:
        return
    try:
        model = model_from_gguf(path)
    except ConfigError:
        pass
    else:
        assert model.hidden >= 1 and model.heads >= 1 and model.layers >= 1
    meta = gguf.metadata
    if "tokenizer.ggml.tokens" in meta:
        with contextlib.suppress(TokenizerError):
            check_vocabulary(meta, path)


@given(st.binary(max_size=300))
def test_gguf_any_bytes(folder: Path, raw: bytes) -> None:
    path = folder / "bytes.gguf"
    path.write_bytes(b"GGUF" + raw)
    with contextlib.suppress(ValueError):
        read_gguf(path)


lines = st.lists(st.one_of(json_values.map(json.dumps), st.text(max_size=30),
                           st.fixed_dictionaries({}, optional={
                               "prompt": json_values, "text": json_values, "messages": json_values,
                               "max_tokens": json_values, "output_tokens": json_values,
                               "conversations": st.lists(st.fixed_dictionaries({}, optional={
                                   "from": st.sampled_from(["human", "gpt", "x"]) | json_values,
                                   "value": json_values}), max_size=3) | json_values,
                               "timestamp": json_values, "input_length": json_values, "output_length": json_values,
                               "hash_ids": json_values, "id": json_values, "answer": json_values,
                           }).map(json.dumps)), max_size=5)


@given(lines, st.sampled_from(["jsonl", "sharegpt", "sharegpt-list", "trace", "evalset"]))
def test_dataset_files(folder: Path, rows: list[str], kind: str) -> None:
    path = folder / "data.jsonl"
    text = ("[" + ",".join(rows) + "]") if kind == "sharegpt-list" else "\n".join(rows)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        if kind == "jsonl":
            JsonlSource(path)
        elif kind.startswith("sharegpt"):
            ShareGPTSource(path)
        elif kind == "trace":
            read_trace(path)
        else:
            load_evalset(path)
    except DatasetError:
        pass


def _toml_string(value: str) -> str:
    return json.dumps(value)  # JSON's escapes are TOML's (a lone surrogate is neither's: a TOML error)


names = st.text(max_size=6) | st.sampled_from(["a\x00b", "a\nb", "primary", "", "x" * 300, "\u2028"])


@given(names, names, st.text(max_size=20) | st.sampled_from(["http://127.0.0.1:9/v1", "https://h/v1 x"]),
       st.dictionaries(st.sampled_from(["retries", "connect_timeout_s", "api", "max_concurrency", "weird"]),
                       st.integers(-3, 20) | st.text(max_size=5) | st.floats(allow_nan=False), max_size=3))
def test_gateway_config(folder: Path, upstream: str, model: str, url: str, extra: dict[str, Any]) -> None:
    path = folder / "gateway.toml"
    options = "".join(f"{key} = {_toml_string(v) if isinstance(v, str) else repr(v).replace('inf', 'inf')}\n"
                      for key, v in extra.items())
    path.write_text(f"[[upstreams]]\nname = {_toml_string(upstream)}\nurl = {_toml_string(url)}\n{options}"
                    f"[[routes]]\nmodel = {_toml_string(model)}\nupstreams = [{_toml_string(upstream)}]\n",
                    encoding="utf-8", errors="surrogatepass")
    try:
        config = load_config(path, environ={})
    except ConfigError:
        return
    for name in [u.name for u in config.upstreams] + [r.model for r in config.routes]:
        assert name and not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name), name
