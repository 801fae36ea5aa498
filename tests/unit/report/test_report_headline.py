"""The headline's client sentence: said only of steps the client checked itself in (an imported run has none)."""

from __future__ import annotations

from typing import Any

from tokometer.report.headline import headline

SUMMARY = {"requests_completed": 4, "requests_failed": 0}


def _run(*health: dict[str, Any] | None) -> dict[str, Any]:
    steps = [{"label": f"c={i + 1}", "summary": SUMMARY, "health": h, "interrupted": False, "power": None}
             for i, h in enumerate(health)]
    return {"name": "r", "knee": None, "steps": steps}


def test_no_self_check_no_claim_about_the_client() -> None:
    assert not any("client" in line for line in headline(_run(None, None)))


def test_kept_up_is_said_of_the_steps_checked() -> None:
    assert "The client kept up at every step." in headline(_run({"saturated": False}, {"saturated": False}))
    assert "The client kept up at the 1 of 2 steps it checked itself in." in headline(_run({"saturated": False}, None))
    assert headline(_run({"saturated": True}, None))[-1].startswith("The client could not keep up at c=1")
