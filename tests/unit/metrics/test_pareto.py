"""The Pareto front and two fronts compared (`tokometer.metrics.pareto`), on hand-computed points.

Each test's answer is worked out in its docstring: x is output tok/s (all requests, or per GPU), y the decode
speed p50 of one request; both better higher."""

from __future__ import annotations

import math

import pytest

from tokometer.gpu_count import gpu_count
from tokometer.metrics.pareto import (
    Point,
    RunLoads,
    basis_note,
    compare_fronts,
    dominates,
    front,
    point,
    points,
    standings,
)


def _p(x: float, y: float, load: str = "c=1", run: int = 1) -> Point:
    found = point(run, f"run {run}", load, x, y)
    assert found is not None
    return found


def test_a_point_dominates_when_as_good_on_both_and_better_on_one() -> None:
    assert dominates(_p(100, 50), _p(100, 40))  # tie in throughput, faster
    assert dominates(_p(110, 50), _p(100, 50))  # tie in speed, more throughput
    assert not dominates(_p(100, 50), _p(100, 50))  # equal: neither
    assert not dominates(_p(200, 10), _p(100, 50))  # a trade-off: neither


def test_the_sweep_of_the_readme() -> None:
    """README's CPU sweep: c=1 59.3 tok/s at 74.6 tok/s/req, c=2 60.0 at 38.1, c=4 90.3 at 30.2. c=2 is on the
    front: no point has both its 60.0 tok/s and its 38.1 (c=1 is faster but has 0.7 tok/s less throughput)."""
    pts = [_p(59.3, 74.6, "c=1"), _p(60.0, 38.1, "c=2"), _p(90.3, 30.2, "c=4")]
    assert [s.on_front for s in standings(pts)] == [True, True, True]
    assert front(pts) == [0, 1, 2]
    pts[1] = _p(59.0, 38.1, "c=2")  # now c=1 has more of both
    assert standings(pts)[1].on_front is False and standings(pts)[1].dominated_by == 0
    assert front(pts) == [0, 2]


def test_ties_and_the_dominator_named() -> None:
    """A (100, 50), B (100, 40), C (200, 40), D (150, 20). B is dominated by A (same throughput, faster) and by
    C (same speed, more throughput): A is named, the front point of least throughput that dominates it. D is
    dominated by C only. The front, left to right: A, C."""
    pts = [_p(100, 50, "A"), _p(100, 40, "B"), _p(200, 40, "C"), _p(150, 20, "D")]
    s = standings(pts)
    assert [x.on_front for x in s] == [True, False, True, False]
    assert s[1].dominated_by == 0 and s[3].dominated_by == 2
    assert front(pts) == [0, 2]


def test_one_point_and_duplicates() -> None:
    assert front([_p(10, 10)]) == [0] and standings([_p(10, 10)])[0].on_front
    # two equal points do not dominate each other: both on the front, a third below both dominated by the first
    pts = [_p(100, 50, "a"), _p(100, 50, "b"), _p(90, 50, "c")]
    s = standings(pts)
    assert [x.on_front for x in s] == [True, True, False] and s[2].dominated_by == 0
    assert front(pts) == [0, 1]
    assert front([]) == []


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -1.0, True])
def test_a_load_missing_a_number_is_no_point(bad: object) -> None:
    assert point(1, "run 1", "c=1", bad, 10.0) is None  # type: ignore[arg-type]  # not a number, on purpose
    assert point(1, "run 1", "c=1", 10.0, bad) is None  # type: ignore[arg-type]  # as above
    assert point(1, "run 1", "c=1", 0.0, 10.0) is not None  # zero is a number (it is dominated by any other)


def test_per_gpu_only_when_every_run_knows_its_gpus() -> None:
    """Run 1 on 2 GPUs: 400 tok/s is 200 per GPU. With run 2's count unknown, both stay in total tok/s."""
    one = RunLoads(1, "run 1", (("c=8", 400.0, 20.0), ("c=16", None, 10.0)), 2, "2 GPUs")
    two = RunLoads(2, "run 2", (("c=8", 300.0, 30.0),), None, "nothing says")
    basis, per_run = points([one, two])
    assert basis == "total"
    assert basis_note(basis, [one, two]) == "Throughput of all requests (per GPU unknown: run 2: nothing says)."
    three = RunLoads(3, "run 3", (), None, "nothing says")
    assert basis_note(basis, [one, two, three]) == ("Throughput of all requests (per GPU unknown: run 2, run 3: "
                                                    "nothing says).")
    assert per_run[0][0] is not None and per_run[0][0].throughput == 400.0 and per_run[0][1] is None
    basis, per_run = points([one])
    assert basis_note(basis, [one]) == "Throughput per GPU: run 1: 2 GPUs."
    assert basis == "per GPU" and per_run[0][0] is not None and per_run[0][0].throughput == 200.0
    assert per_run[0][0].gpus == 2


