"""Request shapes (`tokometer.inbound.shapes`), each protocol's declared shape, the string count before a parse,
and the cheap paths' renderings (`tokometer.inbound.cheap`).

Pure functions; the servers that run them on every request are tested on loopback in
``tests/integration/test_inbound_boundary.py`` and ``tests/fuzz/test_inbound_generated.py``.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Any

import orjson
import pytest

from tokometer.inbound.cheap import Rendered
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.inbound.shapes import Arr, FieldError, Int, Map, Num, Obj, OneOf, Shape, Str, check
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.registry import PROTOCOLS


def _error(shape: Shape, value: Any) -> FieldError:
    with pytest.raises(FieldError) as caught:
        check(shape, value, DEFAULT_LIMITS)
    return caught.value


def test_each_piece_names_the_field_and_what_it_must_be() -> None:
    shape = Obj({"a": Arr(Obj({"b": Int(0, 5)})), "s": Str(options=("x", "y")), "n": Num(0, 1)}, required=("a",))
    assert str(_error(shape, {})) == "'a' is required"
    assert str(_error(shape, {"a": [{"b": 6}]})) == "'a[0].b' must be a whole number from 0 to 5"
    assert str(_error(shape, {"a": [{"b": True}]})) == "'a[0].b' must be a whole number from 0 to 5"
    assert str(_error(shape, {"a": [], "s": "z"})) == "'s' must be one of 'x', 'y'"
    assert str(_error(shape, {"a": [], "n": 2})) == "'n' must be a number from 0 to 1"
    assert str(_error(shape, [])) == "'the body' must be an object"
    check(shape, {"a": [{"b": 5, "other": [1]}], "s": "x", "n": None, "more": {"x": 1}}, DEFAULT_LIMITS)


def test_counts_and_sizes_are_the_limits_tables() -> None:
    shape = Obj({"tools": Arr(Str(), "max_tools"), "bias": Map(Num(), "max_logit_bias_entries"),
                 "name": Str("max_name_chars")})
    over = _error(shape, {"tools": ["x"] * (DEFAULT_LIMITS.max_tools + 1)})
    assert over.code == "too_many_tools" and "max_tools" in str(over)
    assert f"{DEFAULT_LIMITS.max_tools + 1:,} entries" in str(over)
    assert _error(shape, {"bias": {str(i): 1 for i in range(300_000)}}).code == "too_many_logit_bias_entries"
    assert _error(shape, {"name": "n" * 257}).code == "string_too_long"
    check(shape, {"tools": ["x"] * 300}, replace(DEFAULT_LIMITS, max_tools=300))


def test_one_of_says_what_is_wrong_inside_the_option_of_the_values_kind() -> None:
    shape = OneOf((Str(), Arr(Obj({"text": Str()}), "max_content_parts")), "a string or parts")
    assert str(_error(shape, 5)) == "'the body' must be a string or parts"
    assert str(_error(shape, [{"text": 5}])) == "'[0].text' must be a string"
    ids = OneOf((Arr(Str()), Arr(Int(0, 9))), "strings or ids")
    check(ids, [1, 2], DEFAULT_LIMITS)
    assert str(_error(ids, [1, "a"])) == "'the body' must be strings or ids"  # two options of its kind: the whole
    assert _error(OneOf((Str(), Arr(Str(), "max_stop_sequences")), "s"), ["x"] * 100_000).code \
        == "too_many_stop_sequences"


def test_a_million_token_ids_are_checked_in_one_pass() -> None:
    shape = Arr(Int(0, 2**31 - 1))
    began = time.perf_counter()
    check(shape, list(range(1_000_000)), DEFAULT_LIMITS)
    assert time.perf_counter() - began < 2  # a call per element would be several times slower
    assert "whole numbers" in str(_error(shape, [1, -1])) and "whole numbers" in str(_error(shape, [1, True]))


def _limit_names(shape: Any) -> set[str]:
    names = {shape.most} if isinstance(getattr(shape, "most", None), str) else set()
    children: list[Any] = []
    if isinstance(shape, Obj):
        children = list(shape.fields.values())
    elif isinstance(shape, Arr):
        children = [shape.item]
    elif isinstance(shape, Map):
        children = [shape.value, shape.key]
    elif isinstance(shape, OneOf):
        children = list(shape.options)
    for child in children:
        names |= _limit_names(child)
    return names


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_every_protocol_declares_its_request_and_its_limits_are_in_the_table(name: str) -> None:
    shape = PROTOCOLS[name].request
    assert shape is not None
    assert _limit_names(shape) <= {f.name for f in fields(DEFAULT_LIMITS)}


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_what_our_own_clients_send_fits_their_servers_shape(name: str) -> None:
    protocol = PROTOCOLS[name]
    tools = ({"type": "function", "function": {"name": "get_weather", "description": "d",
                                                "parameters": {"type": "object", "properties": {}}}},)
    params = GenerationParams(model="m", max_tokens=8, seed=1, tools=tools if protocol.takes_media else (),
                              tool_choice="auto" if protocol.takes_media else None)
    request = protocol.client().build(Prompt.from_text("hello there"), params)
    assert protocol.request is not None
    check(protocol.request, request.body, DEFAULT_LIMITS)


def test_a_body_of_very_many_strings_or_values_is_refused_before_it_is_parsed() -> None:
    bias = orjson.dumps({"model": "m", "logit_bias": {str(i): 1 for i in range(300_000)}})
    with pytest.raises(BadBody, match="300,003 strings"):
        parse_object(bias)
    assert parse_object(b'{"a": "x\\"y", "b": "\\\\"}') == {"a": 'x"y', "b": "\\"}
    long = orjson.dumps({"prompt": "a, b: c " * 200_000})  # long strings are cheap: not counted against it
    assert len(parse_object(long)["prompt"]) == 1_600_000
    with pytest.raises(BadBody, match="2,000,000 values"):
        parse_object(b'{"prompt": [' + b",".join([b"0"] * 2_000_000) + b"]}")
    assert len(parse_object(orjson.dumps({"prompt": list(range(200_000))}))["prompt"]) == 200_000


def test_a_cheap_path_renders_at_most_its_share_of_the_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("tokometer.inbound.cheap.time.perf_counter", lambda: clock[0])
    renders: list[object] = []

    def render(variant: object) -> str:
        renders.append(variant)
        clock[0] += 0.002  # each rendering takes 2 ms
        return f"answer {len(renders)}"

    shown = Rendered(render)
    assert shown.get() == "answer 1"
    clock[0] += 0.03
    assert shown.get() == "answer 1"  # 2 ms / 5 % = 40 ms: still young
    clock[0] += 0.02
    assert shown.get() == "answer 2"
    assert shown.get(True) == "answer 3"  # each variant its own
    clock[0] += 100
    assert shown.get() == "answer 4" and renders == [None, None, True, None]
