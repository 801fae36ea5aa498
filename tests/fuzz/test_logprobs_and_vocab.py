"""Fuzzing what `quality` reads from a server (logprobs, either shape) and the tokenizer converter's input
(a GGUF header's vocabulary arrays).

Documented behaviour: `parse_logprobs` returns token steps (or None for no logprobs) or raises ``ValueError``,
and every log-probability it keeps is finite and at most 0, so KL and top-1 are defined; the converter
raises `TokenizerError` for a vocabulary it cannot use, and otherwise gives a tokenizer that encodes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import json_values, numbers, texts
from tokometer.quality.agreement import compare_paths, parse_logprobs
from tokometer.tokens.gguf_vocab import convert_gguf_tokenizer
from tokometer.util.errors import TokenizerError

top_entry = st.fixed_dictionaries({}, optional={"token": texts | json_values, "logprob": numbers})
content_entry = st.fixed_dictionaries({}, optional={"token": texts | json_values, "logprob": numbers,
                                                    "id": numbers, "top_logprobs": st.lists(top_entry, max_size=3)
                                                    | json_values})
logprobs = st.one_of(
    st.fixed_dictionaries({"content": st.lists(content_entry | json_values, max_size=4)}),
    st.fixed_dictionaries({"tokens": st.lists(texts | json_values, max_size=4)}, optional={
        "top_logprobs": st.lists(st.dictionaries(texts, numbers, max_size=3) | json_values, max_size=4)
        | json_values}),
    json_values)


@given(logprobs, logprobs)
def test_logprobs_of_any_shape(a: Any, b: Any) -> None:
    paths = []
    for value in (a, b):
        try:
            steps = parse_logprobs({"logprobs": value})
        except ValueError:
            return
        if steps is None:
            return
        for step in steps:
            assert all(math.isfinite(v) and v <= 0 for v in step.top.values())
        paths.append(steps)
    result = compare_paths(paths[0], paths[1])
    assert all(math.isfinite(k) and k >= 0 for k in result.kl)


vocab = st.lists(st.text(min_size=1, max_size=6), min_size=0, max_size=12)


@given(vocab | json_values, st.lists(st.integers(0, 6), max_size=12) | json_values, st.booleans())
def test_gemma_vocabulary_conversion(tokens: Any, types: Any, with_types: bool) -> None:
    meta: dict[str, Any] = {"general.architecture": "gemma3", "tokenizer.ggml.model": "llama",
                            "tokenizer.ggml.tokens": tokens}
    if with_types:
        meta["tokenizer.ggml.token_type"] = types
    try:
        tokenizer = convert_gguf_tokenizer(meta, Path("fuzz.gguf"))
    except TokenizerError:
        return
    tokenizer.encode("hello world")