def test_one_front_dominates_the_other() -> None:
    """A: (100, 50), (200, 30). B: (100, 60), (250, 35): each of A's points is beaten by one of B's (A's 100 by
    B's 100, A's 200 by B's 250), and no B point by an A point."""
    a = [_p(100, 50, "c=1", 1), _p(200, 30, "c=4", 1), _p(150, 20, "c=2", 1)]  # c=2 is off A's front
    b = [_p(100, 60, "c=1", 2), _p(250, 35, "c=4", 2)]
    c = compare_fronts(a, b)
    assert c.verdict == "b dominates" and c.crossings == ()
    assert [p.load for p in c.a] == ["c=1", "c=4"]
    assert [d.load if d else None for d in c.a_dominated_by] == ["c=1", "c=4"]
    assert c.b_dominated_by == (None, None)
    assert c.sentence("run 1", "run 2") == ("run 2's front dominates run 1's: each of run 1's 2 front points is "
                                            "matched or beaten on both axes (2 beaten)")
    assert compare_fronts(b, a).verdict == "a dominates"
    assert compare_fronts(b, a).to_json("base", "new")["verdict"] == "base dominates"


def test_fronts_that_cross() -> None:
    """A: (100, 50), (300, 20). B: (150, 40), (250, 30). Best speed at throughput of at least x:

    ============  ====  ====  =======
    x (tok/s)     S_A   S_B   ahead
    ============  ====  ====  =======
    (0, 100]      50    40    A
    (100, 150]    20    40    B
    (150, 250]    20    30    B
    (250, 300]    20    -     A (B reaches no more than 250)
    ============  ====  ====  =======

    They cross at 100 and 250; no point of either front dominates one of the other."""
    a = [_p(100, 50, "c=1", 1), _p(300, 20, "c=8", 1)]
    b = [_p(150, 40, "c=2", 2), _p(250, 30, "c=4", 2)]
    c = compare_fronts(a, b)
    assert c.verdict == "cross" and c.crossings == (100.0, 250.0)
    assert [(s.low, s.high, s.ahead) for s in c.segments] == [(0.0, 100.0, "a"), (100.0, 250.0, "b"),
                                                              (250.0, 300.0, "a")]
    assert c.a_dominated_by == (None, None) and c.b_dominated_by == (None, None)
    assert c.sentence("run 1", "run 2") == ("the fronts cross at 100 and 250 output tok/s: faster per request: "
                                            "run 1 up to 100, run 2 from 100 to 250, run 1 from 250 to 300")


def test_equal_fronts_and_shared_points() -> None:
    """Equal fronts are the same. B equal to A at c=1 and faster at c=4: B dominates, though A's c=1 is only
    matched (not beaten)."""
    a = [_p(100, 50), _p(200, 30, "c=4")]
    assert compare_fronts(a, list(a)).verdict == "same"
    b = [_p(100, 50, run=2), _p(200, 35, "c=4", 2)]
    c = compare_fronts(a, b)
    assert c.verdict == "b dominates" and [d is not None for d in c.a_dominated_by] == [False, True]
    assert "(1 beaten)" in c.sentence("run 1", "run 2")
    one = compare_fronts([_p(100, 50)], [_p(100, 60, run=2)])
    assert one.sentence("run 1", "run 2") == ("run 2's front dominates run 1's: run 1's one front point is matched "
                                              "or beaten on both axes (1 beaten)")
    empty = compare_fronts([], b)
    assert empty.verdict == "empty" and "run 1 has no load" in empty.sentence("run 1", "run 2")


def test_a_run_whose_gpus_are_not_known_is_on_the_total_basis() -> None:
    """10**400 GPUs stated (not taken: `gpu_count`) overflowed the per-GPU division."""
    loads = (("c=1", 100.0, 10.0),)
    basis, pts = points([RunLoads(1, "a", loads, *gpu_count(None, 10**400))])
    assert basis == "total" and pts[0][0] is not None and pts[0][0].throughput == 100.0

