"""Reading embeddings and rerank answers (`tokometer.protocols.embeddings.client`):
well-formed ones give their result count
and the server's input tokens; hostile ones (wrong shapes, absurd numbers, deep nesting) are a clear
``ValueError`` (the request's ``malformed_stream`` error), or a count set aside and noted, never a traceback."""

from __future__ import annotations

import json

import orjson
import pytest

from tokometer.client.assemble import assemble
from tokometer.datasets.batched import BatchedSource
from tokometer.prompt import Message, Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.embeddings.client import RERANK_QUERY, OpenAIEmbeddings, Rerank
from tokometer.records import RequestRecord

PARAMS = GenerationParams(model="m")
BATCH = Prompt((Message("user", "one two"), Message("user", "three")), "one two\n\nthree")


def _embeddings(n: int, width: int = 3, tokens: object = 7) -> bytes:
    data = [{"index": i, "object": "embedding", "embedding": [0.5] * width} for i in range(n)]
    return json.dumps({"object": "list", "data": data, "usage": {"prompt_tokens": tokens}}).encode()


def test_requests_carry_every_input_of_the_batch() -> None:
    request = OpenAIEmbeddings().build(BATCH, PARAMS)
    assert (request.path, request.body["input"], request.body["model"]) == ("/embeddings", ["one two", "three"], "m")
    rerank = Rerank().build(BATCH, PARAMS)
    assert rerank.path == "/rerank" and rerank.body["documents"] == ["one two", "three"]
    assert rerank.body["query"] == RERANK_QUERY and rerank.body["top_n"] == 2


def test_a_well_formed_answer_gives_its_count_and_tokens() -> None:
    event = OpenAIEmbeddings().parse(_embeddings(2))
    assert event is not None and (event.items, event.prompt_tokens, event.done) == (2, 7, True)
    assert not event.has_content  # no text: such an answer has no first token
    scores = {"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}],
              "usage": {"total_tokens": 30}}
    event = Rerank().parse(json.dumps(scores).encode())
    assert event is not None and (event.items, event.prompt_tokens) == (2, 30)


@pytest.mark.parametrize(("body", "problem"), [
    (b"[1, 2]", "not a JSON object"),
    (b'{"data": {"0": [1]}}', "no 'data' list"),
    (b'{"data": [{"index": 5, "embedding": [1.0]}]}', "index is 5, not a whole number from 0 to 0"),
    (b'{"data": [{"index": true, "embedding": [1.0]}]}', "index is True"),
    (b'{"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}', "came twice"),
    (b'{"data": [{"index": 0, "embedding": []}]}', "not a non-empty list"),
    (b'{"data": [{"index": 0, "embedding": [1.0, "x"]}]}', "holds 'x', not a finite number"),
    (b'{"data": [{"index": 0, "embedding": [1.0, [2.0]]}]}', "not a finite number"),
    (b'{"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}', "has 2 values"),
    (b'{"data": [{"index": 0, "embedding": [1e400]}]}', "infinity"),
    (b"[" * 100_000 + b"]" * 100_000, "depth limit exceeded"),  # nested past orjson's limit
    (b'{"data": [', "unexpected end of data"),  # cut short
])
def test_hostile_embeddings_answers_are_a_clear_error(body: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        OpenAIEmbeddings().parse(body)


@pytest.mark.parametrize(("body", "problem"), [
    (b'{"results": "none"}', "no 'results' list"),
    (b'{"results": [{"index": 0, "relevance_score": "high"}]}', "not a finite number: 'high'"),
    (b'{"results": [{"index": 0, "relevance_score": false}]}', "not a finite number: False"),
    (b'{"results": [{"relevance_score": 0.5}]}', "index is None"),
])
def test_hostile_rerank_answers_are_a_clear_error(body: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Rerank().parse(body)


@pytest.mark.parametrize("tokens", [-1, 10**12, 2.5, "many", True])
def test_an_absurd_token_count_is_set_aside_and_noted(tokens: object) -> None:
    event = OpenAIEmbeddings().parse(_embeddings(1, tokens=tokens))
    assert event is not None and event.prompt_tokens is None and event.items == 1
    assert event.rejected is not None and event.rejected.startswith("usage.prompt_tokens=")


def test_an_error_answer_with_http_200_is_a_server_error_event() -> None:
    event = OpenAIEmbeddings().parse(b'{"error": {"message": "model is not an embedding model"}}')
    assert event is not None and event.error == "model is not an embedding model"


def _assembled(body: bytes, inputs: int) -> RequestRecord:
    record = RequestRecord(index=0, status=200, sent_ns=1, end_ns=10, inputs=inputs)
    half = len(body) // 2
    assemble(record, OpenAIEmbeddings(), [body[:half], body[half:]], [5, 9])
    return record


def test_the_answer_must_have_one_result_per_input() -> None:
    good = _assembled(_embeddings(3), inputs=3)
    assert good.error is None and good.first_token_ns == 0 and good.input_tokens == 7
    assert (good.input_tokens_source, good.finish_reason) == ("usage", "stop")
    short = _assembled(_embeddings(2), inputs=3)
    assert short.error == "malformed_stream"
    assert short.error_detail == "the answer has 2 results for the 3 inputs sent"
    bad = _assembled(b'{"data": 7}', inputs=1)
    assert bad.error == "malformed_stream" and "no 'data' list" in bad.error_detail


def test_batches_are_made_of_distinct_inputs_and_sum_their_tokens() -> None:
    prompts = [Prompt.from_text(f"text {i}", input_tokens=2) for i in range(7)]
    source = BatchedSource("words", prompts, 3, BatchedSource.batches_for(7, 3))
    assert [len(p.messages) for p in source.items] == [3, 3, 1]
    assert [m.content for m in source.items[1].messages] == ["text 3", "text 4", "text 5"]
    assert source.items[0].input_tokens == 6 and source.name == "words in batches of 3"
    unknown = BatchedSource("w", [Prompt.from_text("a"), Prompt.from_text("b", input_tokens=1)], 2, 1)
    assert unknown.items[0].input_tokens is None


def test_orjson_is_what_reads_the_answer() -> None:
    """The nesting limit the hostile test relies on is orjson's own (a JSONDecodeError is a ValueError)."""
    assert issubclass(orjson.JSONDecodeError, ValueError)
