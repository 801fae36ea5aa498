"""The official `openai` Python SDK as a client of an OpenAI-compatible endpoint (the gateway, usually).

`check_endpoint` drives one base URL through the SDK the way applications do: the model list, chat and
legacy completions, each streamed (with ``stream_options={"include_usage": True}``) and not; every answer
must parse into the SDK's own types, end once, carry its usage once (the last chunk, with no choices, when
streamed), and hold text that adds up to that usage (`tokometer.metrics.textcheck`, by bytes). Each request
is greedy (temperature 0) with a fresh ``seed``, which changes no greedy answer but keeps the gateway's cache
from replaying one answer for the next.
`check_errors` checks that error statuses surface as the SDK's exception classes. Both take only a URL,
so the same checks run against the gateway in front of `tokometer sim` (tests/integration/test_openai_sdk.py)
or in front of a real engine:

    python -m tests.openai_sdk --base-url http://127.0.0.1:8432/v1 --model MODEL [--api-key KEY] [--greedy]
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict, dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessageParam

from tokometer.metrics.textcheck import is_short

__all__ = ["Answer", "check_endpoint", "check_errors", "sdk_client"]

PROMPT = "The capital of France is"


def _seed() -> int:
    return random.randrange(2**31)


@dataclass(frozen=True, slots=True)
class Answer:
    """What one SDK call came back with."""

    endpoint: str
    streamed: bool
    text: str
    text_events: int
    completion_tokens: int
    prompt_tokens: int
    finish_reason: str


def sdk_client(base_url: str, api_key: str = "none", timeout_s: float = 60) -> openai.OpenAI:
    """The SDK's client for ``base_url`` (…/v1), without its retries (a retried error would hide the first)."""
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s)


def _checked(answer: Answer, max_tokens: int) -> Answer:
    where = f"{answer.endpoint} ({'streamed' if answer.streamed else 'whole'})"
    assert answer.text, f"{where}: no text: {answer}"
    assert 0 < answer.completion_tokens <= max_tokens, f"{where}: usage {answer.completion_tokens}: {answer}"
    assert answer.prompt_tokens > 0, f"{where}: no prompt tokens in the usage: {answer}"
    assert not is_short(answer.completion_tokens, len(answer.text.encode())), \
        f"{where}: {len(answer.text.encode())} bytes of text for {answer.completion_tokens} tokens: {answer}"
    assert answer.finish_reason in ("stop", "length"), f"{where}: finish_reason {answer.finish_reason!r}"
    return answer


def _stream_ending(chunks: list[Any], where: str) -> tuple[Any, str]:
    """The usage of a stream asked to include it, and its one finish reason."""
    usages = [c for c in chunks if c.usage is not None]
    assert len(usages) == 1 and usages[0] is chunks[-1], f"{where}: usage in {len(usages)} chunks, not the last one"
    assert chunks[-1].choices == [], f"{where}: the usage chunk has choices"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishes) == 1, f"{where}: finish reasons {finishes}"
    return usages[0].usage, finishes[0]


def chat(client: openai.OpenAI, model: str, stream: bool, max_tokens: int = 8, prompt: str = PROMPT) -> Answer:
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": prompt}]
    if not stream:
        whole = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens,
                                               temperature=0, seed=_seed())
        assert whole.object == "chat.completion" and whole.usage is not None
        choice = whole.choices[0]
        return _checked(Answer("chat", False, choice.message.content or "", 1, whole.usage.completion_tokens,
                               whole.usage.prompt_tokens, str(choice.finish_reason)), max_tokens)
    chunks = list(client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens,
                                                 temperature=0, seed=_seed(), stream=True,
                                                 stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    usage, finish = _stream_ending(chunks, "chat (streamed)")
    return _checked(Answer("chat", True, "".join(texts), len(texts), usage.completion_tokens, usage.prompt_tokens,
                           finish), max_tokens)


def completion(client: openai.OpenAI, model: str, stream: bool, max_tokens: int = 8, prompt: str = PROMPT) -> Answer:
    if not stream:
        whole = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                          seed=_seed())
        assert whole.object == "text_completion" and whole.usage is not None
        choice = whole.choices[0]
        return _checked(Answer("completions", False, choice.text, 1, whole.usage.completion_tokens,
                               whole.usage.prompt_tokens, str(choice.finish_reason)), max_tokens)
    chunks = list(client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                            seed=_seed(), stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "text_completion" for c in chunks)
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    usage, finish = _stream_ending(chunks, "completions (streamed)")
    return _checked(Answer("completions", True, "".join(texts), len(texts), usage.completion_tokens,
                           usage.prompt_tokens, finish), max_tokens)


def check_endpoint(base_url: str, model: str, api_key: str = "none", max_tokens: int = 8,
                   greedy: bool = False) -> list[Answer]:
    """Every check above against ``base_url``; raises AssertionError (or the SDK's error) on the first that fails.
    ``greedy``: the server decodes temperature 0 deterministically (a real engine, not the simulator), so a
    streamed answer must equal the whole one, word for word."""
    with sdk_client(base_url, api_key) as client:
        ids = [m.id for m in client.models.list()]
        assert model in ids, f"{model!r} is not in the model list {ids}"
        answers = [chat(client, model, False, max_tokens), chat(client, model, True, max_tokens),
                   completion(client, model, False, max_tokens), completion(client, model, True, max_tokens)]
    if greedy:
        for whole, streamed in (answers[0:2], answers[2:4]):
            assert streamed.text == whole.text, f"{whole.endpoint}: streamed {streamed.text!r}, whole {whole.text!r}"
            assert streamed.completion_tokens == whole.completion_tokens
    return answers


def check_errors(base_url: str, model: str, api_key: str = "none") -> dict[str, str]:
    """Errors the gateway itself decides, as the SDK raises them: an unknown model (404), streamed or not."""
    seen: dict[str, str] = {}
    with sdk_client(base_url, api_key) as client:
        for stream in (False, True):
            try:
                client.chat.completions.create(model=f"{model}-that-is-not-routed", max_tokens=4, stream=stream,
                                               messages=[{"role": "user", "content": PROMPT}])
            except openai.NotFoundError as error:
                assert error.status_code == 404
                seen[f"unknown model{' (streamed)' if stream else ''}"] = type(error).__name__
            else:
                raise AssertionError("an unknown model was answered")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="none")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--greedy", action="store_true")
    args = parser.parse_args()
    answers = check_endpoint(args.base_url, args.model, args.api_key, args.max_tokens, args.greedy)
    errors = check_errors(args.base_url, args.model, args.api_key)
    print(json.dumps({"answers": [asdict(a) for a in answers], "errors": errors}, indent=2))


if __name__ == "__main__":
    main()
