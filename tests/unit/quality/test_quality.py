"""``tokometer quality``'s pieces without a server: the math (KL over top-k, Wilson, the paired difference),
paths and their parsing, the eval set and its grader, endpoint arguments, the verdict rule and the gates."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import pytest

from tokometer.quality.agreement import (
    ItemComparison,
    TokenStep,
    compare_paths,
    first_divergence,
    kl_topk,
    parse_logprobs,
)
from tokometer.quality.endpoints import Endpoint, EndpointSpec, parse_endpoint
from tokometer.quality.evalset import is_correct, load_evalset, normalise_answer
from tokometer.quality.render import render_markdown, render_text
from tokometer.quality.runner import EndpointRun, QualityResult, QualitySpec
from tokometer.quality.stats import mcnemar_exact_p, mcnemar_mid_p, paired_difference, wilson_interval
from tokometer.quality.verdict import gate_failures, summarise
from tokometer.util.errors import ConfigError, DatasetError

ROOT = Path(__file__).resolve().parents[3]
ln = math.log


def test_kl_of_known_distributions() -> None:
    p = {"a": ln(0.5), "b": ln(0.5)}
    q = {"a": ln(0.25), "b": ln(0.75)}
    assert kl_topk(p, q) == pytest.approx(0.5 * ln(0.5 / 0.25) + 0.5 * ln(0.5 / 0.75))  # 0.1438 nats
    assert kl_topk(p, p) == 0.0
    # one shared token, the rest of each side lumped: .6 ln(.6/.3) + .4 ln(.4/.7)
    assert kl_topk({"a": ln(0.6)}, {"a": ln(0.3), "z": ln(0.1)}) == pytest.approx(0.6 * ln(2) + 0.4 * ln(0.4 / 0.7))


def test_kl_over_top_k_is_a_lower_bound_of_the_full_kl() -> None:
    full_p = [0.4, 0.3, 0.15, 0.1, 0.05]
    full_q = [0.1, 0.2, 0.3, 0.25, 0.15]
    full = sum(x * ln(x / y) for x, y in zip(full_p, full_q, strict=True))
    for k in (1, 2, 3, 5):
        top_p = {str(i): ln(v) for i, v in sorted(enumerate(full_p), key=lambda t: -t[1])[:k]}
        top_q = {str(i): ln(v) for i, v in sorted(enumerate(full_q), key=lambda t: -t[1])[:k]}
        assert 0.0 <= kl_topk(top_p, top_q) <= full + 1e-12
    everything = {str(i): ln(v) for i, v in enumerate(full_p)}, {str(i): ln(v) for i, v in enumerate(full_q)}
    assert kl_topk(*everything) == pytest.approx(full)


def test_wilson_interval_values() -> None:
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(240, 300)
    assert low < 0.8 < high and high - low < 0.1


def test_paired_difference_from_discordant_pairs() -> None:
    # 20 items: both right on 6, A only on 3, B only on 1, both wrong on 10
    a = [True] * 6 + [True] * 3 + [False] * 1 + [False] * 10
    b = [True] * 6 + [False] * 3 + [True] * 1 + [False] * 10
    d = paired_difference(a, b)
    assert (d.n, d.a_only, d.b_only) == (20, 3, 1)
    se = math.sqrt(4 - 4 / 20) / 20
    assert d.difference == pytest.approx(-0.1)
    assert (d.low, d.high) == pytest.approx((-0.1 - 1.959964 * se, -0.1 + 1.959964 * se), abs=1e-6)
    assert d.p_value == pytest.approx(0.625)  # (C(4,0) + C(4,1)) / 16, two-sided
    assert d.mid_p == pytest.approx(0.625 - 4 / 16)  # less the probability of the observed split
    same = paired_difference(a, a)
    assert (same.difference, same.low, same.high, same.p_value, same.mid_p) == (0.0, 0.0, 0.0, 1.0, 1.0)
    assert mcnemar_exact_p(8, 0) == pytest.approx(2 / 256) and mcnemar_mid_p(8, 0) == pytest.approx(1 / 256)
    assert mcnemar_exact_p(5, 0) == pytest.approx(0.0625) and mcnemar_mid_p(5, 0) == pytest.approx(0.03125)
    assert mcnemar_mid_p(3, 3) <= 1.0 and mcnemar_mid_p(0, 0) == 1.0
    with pytest.raises(ValueError):
        paired_difference([True], [True, False])


def _path(tokens: str, tops: list[dict[str, float]] | None = None) -> list[TokenStep]:
    return [TokenStep(t, i, (tops or [{}] * len(tokens))[i] or {t: 0.0}) for i, t in enumerate(tokens)]


def test_first_divergence_and_compared_positions() -> None:
    assert first_divergence(list("abc"), list("abc")) is None
    assert first_divergence(list("abc"), list("abd")) == 2
    assert first_divergence(list("ab"), list("abc")) == 2
    same = compare_paths(_path("abc"), _path("abc"))
    assert same.exact and same.divergence is None and same.kl == (0.0, 0.0, 0.0) and all(same.top1_same)
    differ = compare_paths(_path("abcd"), _path("abxy"))
    assert not differ.exact and differ.divergence == 2
    assert len(differ.kl) == 3 and differ.top1_same == (True, True, False)  # up to and including the divergence
    forced = compare_paths(_path("abcd"), _path("abxy"), {3: TokenStep("d", 3, {"d": 0.0})})
    assert len(forced.kl) == 4 and forced.forced_positions == 1 and forced.top1_same[-1]


def test_logprobs_in_both_shapes() -> None:
    llamacpp = {"logprobs": {"content": [
        {"id": 17, "token": " 4", "logprob": -0.1, "top_logprobs": [{"id": 17, "token": " 4", "logprob": -0.1},
                                                                    {"id": 18, "token": " 5", "logprob": -2.5}]}]}}
    steps = parse_logprobs(llamacpp)
    assert steps == [TokenStep(" 4", 17, {" 4": -0.1, " 5": -2.5})] and steps[0].top1 == " 4"
    legacy = {"logprobs": {"tokens": [" 4", "\n"], "token_logprobs": [-0.1, -0.2],
                           "top_logprobs": [{" 4": -0.1, " 5": -2.5}, {"\n": -0.2}]}}
    assert parse_logprobs(legacy) == [TokenStep(" 4", None, {" 4": -0.1, " 5": -2.5}), TokenStep("\n", None,
                                                                                                {"\n": -0.2})]
    assert parse_logprobs({"text": "4"}) is None
    odd_ids = [{"id": i, "token": "a", "logprob": -0.1} for i in (-3, True, 2.0, "7")]
    assert [s.id for s in parse_logprobs({"logprobs": {"content": odd_ids}}) or []] == [None] * 4  # no token ids


def test_the_shipped_eval_set_is_what_the_generator_makes() -> None:
    spec = importlib.util.spec_from_file_location("gen_evalset", ROOT / "scripts" / "gen_evalset.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    shipped = (ROOT / "src" / "tokometer" / "quality" / "evalset.jsonl").read_text(encoding="utf-8")
    assert generator.render(generator.generate()) == shipped
    items = load_evalset()
    assert len(items) == 300 and len({i.id for i in items}) == 300
    assert {i.task for i in items} == {"add", "capital", "sequence", "count", "copy", "letter"}
    assert {i.task for i in load_evalset(limit=6)} == {i.task for i in items}  # interleaved: a small --limit mixes
    assert all(i.prompt.endswith("\nA:") and i.answer for i in items)


def test_grading_and_eval_set_errors(tmp_path: Path) -> None:
    assert is_correct(" 88\n\nQ: What is", "88")
    assert is_correct(" Ottawa.", "ottawa")
    assert not is_correct(" 88 apples", "88") and not is_correct("", "88")
    assert normalise_answer("\n  Red Door \nmore") == "red door"
    with pytest.raises(DatasetError, match="at least 1"):
        load_evalset(limit=0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(DatasetError, match="line 1"):
        load_evalset(bad)


@pytest.mark.timeout(60)  # a FIFO read that waits for a writer fails here instead of hanging
def test_a_users_eval_set_is_read_within_a_bound(tmp_path: Path) -> None:
    """``--evalset /dev/zero`` had read until memory ran out, a FIFO nobody writes to waited for a writer forever,
    and a set not in UTF-8 ended in a UnicodeDecodeError traceback: a set is read whole up to 64 MiB, then refused
    naming the bound; a FIFO with no writer is an empty set; a bad byte is one error naming it."""
    from tokometer.quality.evalset import MAX_EVALSET_BYTES

    with pytest.raises(DatasetError, match=r"^/dev/zero is larger than 64 MiB: an eval set is a JSONL file"):
        load_evalset(Path("/dev/zero"))
    sparse = tmp_path / "huge.jsonl"
    with sparse.open("wb") as handle:
        handle.truncate(MAX_EVALSET_BYTES + 1)  # a hole: no disk, no time
    with pytest.raises(DatasetError, match=r"huge\.jsonl is larger than 64 MiB"):
        load_evalset(sparse)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DatasetError, match=r"fifo\.jsonl has no items"):
        load_evalset(fifo)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "1", "prompt": "caf\xe9", "answer": "x"}\n')
    with pytest.raises(DatasetError, match=r"^eval set .*latin\.jsonl: not UTF-8 text \(byte 26\)$"):
        load_evalset(latin)


def test_quality_with_a_bad_eval_set_is_one_line_and_status_2(tmp_path: Path) -> None:
    """Through the command line: exit 2 and one ``tokometer: error:`` line, no traceback (it was exit 1 with a
    UnicodeDecodeError's traceback); nothing is sent, so the endpoints need not exist."""
    from tests.conftest import run_cli

    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "1", "prompt": "caf\xe9", "answer": "x"}\n')
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    url = "http://127.0.0.1:9/v1"
    for path, said in ((latin, "not UTF-8 text (byte 26)"), (fifo, "has no items"),
                       (Path("/dev/zero"), "is larger than 64 MiB")):
        done = run_cli("quality", url, url, "--evalset", str(path), timeout=60)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tokometer: error: ") and said in lines[0], done.stderr


