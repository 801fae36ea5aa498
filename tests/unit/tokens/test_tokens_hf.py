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


def test_a_template_from_a_jinja_file_or_a_named_list_is_used_and_said_so(bpe_dir: Path, tmp_path: Path) -> None:
    """A tokenizer.json's template where its tokenizer_config.json has none: chat_template.jinja, and said to come
    from there (it had been labelled "tokenizer_config.json chat_template"); a config's list of named templates
    (transformers' form for several) gives the one named ``default``, as transformers applies, rendering alike."""
    from transformers import AutoTokenizer

    jinja = tmp_path / "jinja"
    jinja.mkdir()
    (jinja / "tokenizer.json").write_bytes((bpe_dir / "tokenizer.json").read_bytes())
    (jinja / "chat_template.jinja").write_text(CHATML, encoding="utf-8")
    from_file = load_tokenizer(str(jinja / "tokenizer.json"))
    assert isinstance(from_file, FileTokenizer) and from_file.chat_template_source == "chat_template.jinja"
    named = make_bpe_dir(tmp_path / "named", template=None)
    config = json.loads((named / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = [{"name": "tool_use", "template": "{{ 'tools' }}"},
                               {"name": "default", "template": CHATML}]
    (named / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    tok = load_tokenizer(str(named / "tokenizer.json"))
    assert isinstance(tok, FileTokenizer) and tok.chat_template_source == "tokenizer_config.json chat_template"
    reference = AutoTokenizer.from_pretrained(str(named))
    assert tok.render_chat(CHAT) == reference.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert tok.render_chat(CHAT) == from_file.render_chat(CHAT)


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


def _sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that is one hole: no disk, no time to write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def _beside(bpe_dir: Path, directory: Path) -> Path:
    """``bpe_dir``'s tokenizer.json alone in ``directory`` (whose other files each test writes)."""
    directory.mkdir(parents=True)
    target = directory / "tokenizer.json"
    target.write_bytes((bpe_dir / "tokenizer.json").read_bytes())
    return target


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_tokenizer_json_is_read_within_a_bound(tmp_path: Path) -> None:
    """A tokenizer.json went to the library, which read it to its end: a huge one took that much memory (and
    ``/dev/zero`` all of it), and a FIFO given as ``--tokenizer`` waited for a writer forever (in the check of its
    first bytes). It is read here, at most 256 MiB, and handed over as bytes: larger is one error naming the
    bound, a FIFO reads as empty (so: not a tokenizer), a file not in UTF-8 is an error naming the byte."""
    import os

    from tokometer.tokens.hf import MAX_TOKENIZER_BYTES

    huge = _sparse(tmp_path / "huge" / "tokenizer.json", MAX_TOKENIZER_BYTES + 1)
    with pytest.raises(TokenizerError, match=r"tokenizer\.json is larger than 256 MiB: a tokenizer\.json is a"):
        load_tokenizer(str(huge))
    zero = tmp_path / "zero" / "tokenizer.json"
    zero.parent.mkdir()
    zero.symlink_to("/dev/zero")
    with pytest.raises(TokenizerError, match=r"zero/tokenizer\.json is larger than 256 MiB"):
        load_tokenizer(str(zero))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(TokenizerError, match=r"cannot load tokenizer .*fifo\.json: EOF while parsing"):
        load_tokenizer(str(fifo))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"version": "caf\xe9"}')
    with pytest.raises(TokenizerError, match=r"^tokenizer .*latin\.json: not UTF-8 text \(byte 16\)$"):
        load_tokenizer(str(latin))


@pytest.mark.timeout(60)
def test_the_files_beside_a_tokenizer_json_are_read_within_a_bound(bpe_dir: Path, tmp_path: Path) -> None:
    """tokenizer_config.json and chat_template.jinja were read whole, unbounded; a jinja not in UTF-8 ended in a
    UnicodeDecodeError traceback, a config not in UTF-8 was silently passed over (and with it the chat
    template). Now: larger than its bound or not UTF-8 is one error naming the file; a FIFO in their place is
    passed over, as a missing file is."""
    import os

    from tokometer.tokens.loader import MAX_TOKENIZER_CONFIG_BYTES

    big = _beside(bpe_dir, tmp_path / "big")
    _sparse(big.parent / "tokenizer_config.json", MAX_TOKENIZER_CONFIG_BYTES + 1)
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json is larger than 16 MiB"):
        load_tokenizer(str(big))
    latin = _beside(bpe_dir, tmp_path / "latin")
    (latin.parent / "tokenizer_config.json").write_bytes(b'{"chat_template": "caf\xe9"}')
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json: not UTF-8 text \(byte 22\)$"):
        load_tokenizer(str(latin))
    jinja = _beside(bpe_dir, tmp_path / "jinja")
    (jinja.parent / "chat_template.jinja").write_bytes(b"{{ 'caf\xe9' }}")
    with pytest.raises(TokenizerError, match=r"chat_template\.jinja: not UTF-8 text \(byte 7\)$"):
        load_tokenizer(str(jinja))
    fifo = _beside(bpe_dir, tmp_path / "fifo")
    os.mkfifo(fifo.parent / "tokenizer_config.json")
    os.mkfifo(fifo.parent / "chat_template.jinja")
    tok = load_tokenizer(str(fifo))
    assert tok.count("hello world") > 0 and tok.chat_template is None and tok.context_length is None


@pytest.mark.timeout(60)
def test_a_model_directory_for_transformers_is_checked_first(bpe_dir: Path, tmp_path: Path) -> None:
    """transformers reads a model directory's files whole, with no bound: a FIFO among them waited for a writer
    forever, a huge one took the memory. Those files are checked before it is called: each a regular file of at
    most 256 MiB. The model's config.json, read for the context length, is bounded and need not be an object."""
    import os

    from tokometer.tokens.hf import MAX_TOKENIZER_BYTES
    from tokometer.tokens.hf_auto import _context_from_config

    fifo = _beside(bpe_dir, tmp_path / "fifo").parent
    os.mkfifo(fifo / "tokenizer_config.json")
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json is not a regular file \(a pipe or a device\?\)"):
        load_tokenizer(str(fifo))
    huge = _beside(bpe_dir, tmp_path / "huge").parent
    _sparse(huge / "vocab.json", MAX_TOKENIZER_BYTES + 1)
    with pytest.raises(TokenizerError, match=r"vocab\.json is larger than 256 MiB"):
        load_tokenizer(str(huge))
    (fifo / "config.json").write_text("[1]", encoding="utf-8")
    assert _context_from_config(str(fifo)) == (None, "")
    _sparse(huge / "config.json", 5 << 20)
    assert _context_from_config(str(huge)) == (None, "")


@pytest.mark.timeout(60)
def test_an_ollama_manifest_is_read_within_a_bound(tmp_path: Path) -> None:
    """An Ollama manifest was read whole, unbounded, and one not a JSON object ended in an AttributeError
    traceback: at most 1 MiB, a FIFO reads as empty (not JSON), a list names no model file."""
    import os

    from tokometer.tokens.loader import ollama_model_path

    manifest = tmp_path / "manifests" / "registry.ollama.ai" / "library" / "m" / "latest"
    manifest.parent.mkdir(parents=True)
    manifest.symlink_to("/dev/zero")
    with pytest.raises(TokenizerError, match=r"latest is larger than 1 MiB: an Ollama manifest is"):
        ollama_model_path("m", tmp_path)
    manifest.unlink()
    os.mkfifo(manifest)
    with pytest.raises(TokenizerError, match=r"^Ollama manifest .*latest: not valid JSON"):
        ollama_model_path("m", tmp_path)
    manifest.unlink()
    manifest.write_text("[]", encoding="utf-8")
    with pytest.raises(TokenizerError, match="names no model file"):
        ollama_model_path("m", tmp_path)
    with pytest.raises(TokenizerError, match="'other' not found in"):
        ollama_model_path("other", tmp_path)


def test_count_with_a_bad_tokenizer_file_is_one_line_and_status_2(bpe_dir: Path, tmp_path: Path) -> None:
    """Through the command line: exit 2 and one ``tokometer: error:`` line, no traceback, no wait (a FIFO as
    ``--tokenizer`` waited for a writer forever; a chat_template.jinja not in UTF-8 was a traceback)."""
    import os

    from tests.conftest import run_cli

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    jinja = _beside(bpe_dir, tmp_path / "jinja")
    (jinja.parent / "chat_template.jinja").write_bytes(b"{{ 'caf\xe9' }}")
    piped = _beside(bpe_dir, tmp_path / "piped").parent
    os.mkfifo(piped / "tokenizer_config.json")
    for path, said in ((fifo, "EOF while parsing"), (jinja, "not UTF-8 text (byte 7)"),
                       (piped, "is not a regular file")):
        done = run_cli("count", "-t", str(path), "hello", env={"HF_HUB_OFFLINE": "1"}, timeout=60)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tokometer: error: ") and said in lines[0], done.stderr
