"""The bundled GGUF's converted tokenizer against llama.cpp's own tokenization of the same model.

llama.cpp is the reference here: its ``/tokenize`` (no special tokens added) for the ids, and the
``prompt_tokens`` of a real chat completion for chat-template counts.
"""

from __future__ import annotations

import json
import random
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import require_llama_server, run_cli
from tokometer.engines import EngineHandle, LlamaCppSettings, start_llamacpp
from tokometer.tokens import BaseTokenizer, ServerTokenizer, count_chat, fit_to_budget, load_tokenizer

pytestmark = pytest.mark.engine

TEXTS = [
    "Hello world!", "unbelievable", "深度学习", "大模型推理速度是落地的关键指标，token 是计算的基本单位。",
    "请用 500 字左右介绍大模型推理加速的基本思路。", "中文English混合mixed文本。", "  leading", "trailing  ",
    "a   b    c\n\n\n  d", "\t\t  \n", "  def f(x):\n\treturn x**2  # 😀", "🙂🙃👨‍👩‍👧‍👦 ", "x" * 300,
    "https://example.com/a?b=c&d=e#frag", "1234567890 3.14159 1e-9", "Ünïcödé façade naïve café ﬁ ㈱ ℌ",
    "\u200b zero width \u00a0nbsp", "ααα βββ γγγ русский текст العربية हिन्दी", "<b>html</b> &amp; {\"json\": [1, 2]}",
    "<start_of_turn>user\nhi<end_of_turn>\n", "", " ",
]
CHATS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"},
     {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "你好，请介绍一下大模型推理。"}],
    [{"role": "user", "content": "  padded  \n"}, {"role": "assistant", "content": "ok 😀"},
     {"role": "user", "content": "def f():\n    pass"}],
]


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineHandle]:
    require_llama_server()
    with start_llamacpp(LlamaCppSettings(parallel=1)) as handle:
        yield handle


@pytest.fixture(scope="module")
def gemma() -> BaseTokenizer:
    return load_tokenizer("bundled")


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def _random_texts(n: int) -> list[str]:
    rng = random.Random(7)
    alphabet = "abcdefghij klmnop 大模型推理速度的关键指标，。\n\t😀ÄéçΩ{}();=#"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(n)]


def test_ids_equal_llama_cpp(engine: EngineHandle, gemma: BaseTokenizer) -> None:
    for text in TEXTS + _random_texts(60):
        theirs = _post(engine.root_url + "/tokenize", {"content": text, "add_special": False})["tokens"]
        assert gemma.encode(text) == theirs, repr(text)


def test_chat_counts_equal_the_engines_prompt_tokens(engine: EngineHandle, gemma: BaseTokenizer) -> None:
    for messages in CHATS:
        usage = _post(engine.openai_url + "/chat/completions",
                      {"model": engine.model, "messages": messages, "max_tokens": 1})["usage"]
        chat = count_chat(gemma, messages)
        assert chat.total == usage["prompt_tokens"], messages
        assert chat.template > 0 and chat.content + chat.template == chat.total
        rendered = _post(engine.root_url + "/apply-template", {"messages": messages})["prompt"]
        assert gemma.render_chat(messages) == "<bos>" + rendered  # llama.cpp strips the BOS and adds it back


def test_server_tokenizer_agrees(engine: EngineHandle, gemma: BaseTokenizer) -> None:
    server = load_tokenizer(engine.openai_url)
    assert isinstance(server, ServerTokenizer)
    assert server.context_length == 4096 and "props" in server.context_source
    assert server.count(TEXTS[3]) == gemma.count(TEXTS[3])
    assert server.count_chat(CHATS[1]) == gemma.count_chat(CHATS[1])


def test_fit_to_budget_is_exact_by_the_engines_count(engine: EngineHandle, gemma: BaseTokenizer) -> None:
    text = " ".join(TEXTS) * 3
    for budget in (1, 7, 50, 123):
        for cut in ("end", "start", "middle"):
            kept = fit_to_budget(text, budget, gemma, cut=cut)
            theirs = _post(engine.root_url + "/tokenize", {"content": kept, "add_special": False})["tokens"]
            assert len(theirs) <= budget and len(theirs) >= budget - 4, (budget, cut)


def test_count_cli_against_the_engine_url(engine: EngineHandle) -> None:
    result = run_cli("count", "--tokenizer", engine.openai_url, "--json", TEXTS[3])
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tokenizer"]["kind"] == "server"
    assert data["tokens"] == len(_post(engine.root_url + "/tokenize", {"content": TEXTS[3]})["tokens"])
