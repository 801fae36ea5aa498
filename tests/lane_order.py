"""A pytest plugin for the ``parallel`` lane (``scripts/test_lanes.py`` loads it with ``-p tests.lane_order``):
the files that start engines go to the workers first, so that the short files fill the gaps beside them and
no long file starts last, alone, while the other workers are idle.

With ``--dist loadfile`` pytest-xdist hands out whole files in its queue's order; by default it sorts that queue
by the number of tests in a file, most first, which put the engine files (a few long tests each) late: of 274
files, the quality comparison (4 tests, about half of the lane's engine time) came 185th. This plugin orders
the collection instead, with the lane's ``--no-loadscope-reorder`` keeping it: files by how many of their tests
are marked ``engine`` or ``slow``, most first, then every other file in collection order (longest first is the
classic rule for filling parallel machines). Every worker collects alike, so every worker sorts alike."""

from __future__ import annotations

import pytest

HEAVY_MARKERS = ("engine", "slow")


def heavy_tests(items: list[pytest.Item]) -> dict[str, int]:
    """Per file (its path), how many of its tests carry one of `HEAVY_MARKERS`."""
    counts: dict[str, int] = {}
    for item in items:
        heavy = any(item.get_closest_marker(name) is not None for name in HEAVY_MARKERS)
        counts[str(item.path)] = counts.get(str(item.path), 0) + int(heavy)
    return counts


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    counts = heavy_tests(items)
    first_seen = {path: index for index, path in enumerate(dict.fromkeys(str(item.path) for item in items))}
    items.sort(key=lambda item: (-counts[str(item.path)], first_seen[str(item.path)]))  # stable: a file's order kept
