"""The estimate's track record: the published figures of the case asked about, counted from the table itself."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.loaders import resolve_model
from tokometer.perf.published import (
    KNOWN_MISSES,
    PublishedFigure,
    compare_published,
    figure_kind,
    published_figures,
)
from tokometer.perf.roofline import Deployment
from tokometer.perf.trackrecord import FEW_USERS, Record, track_record


def _deployment(model: str, hardware: str, dtype: str, kv: str, *, tp: int = 1, pp: int = 1,
                expert_parallel: bool = False) -> Deployment:
    return Deployment(resolve_model(model), resolve_hardware(hardware), dtype, kv, tp=tp, pp=pp,
                      expert_parallel=expert_parallel)


def _errors(figures: list[PublishedFigure]) -> list[float]:
    return [c.error for c in compare_published(figures=figures)]


def test_the_kind_record_counts_the_held_out_figures_of_that_kind() -> None:
    t = track_record(_deployment("qwen3-235b-a22b", "H200", "fp8", "fp8", tp=8))
    assert t is not None
    moe = [f for f in published_figures("held-out") if figure_kind(f) == "mixture of experts"]
    errors = _errors(moe)
    assert (t.kind.scope, t.kind.split, t.kind.figures) == ("mixture of experts", "held-out", len(moe))
    assert t.kind.within == sum(abs(e) <= 0.15 for e in errors)
    assert t.kind.median_abs_error == pytest.approx(statistics.median(abs(e) for e in errors))
    # a mixture of experts' batch rows carry the record of the mixtures of experts at a fixed concurrency
    # (InferenceX's), a dense model's that of the dense ones (NIM's)
    loops = [f for f in published_figures("held-out") if f.concurrency and resolve_model(f.model).is_moe]
    assert (t.fixed_concurrency.scope, t.fixed_concurrency.figures) == ("mixture of experts at a fixed concurrency",
                                                                        len(loops))
    dense = track_record(_deployment("llama-3.1-8b", "H100-SXM", "fp8", "fp8"))
    assert dense is not None and dense.fixed_concurrency.scope == "fixed concurrency"
    assert dense.fixed_concurrency.figures == len([f for f in published_figures("held-out") if f.concurrency]) - len(
        loops)


def test_every_kind_has_held_out_figures() -> None:
    kinds = {figure_kind(f) for f in published_figures("held-out")}
    assert kinds == {"fixed concurrency", "mixture of experts at a fixed concurrency", "mixture of experts",
                     "NVFP4 on Blackwell", "dense over 4-8 GPUs", "dense on 1-2 GPUs"}
    with pytest.raises(ValueError, match="at least one figure"):
        Record("nothing", "held-out", ())


@pytest.mark.parametrize(("model", "dtype", "tp", "kind"), [
    ("llama-3.3-70b", "nvfp4", 1, "NVFP4 on Blackwell"),
    ("llama-3.1-405b", "fp8", 8, "dense over 4-8 GPUs"),
    ("llama-3.1-8b", "fp8", 1, "dense on 1-2 GPUs"),
    ("mixtral-8x7b", "fp8", 2, "mixture of experts"),
])
def test_the_kind_follows_the_deployment(model: str, dtype: str, tp: int, kind: str) -> None:
    t = track_record(_deployment(model, "B200", dtype, "fp8", tp=tp))
    assert t is not None and t.kind.scope == kind


def test_a_held_out_deployment_carries_its_own_figures_and_its_known_miss() -> None:
    d = _deployment("qwen3-30b-a3b", "B200", "nvfp4", "fp8")
    t = track_record(d)
    assert t is not None and t.deployment is not None
    mine = [f for f in published_figures() if f.group == "qwen3-30b-a3b B200 TP1 nvfp4"]
    errors = _errors(mine)
    assert len(mine) == 16  # ten of the older perf overview, six of the newer
    assert (t.deployment.scope, t.deployment.split, t.deployment.figures) == (
        "qwen3-30b-a3b B200 TP1 nvfp4", "held-out", 16)
    assert t.deployment.median_error == pytest.approx(statistics.median(errors))
    assert t.deployment.within == sum(abs(e) <= 0.15 for e in errors)
    assert t.deployment.reason == KNOWN_MISSES["qwen3-30b-a3b B200 TP1 nvfp4"]


def test_a_fit_deployment_says_its_figures_were_chosen_on() -> None:
    t = track_record(_deployment("llama-3.1-70b", "H200", "fp8", "fp8"))
    assert t is not None and t.deployment is not None
    assert (t.deployment.split, t.deployment.figures, t.deployment.reason) == ("fit", 10, None)


def test_both_splits_and_every_figure_of_the_deployment_count() -> None:
    """Llama 3.1 8B in fp8 on one H100: the fit split's ten at maximum load and NIM's held-out closed loops."""
    t = track_record(_deployment("llama-3.1-8b", "H100", "fp8", "fp8"))
    assert t is not None and t.deployment is not None
    mine = [f for f in published_figures() if f.model == "llama-3.1-8b" and f.hardware == "H100-SXM" and f.tp == 1]
    assert t.deployment.split == "fit and held-out" and t.deployment.figures == len(mine) > 10


@pytest.mark.parametrize(("kv", "pp", "ep"), [
    ("bf16", 1, False),  # the published rows cache in fp8
    ("fp8", 2, False),
    ("fp8", 1, True),
])
def test_another_layout_or_format_is_not_this_deployment(kv: str, pp: int, ep: bool) -> None:
    t = track_record(_deployment("mixtral-8x7b", "H200", "fp8", kv, pp=pp, expert_parallel=ep))
    assert t is not None and t.deployment is None
    same = track_record(_deployment("mixtral-8x7b", "H200", "fp8", "fp8"))
    assert same is not None and same.deployment is not None


def test_a_row_of_the_same_name_with_other_figures_is_another_gpu() -> None:
    """A hardware file's own "B200" (here slower memory) did not run the published figures."""
    own = replace(resolve_hardware("B200"), bandwidth_gbs=6000.0)
    t = track_record(Deployment(resolve_model("qwen3-30b-a3b"), own, "nvfp4", "fp8"))
    assert t is not None and t.deployment is None and t.kind.scope == "mixture of experts"


