"""JSON a peer sends whole goes through one door (`tokometer.util.jsontext.loads`): nesting past 1,024, NaN,
numbers past a double's range and values of the wrong kind are one error where they arrive.

Before, the readers each parsed for themselves: an "Ollama" server whose pull progress line was a JSON list, or
whose byte counts were strings, ended ``serve --engine ollama`` in an AttributeError or TypeError traceback, and a
``/slots``, ``/v1/models`` or chat value nested 100,000 deep in a RecursionError; a tokenizer server whose
``/tokenize`` answered a string or a float among its ids ended ``count --tokenizer URL`` in a TypeError, and
``true`` or ``-1`` was taken as a context window. Numbers are read with `tokometer.util.jsontext.whole_number`.
The servers here are loopback servers that answer as no real Ollama or llama.cpp does (`tests.hostile_servers`).
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from tests.conftest import run_cli_here
from tests.hostile_servers import Answer, hostile, json_answer
from tokometer.engines.ready import http_json
from tokometer.observe.llamacpp_slots import in_progress
from tokometer.tokens.chat import parse_messages
from tokometer.util.errors import DatasetError
from tokometer.util.jsontext import loads, loads_object

DEEP = "[" * 100_000 + "]" * 100_000


def _lines(*lines: bytes) -> Answer:
    """A 200 NDJSON answer of ``lines``, as Ollama's /api/pull streams its progress."""
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        body = b"".join(line + b"\n" for line in lines)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
    return answer


@pytest.mark.parametrize("text", [DEEP, "NaN", "[1e999999]", "1" + "0" * 400, '{"a": 1', b"\xff"])
def test_what_is_not_strict_json_is_one_value_error(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        loads(text)


def test_an_object_is_asked_for_by_name() -> None:
    assert loads_object(b'{"a": [1, 2.5, null]}', "x") == {"a": [1, 2.5, None]}
    with pytest.raises(ValueError, match=r"^the answer is not a JSON object$"):
        loads_object(b"[1]", "the answer")


@pytest.mark.parametrize("line", [b"[1]", b'"pulling"', b"[" * 5000])
def test_a_pull_line_that_is_no_object_ends_serve_in_one_line(line: bytes) -> None:
    answers = {"/api/version": json_answer({"version": "0.0-test"}), "/api/tags": json_answer({"models": []}),
               "/api/pull": _lines(b'{"status": "pulling manifest"}', line)}
    with hostile(answers) as server:
        done = run_cli_here("serve", "--engine", "ollama", "--model", "m", "--host", "127.0.0.1",
                            "--port", str(server.port))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "pulling 'm' from" in done.stderr and "failed" in done.stderr


def test_byte_counts_that_are_not_numbers_are_not_shown(tmp_path: Path) -> None:
    said: list[str] = []
    answers = {"/api/pull": _lines(b'{"status": "a", "total": "5", "completed": 1}',
                                   b'{"status": "b", "total": 4, "completed": "x"}',
                                   b'{"status": "c", "total": 4, "completed": 9}', b'{"status": "success"}')}
    from tokometer.engines.ollama import pull_model
    with hostile(answers) as server:
        pull_model(f"http://127.0.0.1:{server.port}", "m", said.append)
    assert said == ["a", "b: 0 %"], said  # the third line comes within 2 s of the second: not shown


def test_models_that_are_not_a_list_end_serve_in_one_line() -> None:
    answers = {"/api/version": json_answer({"version": "0.0-test"}), "/api/tags": json_answer({"models": 7})}
    with hostile(answers) as server:
        done = run_cli_here("serve", "--engine", "ollama", "--model", "m", "--host", "127.0.0.1",
                            "--port", str(server.port))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "'models' that is not a list" in done.stderr


def test_an_answer_nested_too_deep_is_no_json_rather_than_a_recursion_error() -> None:
    with hostile({"/v1/models": _lines(DEEP.encode())}) as server:
        status, payload = http_json(f"http://127.0.0.1:{server.port}/v1/models")
    assert (status, payload) == (200, None)
    with pytest.raises(ValueError, match=r"^/slots: not JSON"):
        in_progress(DEEP)
    with pytest.raises(DatasetError, match=r"^invalid chat JSON in chat"):
        parse_messages(DEEP)


@pytest.mark.parametrize("tokens", [["a"], [{"x": 1}], [1.5], [{"id": "7"}], [True, 2], [-5]])
def test_a_token_that_is_not_an_id_ends_count_in_one_line(tokens: list[object]) -> None:
    with hostile({"/tokenize": json_answer({"tokens": tokens})}) as server:
        done = run_cli_here("count", "--tokenizer", f"http://127.0.0.1:{server.port}", "hello world")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("answered a token that is not an id (a whole number of at least 0): is "
                                        "this a llama.cpp or vLLM server?"), done.stderr


def test_ids_and_objects_with_ids_are_counted() -> None:
    with hostile({"/tokenize": json_answer({"tokens": [1, {"id": 2, "piece": "x"}]})}) as server:
        done = run_cli_here("count", "--tokenizer", f"http://127.0.0.1:{server.port}", "--json", "hello world")
    assert done.returncode == 0 and json.loads(done.stdout)["tokens"] == 2


@pytest.mark.parametrize(("props", "models", "length"), [
    ({"default_generation_settings": [1]}, {"data": 5}, None),
    ({"default_generation_settings": {"n_ctx": True}}, {"data": [{"max_model_len": -1}, "x"]}, None),
    ({"default_generation_settings": {"n_ctx": 2.5}}, {"data": [{"max_model_len": 4096}]}, 4096),
    ({"default_generation_settings": {"n_ctx": 8192}}, {}, 8192)])
def test_a_context_window_is_read_only_from_a_whole_number(props: object, models: object, length: int | None) -> None:
    from tokometer.tokens.remote import ServerTokenizer
    with hostile({"/props": json_answer(props), "/v1/models": json_answer(models)}) as server:
        tokenizer = ServerTokenizer(f"http://127.0.0.1:{server.port}")
        tokenizer.read_context_length()
    assert tokenizer.context_length == length
