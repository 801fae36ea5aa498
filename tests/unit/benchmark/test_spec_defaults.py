"""One home per default and per word: ``tokometer bench``'s options take their defaults from `BenchSpec`'s
fields, the spec's checks speak field names, and the CLI says them as its flags (issue 24, part 3).

Nothing runs a server: these read the real click command, the real spec and the spec's source.
"""

from __future__ import annotations

import ast
import inspect
import math
from pathlib import Path
from typing import Any

import click
import pytest

from tokometer.benchmark import spec as spec_module
from tokometer.benchmark.embedded import EMBEDDED_PROFILE
from tokometer.benchmark.spec import BenchSpec, apply_profile
from tokometer.cli.bench import _engine_settings, _spec, _spec_values, command
from tokometer.cli.options import build_spec
from tokometer.cli.specoption import SpecOption, flag_words, spec_options
from tokometer.util.errors import ConfigError
from tokometer.util.specproblem import FieldProblem

URL = "http://127.0.0.1:9/v1"
FLAGS = flag_words(command, _spec)


def _field_default(field: str) -> Any:
    return BenchSpec.model_fields[field].get_default(call_default_factory=True)


def _defaults_context() -> click.Context:
    return command.make_context("bench", ["--url", URL])


def test_every_field_has_exactly_one_option() -> None:
    options = list(spec_options(command, _spec))
    fields = [f for option in options for f in (option.field, *option.also)]
    assert sorted(fields) == sorted(BenchSpec.model_fields)  # every field, none twice
    assert FLAGS["request_timeout_s"] == "--timeout" and FLAGS["tls_verify"] == "--insecure"
    assert FLAGS["requests"] == "--requests" and FLAGS["ray_actors"] == "--workers"


def test_every_click_default_is_the_fields_default() -> None:
    """Each option's default, read as the command reads it, is its field's default: no second copy."""
    ctx = _defaults_context()
    values = _spec_values(ctx.params, set(BenchSpec.model_fields))
    own = {f for p in spec_options(command, _spec) if p._own_default for f in (p.field, *p.also)}
    assert own == {"url", "api", "headers", "workers", "ray_actors", "max_event_bytes"}  # absence read by the command
    checked = 0
    for field in BenchSpec.model_fields.keys() - own:
        assert values[field] == _field_default(field), field
        checked += 1
    assert checked == len(BenchSpec.model_fields) - len(own)
    assert values["headers"] == _field_default("headers") == {}
    # an option left to its default is not passed on: the spec applies its own
    assert set(_spec_values(ctx.params, set())) == {"url", "api", "model"}
    assert build_spec(BenchSpec, **_spec_values(ctx.params, set())) == BenchSpec(url=URL)
    # the embedded engine's options: the engine's settings
    (parallel,) = (p for p in command.params if isinstance(p, SpecOption) and p.spec is _engine_settings)
    assert parallel.name == "engine_parallel" and ctx.params["engine_parallel"] == _engine_settings()().parallel == 4


def test_the_help_shows_the_fields_defaults() -> None:
    text = " ".join(command.get_help(_defaults_context()).split())  # as one line: the help wraps
    assert "[default: 600s]" in text and "[default: 60s]" in text and "[default: 10s]" in text
    assert f"[default: {_field_default('requests')}; {EMBEDDED_PROFILE['requests']} for the embedded" in text
    assert "(default 1 MiB)" in text and "[default: 512; x>=1]" in text


