"""Inputs of tokometer count: chat JSON, binary detection, JSONL records counted in batches."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tokometer.engines import bundled_model_path
from tokometer.tokens import BaseTokenizer, FileTokenizer, parse_messages
from tokometer.tokens.counting import count_jsonl, count_text, decode_input
from tokometer.tokens.gguf_vocab import gguf_tokenizer
from tokometer.tokens.template import render_template
from tokometer.util.errors import DatasetError


@pytest.fixture(scope="module")
def gemma() -> BaseTokenizer:
    return gguf_tokenizer(bundled_model_path())


def test_parse_messages_forms_and_errors() -> None:
    one = [{"role": "user", "content": "hi"}]
    assert parse_messages(json.dumps(one)) == one
    assert parse_messages({"messages": one}) == one
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert parse_messages(parts) == parts
    for bad, why in [("[{\"role\": \"user\"", "invalid chat JSON"), ("[]", "non-empty list"),
                     ("{\"x\": 1}", "non-empty list"), ("[1]", "must be an object"),
                     ('[{"content": "x"}]', "needs a 'role'"), ('[{"role": "user"}]', "needs 'content'"),
                     ('[{"role": "user", "content": [{"type": "image_url"}]}]', "only text parts")]:
        with pytest.raises(DatasetError, match=why):
            parse_messages(bad)


def test_render_template_like_transformers() -> None:
    template = ("{% for m in messages %}{{ m['content'] | tojson }}{% endfor %}"
                "{% if add_generation_prompt %}>{% endif %}")
    assert render_template(template, [{"role": "user", "content": "<b>é</b>"}]) == '"<b>é</b>">'


def test_binary_input_is_refused() -> None:
    assert decode_input("héllo".encode(), "x") == "héllo"
    assert decode_input(b"\xef\xbb\xbfbom", "x") == "bom"
    with pytest.raises(DatasetError, match="binary"):
        decode_input(b"ab\x00cd", "stdin")
    with pytest.raises(DatasetError, match="not UTF-8"):
        decode_input(b"caf\xe9", "latin1.txt")


def test_count_text_and_chat(gemma: BaseTokenizer) -> None:
    single = count_text(gemma, "Hello world!")
    assert (single.tokens, single.characters, single.words) == (3, 12, 2)
    chat = count_text(gemma, None, [{"role": "user", "content": "Hello world!"}])
    assert chat.chat is not None and chat.chat.content == 3 and chat.tokens == chat.chat.total > 3


def test_jsonl_records_batched_equal_one_by_one(gemma: BaseTokenizer, tmp_path: Path) -> None:
    records = ["plain string", {"text": "大模型推理"}, {"prompt": "a prompt"}, {"content": "x y"},
               {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}]
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records * 7) + "\n\n", encoding="utf-8")
    seen: list[tuple[int, int]] = []
    batch = count_jsonl(path, gemma, batch_size=4, progress=lambda n, b: seen.append((n, b)))
    expected = [gemma.count("plain string"), gemma.count("大模型推理"), gemma.count("a prompt"),
                gemma.count("x y"), gemma.count("hi") + gemma.count("hello")] * 7
    assert batch.tokens == expected and batch.records == 35
    assert seen[-1] == (35, path.stat().st_size - 1)
    chat = count_jsonl(path, gemma, chat=True)
    chat_record = records[4]
    assert isinstance(chat_record, dict)
    assert chat.tokens[4] == gemma.count_chat(chat_record["messages"])
    assert chat.tokens[0] == gemma.count_chat([{"role": "user", "content": "plain string"}])
    assert chat.template_tokens == chat.total - chat.content_tokens > 0
    from_stream = count_jsonl(io.BytesIO(path.read_bytes()), gemma)
    assert from_stream.tokens == batch.tokens


def test_jsonl_errors_name_the_line(gemma: BaseTokenizer, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('"ok"\n{"text": 1}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="line 2: a record must be"):
        count_jsonl(path, gemma)
    path.write_text('"ok"\n{broken\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="line 2: invalid JSON"):
        count_jsonl(path, gemma)
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="holds no records"):
        count_jsonl(path, gemma)
    assert isinstance(gemma, FileTokenizer)


def test_endless_or_huge_input_is_one_error_not_the_memory(gemma: BaseTokenizer, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``/dev/zero`` (endless NULs) is refused as binary at its first chunk, as a text and as JSONL, and so is an
    endless stdin; a text over `MAX_TEXT_BYTES`, a JSONL line over `MAX_RECORD_BYTES` and a JSONL file over
    `MAX_JSONL_BYTES` are refused naming the bound (the bounds made small here, the readers the real ones); a
    FIFO nobody writes to reads as empty instead of waiting for a writer forever."""
    import os

    from tokometer.tokens import counting

    zero = Path("/dev/zero")
    with pytest.raises(DatasetError, match="/dev/zero is binary"):
        counting.read_text(zero)
    with pytest.raises(DatasetError, match="/dev/zero is binary"):
        count_jsonl(zero, gemma)

    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            buffer[:] = b"a" * len(buffer)
            return len(buffer)

    monkeypatch.setattr(counting, "MAX_TEXT_BYTES", 3 << 20)
    with pytest.raises(DatasetError, match="stdin is larger than 3 MiB: count a larger corpus as JSONL"):
        counting.read_text(io.BufferedReader(Endless()))
    text = tmp_path / "big.txt"
    text.write_bytes(b"word " * ((4 << 20) // 5 + 1))
    with pytest.raises(DatasetError, match=r"big\.txt is larger than 3 MiB"):
        counting.read_text(text)
    monkeypatch.setattr(counting, "MAX_RECORD_BYTES", 1 << 20)
    lines = tmp_path / "long.jsonl"
    lines.write_text('"ok"\n"' + "a" * (2 << 20) + '"\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"long\.jsonl, line 2: longer than 1 MiB \(one record a line\)"):
        count_jsonl(lines, gemma)
    monkeypatch.setattr(counting, "MAX_JSONL_BYTES", 2 << 20)
    many = tmp_path / "many.jsonl"
    many.write_text('"ok"\n' * (1 << 20), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"many\.jsonl is larger than 2 MiB: split it"):
        count_jsonl(many, gemma)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DatasetError, match="holds no records"):
        count_jsonl(fifo, gemma)
    assert counting.read_text(fifo) == ""