def test_endpoint_arguments(tmp_path: Path) -> None:
    assert parse_endpoint("http://127.0.0.1:8080").url == "http://127.0.0.1:8080/v1"
    assert parse_endpoint("http://h:1/v1/").url == "http://h:1/v1"
    assert parse_endpoint("engine:bundled") == EndpointSpec("engine:bundled")
    assert parse_endpoint("engine:bundled:q2_k").quant == "Q2_K"
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert parse_endpoint(f"engine:{model}:Q3_K_M") == EndpointSpec(f"engine:{model}:Q3_K_M", None, model, "Q3_K_M")
    for bad, message in (("ftp://x", "neither a server URL"), ("engine:", "say which model"),
                         (f"engine:{tmp_path}/none.gguf", "not found"), ("localhost:8080", "neither")):
        with pytest.raises(ConfigError, match=message):
            parse_endpoint(bad)


def _result(a_correct: list[bool], b_correct: list[bool], b_paths: list[list[TokenStep]],
            b_model: str = "model-B") -> QualityResult:
    items = load_evalset(limit=len(a_correct))
    runs, a_paths = [], [_path("ab")] * len(items)
    for label, correct, paths in (("A", a_correct, a_paths), ("B", b_correct, b_paths)):
        model = "model-A" if label == "A" else b_model
        run = EndpointRun(Endpoint(label, EndpointSpec("x"), "http://h:1/v1", "http://h:1", model))
        run.correct, run.paths = correct, list(paths)
        run.decode_tok_s, run.ttft_ms = ([10.0] if label == "A" else [18.0]), [100.0]
        runs.append(run)
    comparisons: list[ItemComparison | None] = [compare_paths(pa, pb) for pa, pb in zip(a_paths, b_paths, strict=True)]
    return QualityResult(QualitySpec(), items, runs[0], runs[1], comparisons, "up to the divergence", 1.0)