def _templates() -> list[tuple[str, set[str]]]:
    """Each FieldProblem of spec.py: its template (a computed field name stands in as ``concurrency``) and
    the names its keyword values fill."""
    tree = ast.parse(Path(inspect.getfile(spec_module)).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FieldProblem":
            found.append((_text(node.args[0]), {k.arg for k in node.keywords if k.arg}))
    return found


def _text(node: ast.expr) -> str:
    """A string expression's text, left to right; any computed part stands in as ``concurrency``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "concurrency"


def test_every_spec_message_names_fields_that_have_flags() -> None:
    templates = _templates()
    assert len(templates) >= 25
    for template, values in templates:
        problem = FieldProblem(template, **dict.fromkeys(values, "v"))
        assert problem.fields(), template  # it names at least one field
        for field in problem.fields():
            assert field in FLAGS, (field, template)
        assert "--" not in template, template
    # and no other message of the spec speaks in flags
    source = Path(inspect.getfile(spec_module)).read_text()
    raised = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Raise)]
    for node in raised:
        for text in (n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)):
            assert "--" not in text, text


@pytest.mark.parametrize(("values", "library", "cli"), [
    ({"concurrency": [1], "rate": [2.0]}, "give concurrency or rate, not both",
     "give --concurrency or --rate, not both"),
    ({"prefix_tokens": 300}, "prefix_tokens 300 must be less than input_tokens 256",
     "--prefix-tokens 300 must be less than --input-tokens 256"),
    ({"find_max": "concurrency", "concurrency": [1, 2], "slo": "ttft_p99=1s"},
     "find_max starts from one concurrency value, not 2", "--find-max starts from one --concurrency value, not 2"),
    ({"find_max": "rate", "concurrency": [4], "slo": "ttft_p99=1s"},
     "find_max rate searches over rate: leave out concurrency",
     "--find-max rate searches over rate: leave out --concurrency"),
    ({"sessions": 2, "turns": "3x"}, "turns: '3x' is not a whole number", "--turns: '3x' is not a whole number"),
    ({"duration_s": 30.0, "sessions": 2, "requests": 4}, "sessions counts sessions per step: leave out requests "
     "(duration_s still applies)", "--sessions counts sessions per step: leave out --requests (--duration still"),
    ({"scrape_interval_s": 0.01}, "greater than or equal to 0.05", "--scrape-interval: 0.01 must be at least 0.05"),
    ({"concurrency": [2], "time_slice_s": 1e-10}, "time_slice_s 1e-10 s is out of range: a time slice is at least "
     "0.001 s", "--time-slice 1e-10 s is out of range"),
    ({"rate": [10.0], "ramp": "exponential", "ramp_from": 1e-20, "ramp_time_s": 5.0}, "ramp_from 1e-20 is out of "
     "range", "--ramp-from 1e-20 is out of range: a ramp starts at 0 (linear) or from 1e-06 to 1e+09"),
    ({"gpus": 65537}, "less than or equal to 65536", "--gpus: 65537 must be at most 65,536"),
])
def test_the_library_says_fields_and_the_cli_says_flags(values: dict[str, Any], library: str, cli: str) -> None:
    with pytest.raises(ValueError) as caught:
        BenchSpec(url=URL, **values)
    assert library in str(caught.value)
    with pytest.raises(ConfigError) as refused:
        build_spec(BenchSpec, flags=FLAGS, url=URL, **values)
    assert str(refused.value).startswith(cli), str(refused.value)


def test_a_field_problem_keeps_typed_braces_as_text() -> None:
    problem = FieldProblem("{prompt} {text!r} is odd", text="{rate}")
    assert problem.fields() == ["prompt"]
    assert str(problem) == "prompt '{rate}' is odd"
    assert problem.render({"prompt": "--prompt"}) == "--prompt '{rate}' is odd"
    assert FieldProblem.naming("turns", "turns must be at least 1").render(FLAGS) == "--turns must be at least 1"
    assert FieldProblem.naming("turns", "odd {x}").render(FLAGS) == "odd {x}"


def test_the_embedded_profile_applies_where_the_fields_own_defaults_would() -> None:
    plain = BenchSpec(**apply_profile({"url": URL}, EMBEDDED_PROFILE))
    assert (plain.requests, plain.input_tokens, plain.output_tokens, plain.concurrency) == (8, 128, 64, [1, 2, 4])
    given = BenchSpec(**apply_profile({"url": URL, "requests": 3, "rate": [2.0]}, EMBEDDED_PROFILE))
    assert (given.requests, given.rate, given.concurrency, given.input_tokens) == (3, [2.0], [], 128)
    timed = BenchSpec(**apply_profile({"url": URL, "duration_s": 5.0}, EMBEDDED_PROFILE))
    assert timed.requests is None and timed.concurrency == [1, 2, 4]  # a duration ends the step, not a count
    talk = BenchSpec(**apply_profile({"url": URL, "sessions": 2}, EMBEDDED_PROFILE))
    assert talk.requests is None and talk.concurrency == [1, 2, 4]
    assert BenchSpec(**apply_profile({"url": URL, "synchronous": True}, EMBEDDED_PROFILE)).concurrency == []
    with pytest.raises(ValueError, match="sets 'request', which is not a field"):
        apply_profile({}, {"request": 1})


def test_the_endpoint_defaults_are_the_fields() -> None:
    spec = BenchSpec(url=URL)
    assert (spec.requests, spec.input_tokens, spec.output_tokens, spec.concurrency) == (100, 256, 128, [])
    assert BenchSpec(url=URL, duration_s=5.0).requests is None  # as `bench --duration 5s` without -n
    assert BenchSpec(url=URL, duration_s=5.0, requests=7).requests == 7
    stored = BenchSpec(url=URL, duration_s=5.0, requests=100).model_dump()
    assert BenchSpec.model_validate(stored).requests == 100  # a saved spec keeps its count


def test_every_choice_is_the_fields_literal() -> None:
    """An option's choices are its field's values (``--api``: the registered backends)."""
    from typing import get_args

    from tokometer.protocols.registry import PROTOCOLS

    choices = {p.field: list(p.type.choices) for p in spec_options(command, _spec) if isinstance(p.type, click.Choice)}
    assert set(choices) == {"api", "arrival", "dataset_kind", "find_max", "image_format", "ramp", "search"}
    assert choices.pop("api") == sorted(PROTOCOLS)  # the spec checks against PROTOCOLS
    for field, listed in choices.items():
        literal = [a for a in get_args(BenchSpec.model_fields[field].annotation) if a is not type(None)]
        if len(literal) == 1 and get_args(literal[0]):  # Literal[...] | None
            literal = list(get_args(literal[0]))
        assert listed == literal, field


@pytest.mark.parametrize(("values", "match"), [
    ({"concurrency": [4], "ramp": "linear", "ramp_from": 1}, "needs where it starts"),
    ({"concurrency": [4], "ramp_from": 1, "ramp_time_s": 5}, "give ramp linear|exponential"),
    ({"concurrency": [4, 8], "ramp": "linear", "ramp_from": 4, "ramp_time_s": 5}, "below every step's load"),
    ({"concurrency": [4], "ramp": "linear", "ramp_from": 0.5, "ramp_time_s": 5}, "at least one slot"),
    ({"rate": [4.0], "ramp": "exponential", "ramp_from": 0, "ramp_time_s": 5}, "above 0"),
    ({"synchronous": True, "ramp": "linear", "ramp_from": 1, "ramp_time_s": 5}, "give one of them"),
    ({"concurrency": [4], "workers": 2, "ramp": "linear", "ramp_from": 1, "ramp_time_s": 5}, "one event loop"),
])
def test_a_ramp_must_rise_to_each_steps_load(values: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BenchSpec(url=URL, **values)


def test_each_step_ramps_to_its_own_load() -> None:
    from tokometer.benchmark.plan import sweep_steps

    steps = sweep_steps(BenchSpec(url=URL, rate=[4.0, 8.0], ramp="exponential", ramp_from=1, ramp_time_s=10))
    assert [(s.ramp.start, s.ramp.end) for s in steps if s.ramp] == [(1.0, 4.0), (1.0, 8.0)]


def test_a_duration_step_makes_the_prompts_it_can_send_not_8192() -> None:
    from tokometer.benchmark.prepare import prompts_per_step

    timed = {"url": URL, "duration_s": 2.0, "warmup": 2}
    assert prompts_per_step(BenchSpec(**timed, rate=[20.0]), 8192, 0.01) == 2 + math.ceil(50 + 4 * 40**0.5 + 8)
    # 4 slots, each at most one request per 10 ms (the check's 1-token answer) for 2 s: 4 x 201
    assert prompts_per_step(BenchSpec(**timed, concurrency=[4]), 8192, 0.01) == 2 + 804
    assert prompts_per_step(BenchSpec(**timed, concurrency=[64]), 8192, None) == 2 + 8192  # no check: the cap
    assert prompts_per_step(BenchSpec(url=URL, requests=30, warmup=2), 8192, 0.01) == 32


def test_bench_refuses_more_gpus_than_the_most_taken() -> None:
    from tokometer.benchmark.spec import BenchSpec
    from tokometer.util.limits import MAX_GPUS

    assert BenchSpec(url="http://127.0.0.1:1/v1", gpus=MAX_GPUS).gpus == MAX_GPUS
    with pytest.raises(ValueError, match="less than or equal to 65536"):
        BenchSpec(url="http://127.0.0.1:1/v1", gpus=MAX_GPUS + 1)
