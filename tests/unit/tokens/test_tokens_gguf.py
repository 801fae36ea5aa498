"""GGUF tokenizers: reading the header, converting (Gemma here, others via transformers), the cache.

llama.cpp's own ids for the bundled model are checked in tests/integration/test_count_engine.py.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from tokometer.engines import bundled_model_path
from tokometer.tokens import FileTokenizer, gguf_tokenizer, load_tokenizer
from tokometer.tokens.gguf_vocab import CONVERTER_VERSION, _load_cached, convert_gguf_tokenizer
from tokometer.util.errors import TokenizerError
from tokometer.util.gguf import read_gguf

TEXTS = ["Hello world!", "大模型推理速度是落地的关键指标，token 是计算的基本单位。", "unbelievable", "深度学习",
         "  def f(x):\n\treturn x**2  # 😀", "a   b    c\n\n\n  d", "<start_of_turn>user\nhi<end_of_turn>\n",
         "Ünïcödé façade naïve café", "👨‍👩‍👧‍👦 ﬁ ㈱", "", " "]


@pytest.fixture(scope="module")
def header() -> dict[str, Any]:
    return read_gguf(bundled_model_path()).metadata


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> FileTokenizer:
    """The bundled tokenizer converted from scratch into an empty cache."""
    return gguf_tokenizer(bundled_model_path(), cache_dir=tmp_path_factory.mktemp("cache"))


def test_header_has_the_tokenizer_arrays(header: dict[str, Any]) -> None:
    assert header["general.architecture"] == "gemma3"
    assert header["tokenizer.ggml.model"] == "llama"
    assert len(header["tokenizer.ggml.tokens"]) == len(header["tokenizer.ggml.token_type"]) == 262_144
    assert header["tokenizer.ggml.tokens"][:3] == ["<pad>", "<eos>", "<bos>"]
    assert header["gemma3.context_length"] == 32_768


def test_conversion_is_cached_with_its_facts(fresh: FileTokenizer) -> None:
    directory = fresh.path.parent
    facts = json.loads((directory / "tokometer.json").read_text(encoding="utf-8"))
    assert facts["converter_version"] == CONVERTER_VERSION
    assert facts["special_tokens"]["bos_token"] == "<bos>"
    assert "Gemma's turn format" in facts["chat_template_source"]
    assert [p.name for p in directory.iterdir() if p.name.startswith(".")] == []  # no partial files left
    again = gguf_tokenizer(bundled_model_path(), cache_dir=directory.parent)
    assert again.path == fresh.path
    assert (again.kind, again.context_length) == ("gguf", 32_768)


def test_a_cache_that_cannot_be_written_converts_in_a_temporary_directory(fresh: FileTokenizer,
                                                                         tmp_path: Path) -> None:
    """``XDG_CACHE_HOME=/dev/null`` (or a read-only home) had made every command that counts tokens fail with
    "cannot write the converted tokenizer": the conversion now goes to a temporary directory, removed once the
    tokenizer is loaded, and counts as the cached one does."""
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("", encoding="utf-8")
    uncached = gguf_tokenizer(bundled_model_path(), cache_dir=not_a_directory)
    text = "Tokens, counted the same: 大模型推理速度"
    assert uncached.encode(text) == fresh.encode(text) and uncached.context_length == 32_768
    assert not uncached.path.exists() and not_a_directory.read_text(encoding="utf-8") == ""


def test_a_stale_cache_is_not_used(fresh: FileTokenizer, tmp_path: Path) -> None:
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "tokometer.json").write_text(json.dumps({"converter_version": 0}), encoding="utf-8")
    (stale / "tokenizer.json").write_bytes(fresh.path.read_bytes())
    assert _load_cached(stale, bundled_model_path(), None) is None  # an older converter's output is redone
    (stale / "tokometer.json").write_text("{broken", encoding="utf-8")
    assert _load_cached(stale, bundled_model_path(), None) is None


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_replaced_cache_file_is_converted_again_not_waited_on(tmp_path: Path) -> None:
    """The cached facts were read whole, unbounded: ``/dev/zero`` in their place took the memory, a FIFO waited
    for a writer forever, a JSON list was an AttributeError's traceback. Now each is passed over (converted
    again)."""
    import os

    replaced = tmp_path / "replaced"
    replaced.mkdir()
    facts = replaced / "tokometer.json"
    facts.symlink_to("/dev/zero")
    assert _load_cached(replaced, bundled_model_path(), None) is None
    facts.unlink()
    os.mkfifo(facts)
    assert _load_cached(replaced, bundled_model_path(), None) is None
    facts.unlink()
    facts.write_text("[]", encoding="utf-8")
    assert _load_cached(replaced, bundled_model_path(), None) is None


@pytest.mark.slow
def test_gemma_conversion_equals_transformers_converter(header: dict[str, Any], fresh: FileTokenizer) -> None:
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING
    from transformers.integrations.gguf.gguf_tokenizer_mapping import convert_gguf_tokenizer as reference

    fields = {name: header[f"tokenizer.{key}"] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
              if f"tokenizer.{key}" in header}
    theirs, _ = reference("gemma3", fields)
    ours = json.loads(fresh.path.read_text(encoding="utf-8"))
    expected = json.loads(theirs.to_str())
    assert ours["model"] == expected["model"]  # vocabulary, merges, byte fallback
    assert ours["added_tokens"] == expected["added_tokens"]
    for key in ("normalizer", "pre_tokenizer", "decoder"):
        assert ours[key] == expected[key]
    for text in TEXTS:
        assert fresh.encode(text) == theirs.encode(text, add_special_tokens=False).ids


def test_round_trip_and_pieces(fresh: FileTokenizer) -> None:
    for text in TEXTS:
        assert fresh.decode(fresh.encode(text)) == text
    ids = fresh.encode("Hello world")
    assert fresh.pieces(ids) == ["Hello", "\u2581world"]
    assert fresh.offsets("Hello world") == [(0, 5), (5, 11)]


def test_bundled_is_the_default(fresh: FileTokenizer) -> None:
    tok = load_tokenizer(None)
    assert tok.name.startswith("bundled Gemma 3 270M")
    assert tok.encode(TEXTS[1]) == fresh.encode(TEXTS[1])


def _gguf_bytes(fields: list[tuple[str, int, bytes]]) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(fields))
    for key, kind, value in fields:
        out += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", kind) + value
    return out


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _strings(items: list[str]) -> bytes:
    return struct.pack("<IQ", 8, len(items)) + b"".join(_string(t) for t in items)


def test_byte_level_gguf_goes_through_transformers(tmp_path: Path) -> None:
    """A Qwen2-style byte-level BPE written into a GGUF here counts exactly like the tokenizer it came from."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS * 30, trainer)
    model = json.loads(tok.to_str())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda item: item[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    path = tmp_path / "tiny-qwen.gguf"
    path.write_bytes(_gguf_bytes([
        ("general.architecture", 8, _string("qwen2")),
        ("qwen2.context_length", 4, struct.pack("<I", 2048)),
        ("tokenizer.ggml.model", 8, _string("gpt2")),
        ("tokenizer.ggml.pre", 8, _string("qwen2")),
        ("tokenizer.ggml.tokens", 9, _strings(tokens)),
        ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(tokens))
         + b"".join(struct.pack("<i", 3 if t == "<|endoftext|>" else 1) for t in tokens)),
        ("tokenizer.ggml.merges", 9, _strings(merges)),
        ("tokenizer.chat_template", 8, _string("{% for m in messages %}{{ m['content'] }}{% endfor %}")),
    ]))
    converted = gguf_tokenizer(path, cache_dir=tmp_path / "cache")
    for text in TEXTS:
        assert converted.encode(text) == tok.encode(text, add_special_tokens=False).ids, text
    assert converted.context_length == 2048
    assert converted.chat_template_source == "the GGUF's tokenizer.chat_template"


def test_files_without_a_tokenizer_are_clear_errors(tmp_path: Path) -> None:
    empty = tmp_path / "weights-only.gguf"
    empty.write_bytes(_gguf_bytes([("general.architecture", 8, _string("llama"))]))
    with pytest.raises(TokenizerError, match="carries no tokenizer"):
        convert_gguf_tokenizer(read_gguf(empty).metadata, empty)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(_gguf_bytes([("tokenizer.ggml.tokens", 9, _strings(["a", "b"]))])[:-3])
    with pytest.raises(TokenizerError, match="GGUF header"):
        gguf_tokenizer(cut, cache_dir=tmp_path / "cache")