def test_none_at_given_efficiencies_or_off_a_gpu() -> None:
    """The record is the typical efficiencies' on GPUs: no published figure ran on a CPU, an SoC or a TPU."""
    d = _deployment("llama-3.1-8b", "H100", "fp8", "fp8")
    assert track_record(d, "given") is None
    assert track_record(d, "typical, with decode_bandwidth given") is None
    for name in ("EPYC-Genoa-12ch-DDR5-4800", "Apple-M3-Max", "TPU-v6e"):
        assert track_record(_deployment("llama-3.1-8b", name, "bf16", "bf16")) is None


def test_the_json_carries_the_counts_and_the_aim() -> None:
    t = track_record(_deployment("qwen3-30b-a3b", "B200", "nvfp4", "fp8"))
    assert t is not None
    j = t.to_json()
    assert set(j) == {"kind", "fixed_concurrency", "few_users", "deployment", "source"}
    assert j["deployment"]["figures"] == 16 and j["deployment"]["aim"] == 0.15
    assert j["kind"]["within_aim"] == t.kind.within and j["deployment"]["known_miss"]


def test_a_few_users_are_the_fixed_concurrencies_of_at_most_five_users_a_copy() -> None:
    """One stream and a handful (NIM's 1 and 5 users, AMD's batches of 1-4; InferenceX's 4): where a user first
    sets a benchmark beside the estimate, and where the estimate of a dense model has leaned slow."""
    dense = track_record(_deployment("llama-3.1-8b", "H100", "fp8", "fp8"))
    moe = track_record(_deployment("deepseek-r1", "H200", "fp8", "fp8", tp=8))
    assert dense is not None and moe is not None
    for t, is_moe in ((dense, False), (moe, True)):
        few = [f for f in published_figures("held-out") if f.concurrency
               and f.concurrency // f.replicas <= FEW_USERS and resolve_model(f.model).is_moe == is_moe]
        errors = _errors(few)
        assert t.few_users.figures == len(few) > 0 and t.few_users.split == "held-out"
        assert t.few_users.scope == f"{t.fixed_concurrency.scope} at 1-{FEW_USERS} users"
        assert t.few_users.within == sum(abs(e) <= 0.15 for e in errors)
        assert t.few_users.median_error == pytest.approx(statistics.median(errors))
        assert t.few_users.figures < t.fixed_concurrency.figures
    # NIM's 1 and 5 users of the 8B and the 70B (five shapes each) and AMD's 70B at 1, 2 and 4 (2026-12-06)
    assert dense.few_users.figures == 23 and dense.few_users.median_error < 0