def test_the_verdict_rule() -> None:
    same = summarise(_result([True, False] * 10, [True, False] * 10, [_path("ab")] * 20))
    assert same.verdict.kind == "same" and same.exact_match == 1.0 and same.mean_kl == 0.0
    assert same.decode_ratio == pytest.approx(1.8)
    assert "keeps 100% agreement" in same.verdict.headline and "1.80× A's decode speed" in same.verdict.headline
    assert gate_failures(same, 1.0, 0.0) == []
    assert sum(n for *_, n in same.by_task.values()) == 20 and same.by_task["add"] == (4, 4, 4)
    worse = summarise(_result([True] * 20, [False] * 12 + [True] * 8, [_path("xb")] * 12 + [_path("ab")] * 8))
    assert worse.verdict.kind == "worse" and worse.exact_match == pytest.approx(0.4)
    assert worse.difference.difference == pytest.approx(-0.6) and worse.divergence_median == 0
    assert gate_failures(worse, 0.9, 5.0) == ["agreement 40.0% is below --min-agreement 0.9",
                                              "accuracy dropped 60.0 points, more than --max-accuracy-drop 5"]
    close = summarise(_result([True] * 20, [True] * 19 + [False], [_path("ab")] * 18 + [_path("ax")] * 2))
    assert close.verdict.kind == "close" and close.positions == 40
    different = summarise(_result([True] * 20, [True] * 20, [_path("ax")] * 20))
    assert different.verdict.kind == "different" and different.to_json()["verdict"]["kind"] == "different"


def test_a_model_name_a_server_listed_is_shown_cut() -> None:
    """An endpoint's model, when none is given, is the first its server lists: as long as its answer may be."""
    result = _result([True] * 4, [True] * 4, [_path("ab")] * 4, b_model="m" * 5000)
    summary = summarise(result)
    assert "m… (5,000 characters) at http://h:1/v1" in result.b.endpoint.describe()
    assert "m… (5,000 characters) keeps" in summary.verdict.headline
    assert all(len(line) < 400 for line in (render_text(summary) + render_markdown(summary)).splitlines())
    assert result.b.endpoint.model == "m" * 5000  # what is sent to the server stays whole

