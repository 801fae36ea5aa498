"""``tokometer count`` as a user runs it: the bundled tokenizer offline, chats, JSONL, prices, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.unit.tokens.test_tokens_hf import make_bpe_dir

OFFLINE = {"HF_HUB_OFFLINE": "1", "HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
ARTICLE = "大模型推理速度是落地的关键指标，token 是计算的基本单位。"


def count(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("count", *args, env={**OFFLINE, **(env or {})})


def count_json(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = count(*args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_default_is_the_bundled_gemma_offline() -> None:
    data = count_json(ARTICLE)
    assert data["schema"] == "tokometer.count/1"
    assert data["tokens"] == 16 and data["characters"] == 31
    assert data["chars_per_token"] == pytest.approx(31 / 16, abs=1e-3)
    assert str(data["tokenizer"]["name"]).startswith("bundled Gemma 3 270M")
    assert data["context"] == {"window": 32768, "source": "GGUF gemma3.context_length", "left_for_output": 32752}


def test_show_pieces_and_ids_side_by_side() -> None:
    result = count("--show", "Hello world, unbelievable!")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("9259" in line and "Hello" in line for line in lines)
    assert any("▁unbelievable" in line for line in lines)
    data = count_json("--show", "深度学习")
    assert len(data["ids"]) == len(data["pieces"]) == data["tokens"]


def test_chat_reports_the_template_overhead() -> None:
    chat = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "你好"}]
    data = count_json("--chat", json.dumps(chat))
    assert data["tokens"] == 29  # what llama.cpp reports as prompt_tokens for this chat (test_count_engine.py)
    assert data["chat"] == {"messages": 4, "content_tokens": 9, "template_tokens": 20,
                            "template": "Gemma's turn format (the GGUF has none; llama.cpp gets the same)"}
    plain = count_json("--chat", "Hello world!")  # a plain text is one user message
    assert plain["chat"]["content_tokens"] == 3


def test_stdin_file_and_jsonl(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tokometer", "count", "--json"], input="Hello world!",
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tokens"] == 3
    text = tmp_path / "prompt.txt"
    text.write_text(ARTICLE, encoding="utf-8")
    assert count_json("-f", str(text))["tokens"] == 16
    many = tmp_path / "prompts.jsonl"
    many.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in
                              [ARTICLE, {"prompt": "Hello world!"}, {"messages": [{"role": "user", "content": "Hi"}]}]),
                    encoding="utf-8")
    data = count_json("-f", str(many))
    assert data["records"] == 3 and data["tokens"] == 16 + 3 + 1
    assert data["per_record"]["max"] == 16
    chats = count_json("-f", str(many), "--chat")
    assert chats["chat"]["template_tokens"] > 0


def test_price_from_a_users_table(tmp_path: Path) -> None:
    table = tmp_path / "prices.toml"
    table.write_text('[models."local-gemma"]\ninput = 1.0\noutput = 4.0\ncontext = 8192\ntokenizer = "bundled"\n',
                     encoding="utf-8")
    data = count_json("--model", "local-gemma", "--prices", str(table), "--price", "--output-tokens", "100", ARTICLE)
    assert data["cost"]["input_cost"] == pytest.approx(16 / 1e6)
    assert data["cost"]["output_cost"] == pytest.approx(400 / 1e6)
    assert data["context"]["window"] == 8192 and data["context"]["fits"] is True
    shown = count("--model", "local-gemma", "--prices", str(table), "--price", ARTICLE)
    assert "$0.000016 for 16 input tokens" in shown.stdout
    too_long = count("--model", "local-gemma", "--prices", str(table), "--output-tokens", "9000", ARTICLE)
    assert "9,000 tokens: does NOT fit (16 + 9,000 = 9,016 > 8,192)" in too_long.stdout
    listed = count("--list-prices")
    assert listed.returncode == 0 and "gpt-4o" in listed.stdout and "starting point" in listed.stdout


def test_hugging_face_directory_with_chat_template(tmp_path: Path) -> None:
    directory = make_bpe_dir(tmp_path / "model")
    data = count_json("--tokenizer", str(directory), "--chat",
                      '[{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "你好"}]')
    assert data["tokenizer"]["kind"] == "hf" and data["chat"]["template_tokens"] > 0
    assert data["context"]["window"] == 8192


@pytest.mark.parametrize(("args", "message"), [
    (("--model", "example-org/no-such-model", "hi"), "not in the local Hugging Face cache"),
    (("--model", "gpt-4o", "hi"), "tiktoken encoding 'o200k_base'"),
    (("-f", "/nonexistent/prompt.txt"), "cannot read /nonexistent/prompt.txt"),
    (("--chat", '[{"role": "user", "content": "hi"'), "invalid chat JSON"),
    (("--tokenizer", "./missing.gguf", "hi"), "no such file or directory"),
    (("--price", "hi"), "--price needs --model"),
])
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    result = count(*args, env={"TIKTOKEN_CACHE_DIR": str(tmp_path)})
    assert result.returncode == 2, result.stdout
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_binary_input_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = count("-f", str(binary))
    assert result.returncode == 2 and "binary" in result.stderr and len(result.stderr.splitlines()) == 1
    piped = subprocess.run([sys.executable, "-m", "tokometer", "count"], input=b"\x00\x01\x02",
                           capture_output=True, timeout=60)
    assert piped.returncode == 2 and b"stdin is binary" in piped.stderr
