"""OpenAI tokenizers: a tiktoken Encoding built here from local ranks, the chat formula, offline errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import tiktoken

from tokometer.tokens import TiktokenTokenizer, count_chat, fit_to_budget, load_tokenizer
from tokometer.tokens.tiktoken_ import openai_encoding_for_model
from tokometer.util.errors import TokenizerError

PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
TEXTS = ["hello world", "hello hello world world", "大模型推理速度", " spaces  here\n", "", "<|endoftext|> plain"]


@pytest.fixture(scope="module")
def encoding() -> tiktoken.Encoding:
    ranks = {bytes([i]): i for i in range(256)}
    for piece in (b"he", b"ll", b"hell", b"hello", b" w", b"or", b" wor", b" world", b"ld"):
        ranks[piece] = len(ranks)
    return tiktoken.Encoding("tiny_test", pat_str=PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": len(ranks)})


def test_counts_equal_tiktoken(encoding: tiktoken.Encoding) -> None:
    tok = TiktokenTokenizer(encoding)
    for text in TEXTS:
        assert tok.encode(text) == encoding.encode_ordinary(text)
        assert tok.count(text) == len(encoding.encode_ordinary(text))
        assert tok.decode(tok.encode(text)) == text
    assert tok.count_batch(TEXTS) == [len(encoding.encode_ordinary(t)) for t in TEXTS]
    hello, world = encoding.encode_single_token(b"hello"), encoding.encode_single_token(b" world")
    assert tok.encode("hello world") == [hello, world]
    assert tok.pieces(tok.encode("hello world")) == ["hello", " world"]
    assert tok.name == "tiktoken:tiny_test"


def test_chat_uses_openai_cookbook_formula(encoding: tiktoken.Encoding) -> None:
    tok = TiktokenTokenizer(encoding)
    messages = [{"role": "system", "content": "hello"}, {"role": "user", "content": "hello world", "name": "bob"}]
    chat = count_chat(tok, messages)
    roles = sum(tok.count(m["role"]) for m in messages)
    assert chat.content == tok.count("hello") + tok.count("hello world")
    assert chat.total == chat.content + roles + 3 * 2 + (1 + tok.count("bob")) + 3
    assert "cookbook" in chat.template_source
    with pytest.raises(TokenizerError, match="does not publish"):
        tok.render_chat(messages)


def test_fit_to_budget_on_byte_tokens(encoding: tiktoken.Encoding) -> None:
    tok = TiktokenTokenizer(encoding)
    text = "hello world 大模型推理速度 hello"
    for budget in range(0, tok.count(text) + 2):
        kept = fit_to_budget(text, budget, tok)
        assert tok.count(kept) <= budget and text.startswith(kept)


def test_model_names_map_to_encodings() -> None:
    assert openai_encoding_for_model("gpt-4o") == "o200k_base"
    assert openai_encoding_for_model("gpt-4") == "cl100k_base"
    assert openai_encoding_for_model("Qwen/Qwen2.5-7B-Instruct") is None


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty tiktoken cache, and every HTTPS request sent to a closed local port."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    return tmp_path


def test_offline_error_names_the_encoding_and_the_way_out(no_network: Path) -> None:
    with pytest.raises(TokenizerError) as info:
        load_tokenizer("gpt-4o")
    message = str(info.value)
    assert "'o200k_base'" in message and "TIKTOKEN_CACHE_DIR" in message and "o200k_base.tiktoken" in message
    assert "characters" in message and "\n" not in message
    with pytest.raises(TokenizerError, match="unknown tiktoken encoding 'nope'"):
        load_tokenizer("tiktoken:nope")


def test_local_ranks_file_is_checked(no_network: Path, tmp_path: Path) -> None:
    fake = tmp_path / "local" / "cl100k_base.tiktoken"
    fake.parent.mkdir()
    fake.write_bytes(b"aGVsbG8= 0\n")
    with pytest.raises(TokenizerError, match="not the cl100k_base ranks file"):
        load_tokenizer(str(fake))
    oddly_named = tmp_path / "local" / "mine.tiktoken"
    oddly_named.write_bytes(b"aGVsbG8= 0\n")
    with pytest.raises(TokenizerError, match="name the file after its encoding"):
        load_tokenizer(str(oddly_named))


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_local_ranks_file_is_read_within_a_bound(no_network: Path, tmp_path: Path) -> None:
    """A local ranks file was read whole, unbounded (``/dev/zero`` under its name: the memory), and a FIFO
    waited for a writer forever: at most 16 MiB (real ones are a few MB), and a FIFO reads as empty, which is
    not the ranks file."""
    import os

    local = tmp_path / "local"
    local.mkdir()
    zero = local / "o200k_base.tiktoken"
    zero.symlink_to("/dev/zero")
    with pytest.raises(TokenizerError, match=r"o200k_base\.tiktoken is larger than 16 MiB: not the o200k_base"):
        load_tokenizer(str(zero))
    fifo = local / "cl100k_base.tiktoken"
    os.mkfifo(fifo)
    with pytest.raises(TokenizerError, match="not the cl100k_base ranks file"):
        load_tokenizer(str(fifo))
