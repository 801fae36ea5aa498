"""Prompt sources: exact-length synthetic prompts with a real tokenizer, files, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from tokometer.datasets import FixedSource, JsonlSource, ShareGPTSource, SyntheticSource, load_source_file
from tokometer.datasets.words import WORDS
from tokometer.tokens import FileTokenizer
from tokometer.util.errors import DatasetError


@pytest.fixture(scope="module")
def bpe_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small byte-level BPE tokenizer trained here, so merges make lengths non-trivial."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]"], show_progress=False)
    corpus = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(0, len(WORDS), 7)]
    tok.train_from_iterator(corpus, trainer)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.mark.parametrize("length", [1, 7, 64, 500])
def test_synthetic_prompts_have_exactly_n_tokens(bpe_path: Path, length: int) -> None:
    tokenizer = FileTokenizer(bpe_path)
    source = SyntheticSource(length, tokenizer=tokenizer, seed=1, unique=5)
    source.prepare(5)
    prompts = [p for p, _ in zip(source.prompts(), range(5), strict=False)]
    assert all(tokenizer.count(p.text) == length for p in prompts)
    assert all(p.input_tokens == length for p in prompts)
    if length > 1:
        assert len({p.text for p in prompts}) == 5  # distinct, so no prefix cache shortcut


def test_synthetic_is_seeded_and_cycles_after_unique() -> None:
    a = SyntheticSource(10, seed=4, unique=3)
    first = [p.text for p, _ in zip(a.prompts(), range(6), strict=False)]
    assert first[:3] == first[3:]
    assert first == [p.text for p, _ in zip(SyntheticSource(10, seed=4, unique=3).prompts(), range(6), strict=False)]
    assert all(len(t.split()) == 10 for t in first)
    assert next(SyntheticSource(10, seed=4).prompts()).input_tokens is None  # no tokenizer: length unknown


def test_jsonl_prompts_and_chats(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join([
        json.dumps("plain string"),
        json.dumps({"prompt": "hello", "max_tokens": 7}),
        "",
        json.dumps({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}),
    ]))
    source = JsonlSource(path)
    assert len(source) == 3
    assert source.items[1].max_tokens == 7
    assert source.items[2].messages[0].role == "system"
    assert load_source_file(path).name == "jsonl:p.jsonl"


def test_sharegpt_takes_first_answer_length_from_tokenizer(tmp_path: Path, bpe_path: Path) -> None:
    data = [
        {"conversations": [{"from": "human", "value": "question one"}, {"from": "gpt", "value": "time year people"}]},
        {"conversations": [{"from": "gpt", "value": "no human first"}]},
        {"conversations": [{"from": "system", "value": "sys"}, {"from": "human", "value": "q2"},
                           {"from": "gpt", "value": "way day"}]},
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    tokenizer = FileTokenizer(bpe_path)
    source = load_source_file(path, tokenizer=tokenizer)
    assert isinstance(source, ShareGPTSource)
    assert len(source) == 2
    assert source.items[0].max_tokens == tokenizer.count("time year people")
    assert [m.role for m in source.items[1].messages] == ["system", "user"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "a"}\n{"prompt": ', "p.jsonl:2: not valid JSON"),
        ('{"messages": "hi"}', "'messages' must be a non-empty list"),
        ('{"prompt": "a", "max_tokens": -1}', "max_tokens must be a positive integer"),
        ("\n\n", "holds no prompts"),
        ("[1, 2]", "expected a string or an object"),
    ],
)
def test_bad_jsonl_gets_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        JsonlSource(path)


def test_unreadable_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read dataset"):
        load_source_file(tmp_path / "missing.jsonl")
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\x00\xff\x00")
    with pytest.raises(DatasetError, match="binary file"):
        load_source_file(binary)
    with pytest.raises(DatasetError, match="empty"):
        FixedSource("")
