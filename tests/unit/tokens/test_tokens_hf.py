"""Hugging Face tokenizers built here from local files: tokenizer.json, AutoTokenizer, chat templates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokometer.tokens import FileTokenizer, HFTokenizer, count_chat, load_tokenizer
from tokometer.util.errors import TokenizerError

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CORPUS = ["hello world", "大模型推理速度是落地的关键指标，token 是计算的基本单位。", "  spaces   and\ttabs\n\n",
          "emoji 😀👨‍👩‍👧", "def f(x):\n    return x ** 2", "", "<|im_start|> inside text"]
CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello world"},
        {"role": "assistant", "content": "你好，世界"}, {"role": "user", "content": "how many tokens?"}]


def make_bpe_dir(directory: Path, *, template: str | None = CHATML) -> Path:
    """A small byte-level BPE trained here, saved as a model directory with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    text = ["hello world, how many tokens does this take?", "大模型推理速度是落地的关键指标，token 是计算的基本单位。",
            "def f(x):\n    return x ** 2", "You are terse. 你好，世界"]
    tok.train_from_iterator(text * 40, trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    config: dict[str, object] = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
                                 "model_max_length": 4096}
    if template is not None:
        config["chat_template"] = template
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (directory / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bpe_dir(tmp_path_factory.mktemp("bpe"))


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_file_tokenizer_counts_equal_the_library(bpe_dir: Path) -> None:
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(bpe_dir / "tokenizer.json"))
    tok = FileTokenizer(bpe_dir)
    for text in CORPUS:
        assert tok.encode(text) == reference.encode(text, add_special_tokens=False).ids
        assert tok.count(text) == len(reference.encode(text, add_special_tokens=False).ids)
    assert tok.count_batch(CORPUS) == [tok.count(t) for t in CORPUS]
    assert tok.decode(tok.encode(CORPUS[1])) == CORPUS[1]


def test_auto_tokenizer_from_a_local_directory(bpe_dir: Path) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(bpe_dir))
    tok = load_tokenizer(str(bpe_dir))
    assert isinstance(tok, HFTokenizer)
    for text in CORPUS:
        assert tok.encode(text) == reference.encode(text, add_special_tokens=False)
    assert tok.count_batch(CORPUS) == [len(reference.encode(t, add_special_tokens=False)) for t in CORPUS]
    assert tok.pieces(tok.encode("hello")) == reference.convert_ids_to_tokens(reference.encode("hello"))
    assert (tok.context_length, tok.context_source) == (8192, "config.json max_position_embeddings")


def test_chat_template_overhead_of_a_multi_turn_chat(bpe_dir: Path) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(bpe_dir))
    ids = reference.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True, return_dict=False)
    content = sum(len(reference.encode(m["content"], add_special_tokens=False)) for m in CHAT)
    # The template's own tokens, counted by hand: per message <|im_start|> role \n ... <|im_end|> \n,
    # then <|im_start|> assistant \n to prompt the answer.
    newline = len(reference.encode("\n", add_special_tokens=False))
    by_hand = sum(1 + len(reference.encode(m["role"], add_special_tokens=False)) + newline + 1 + newline
                  for m in CHAT) + 1 + len(reference.encode("assistant", add_special_tokens=False)) + newline
    for tok in (load_tokenizer(str(bpe_dir)), load_tokenizer(str(bpe_dir / "tokenizer.json"))):
        chat = count_chat(tok, CHAT)
        assert chat.total == len(ids), tok.name
        assert chat.content == content
        assert chat.template == len(ids) - content == by_hand
        assert chat.messages == 4


def test_tokenizer_json_beside_its_config_renders_like_transformers(bpe_dir: Path) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(bpe_dir))
    tok = load_tokenizer(str(bpe_dir / "tokenizer.json"))
    assert isinstance(tok, FileTokenizer)
    assert tok.render_chat(CHAT) == reference.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert tok.context_length == 4096


def test_no_chat_template_is_an_error(tmp_path: Path) -> None:
    tok = load_tokenizer(str(make_bpe_dir(tmp_path / "plain", template=None) / "tokenizer.json"))
    with pytest.raises(TokenizerError, match="no chat template"):
        tok.count_chat(CHAT)


def test_uncached_model_id_offline_is_one_clear_error() -> None:
    with pytest.raises(TokenizerError) as info:
        load_tokenizer("example-org/no-such-model-here")
    message = str(info.value)
    assert "example-org/no-such-model-here" in message
    assert "offline" in message and "--tokenizer" in message and "characters" in message
    assert "\n" not in message


def test_missing_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="no such file"):
        load_tokenizer(str(tmp_path / "nothing.gguf"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerError, match="cannot load tokenizer"):
        load_tokenizer(str(bad))
    other = tmp_path / "notes.txt"
    other.write_text("hello", encoding="utf-8")
    with pytest.raises(TokenizerError, match="is not a tokenizer"):
        load_tokenizer(str(other))
