"""The one GGUF reader (`tokometer.util.gguf`) and the bundled model's facts (`tokometer.bundled`)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tokometer.bundled import GEMMA_CHAT_TEMPLATE, bundled_model_path, bundled_sha256, gemma_chat_template
from tokometer.engines.llamacpp import chat_template_args
from tokometer.util.gguf import TOKENIZER_ARRAYS, GGUFTensor, gguf_metadata, read_gguf


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _file(path: Path, kvs: list[tuple[str, int, bytes]], tensors: list[tuple[str, tuple[int, ...], int, int]],
          alignment: int = 32, data: bytes = b"", version: int = 3) -> Path:
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    out += b"".join(_string(key) + struct.pack("<I", kind) + value for key, kind, value in kvs)
    for name, shape, ggml_type, offset in tensors:
        out += _string(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        out += struct.pack("<IQ", ggml_type, offset)
    out += b"\0" * (-len(out) % alignment)
    path.write_bytes(out + data)
    return path


KVS = [
    ("general.architecture", 8, _string("llama")),
    ("general.alignment", 4, struct.pack("<I", 64)),
    ("llama.block_count", 4, struct.pack("<I", 2)),
    ("llama.rope.freq_base", 6, struct.pack("<f", 0.5)),
    ("llama.per_layer", 9, struct.pack("<IQ", 5, 2) + struct.pack("<2i", 8, -4)),  # int32 array: kept
    ("llama.nested", 9, struct.pack("<IQ", 9, 2) + struct.pack("<IQ", 7, 1) + b"\x01"
     + struct.pack("<IQ", 7, 0)),  # array of arrays of bools
    ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + b"".join(_string(t) for t in ("<s>", "a", "bc"))),
    ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0.0, -1.0, -2.0)),
    ("tokenizer.chat_template", 8, _string("{{ messages }}")),
]
TENSORS = [("token_embd.weight", (64, 100), 12, 0), ("output_norm.weight", (64,), 0, 4096)]


def test_header_metadata_and_tensor_table(tmp_path: Path) -> None:
    gguf = read_gguf(_file(tmp_path / "m.gguf", KVS, TENSORS, alignment=64, data=b"\1" * 5000))
    meta = gguf.metadata
    assert gguf.version == 3 and gguf.architecture == "llama"
    assert meta["llama.block_count"] == 2 and meta["llama.rope.freq_base"] == 0.5
    assert meta["llama.per_layer"] == [8, -4]
    assert meta["llama.nested"] == [[True], []]
    assert meta["tokenizer.ggml.tokens"] == ["<s>", "a", "bc"]
    assert meta["tokenizer.ggml.scores"] == [0.0, -1.0, -2.0]
    assert gguf.tensor_count == 2 and gguf.skipped == ()
    assert gguf.tensors[0] == GGUFTensor("token_embd.weight", (64, 100), 12, 0)
    assert (gguf.tensors[0].elements, gguf.tensors[0].type_name) == (6400, "Q4_K")
    assert (gguf.tensors[1].offset, gguf.tensors[1].type_name) == (4096, "F32")
    assert gguf.data_offset is not None and gguf.data_offset % 64 == 0  # general.alignment 64
    assert gguf.data_bytes == 5000


def test_skipped_arrays_and_no_tensor_table(tmp_path: Path) -> None:
    path = _file(tmp_path / "m.gguf", KVS, TENSORS, alignment=64)
    full = read_gguf(path).metadata
    light = read_gguf(path, skip_arrays=TOKENIZER_ARRAYS, tensors=False)
    assert light.skipped == ("tokenizer.ggml.tokens", "tokenizer.ggml.scores")
    assert light.metadata == {k: v for k, v in full.items() if k not in light.skipped}
    assert light.metadata["tokenizer.chat_template"] == "{{ messages }}"  # a string, not an array: kept
    assert light.metadata["llama.per_layer"] == [8, -4]  # arrays outside the prefix are kept
    assert (light.tensors, light.data_offset, light.data_bytes, light.tensor_count) == ((), None, None, 2)
    assert gguf_metadata(path) == light.metadata


def test_bad_files_are_value_errors(tmp_path: Path) -> None:
    (tmp_path / "ggml.gguf").write_bytes(b"GGML" + bytes(20))
    with pytest.raises(ValueError, match="not a GGUF"):
        read_gguf(tmp_path / "ggml.gguf")
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(ValueError, match="not a GGUF"):
        read_gguf(tmp_path / "empty.gguf")
    whole = _file(tmp_path / "whole.gguf", KVS, TENSORS).read_bytes()
    for cut in (4, 10, 60, len(whole) // 2, len(whole) - 40):
        (tmp_path / "cut.gguf").write_bytes(whole[:cut])
        with pytest.raises(ValueError, match="truncated GGUF header"):
            read_gguf(tmp_path / "cut.gguf")
    _file(tmp_path / "v1.gguf", KVS, [], version=1)
    with pytest.raises(ValueError, match="version 1"):
        read_gguf(tmp_path / "v1.gguf")
    with pytest.raises(OSError):
        read_gguf(tmp_path / "missing.gguf")


def test_the_bundled_model() -> None:
    path = bundled_model_path()  # the engine extra is part of the test set-up
    gguf = read_gguf(path, skip_arrays=TOKENIZER_ARRAYS)
    assert gguf.skipped == ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")
    assert gguf.architecture == "gemma3" and gguf.metadata["gemma3.block_count"] == 18
    assert gguf.tensor_count == len(gguf.tensors) == 236
    assert sum(t.elements for t in gguf.tensors) == 268_098_176
    assert gguf.data_bytes == 246_587_904
    embd = next(t for t in gguf.tensors if t.name == "token_embd.weight")
    assert embd.shape == (640, 262_144)
    assert bundled_sha256(path) == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert bundled_sha256(Path(__file__)) is None
    # the turn format both llama.cpp and the tokenizer get: the GGUF has no template of its own
    assert gemma_chat_template(gguf.metadata) == GEMMA_CHAT_TEMPLATE


def test_gemma_turn_format_rule() -> None:
    gemma = {"general.architecture": "gemma3"}
    assert gemma_chat_template(gemma) == GEMMA_CHAT_TEMPLATE
    assert gemma_chat_template({**gemma, "tokenizer.chat_template": "x"}) is None  # the GGUF's own wins
    assert gemma_chat_template({"general.architecture": "llama"}) is None
    assert chat_template_args(gemma, ()) == ("--jinja", "--chat-template", GEMMA_CHAT_TEMPLATE)
    assert chat_template_args(gemma, ("--chat-template", "chatml")) == ()  # the user's choice wins
