"""Output that survives a pipe: tables written to a pipe keep every header and every figure whole.

Each command runs as a subprocess whose stdout is a pipe (as in CI logs, ``| tee`` or a file), with
``COLUMNS=80``: a width that used to cut the sweep table's headers and numbers with "…".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import SimServer, run_cli

NARROW = {"COLUMNS": "80"}

SWEEP_HEADER = ["load", "ok", "failed", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "decode tok/s/req p50",
                "output tok/s total", "req/s", "E2E p99 ms", "lag p99 ms"]

STEP_ROWS = [  # label in the step table, summary key in the JSON, digits shown
    ("TTFT (ms)", "ttft_ms", 2),
    ("TTST (ms)", "ttst_ms", 2),
    ("TPOT (ms)", "tpot_ms", 3),
    ("ITL (ms)", "itl_ms", 3),
    ("E2E latency (ms)", "e2e_ms", 2),
    ("decode speed (tok/s/request)", "decode_speed_tok_s", 1),
    ("prefill speed, client view (tok/s)", "prefill_speed_tok_s", 1),
    ("server prefill (ms)", "server_prefill_ms", 2),
    ("server decode (tok/s)", "server_decode_tok_s", 1),
    ("output tokens", "output_tokens", 1),
    ("client lag (ms)", "client_lag_ms", 3),
]


def _f(value: float | None, digits: int) -> str:
    """A figure as the tables print it."""
    return "-" if value is None else f"{value:,.{digits}f}"


def _cells(line: str) -> list[str]:
    """The cells of one table line (header cells are split by ┃, body cells by │)."""
    return [cell.strip() for cell in line.replace("┃", "│").split("│")]


def _table_after(lines: list[str], title: str) -> tuple[list[str], list[list[str]]]:
    """Header and body rows of the table printed under ``title``."""
    start = lines.index(title)
    header = _cells(lines[start + 1])
    assert lines[start + 2].startswith("━"), lines[start + 2]
    rows = []
    for line in lines[start + 3:]:
        if "│" not in line:
            break
        rows.append(_cells(line))
    return header, rows


def _load(step: dict[str, Any]) -> str:
    return f"c={step['load']['concurrency']}"


def _check_step_table(lines: list[str], index: int, step: dict[str, Any]) -> None:
    summary = step["summary"]
    header, rows = _table_after(lines, f"Step {index + 1}: concurrency {step['load']['concurrency']}")
    assert header == ["metric", "mean", "p50", "p90", "p99", "max", "n"]
    expected = []
    for label, key, digits in STEP_ROWS:
        d = summary[key]["per_request"] if key == "output_tokens" else summary[key]
        if d["count"]:
            expected.append([label, *(_f(d[p], digits) for p in ("mean", "p50", "p90", "p99", "max")),
                             str(d["count"])])
    assert rows == expected
    assert (f"  throughput: {_f(summary['output_throughput_tok_s'], 1)} output tok/s, "
            f"{_f(summary['request_throughput_rps'], 2)} req/s over {summary['duration_s']:.2f} s; "
            f"achieved concurrency {_f(summary['achieved_concurrency'], 2)}") in lines
    naive = "naive view (generated tokens / elapsed time: mixes TTFT, network and decode)"
    assert f"  {naive}: {summary['naive_summary']}" in lines


def test_a_piped_sweep_keeps_every_figure(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "2")
    out, store = tmp_path / "sweep.json", tmp_path / "runs.db"
    done = run_cli("bench", "--url", sim.openai_url, "-c", "1,4,16", "-n", "32", "--input-tokens", "8",
                   "--output-tokens", "16", "--json", str(out), "--store", str(store), env=NARROW)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and "\x1b[" not in done.stdout  # nothing cut, no colour codes in a pipe
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    steps = json.loads(out.read_text())["steps"]
    for index, step in enumerate(steps):
        _check_step_table(lines, index, step)
    header, rows = _table_after(lines, "Sweep: per-request speed vs aggregate throughput")
    assert header == SWEEP_HEADER
    expected = []
    for step in steps:
        s = step["summary"]
        expected.append([_load(step), str(s["requests_completed"]), str(s["requests_failed"]),
                         _f(s["ttft_ms"]["p50"], 1), _f(s["ttft_ms"]["p99"], 1), _f(s["tpot_ms"]["p50"], 2),
                         _f(s["decode_speed_tok_s"]["p50"], 1), _f(s["output_throughput_tok_s"], 1),
                         _f(s["request_throughput_rps"], 2), _f(s["e2e_ms"]["p99"], 1),
                         _f(s["client_lag_ms"]["p99"], 2)])
    assert rows == expected
    assert max(len(line) for line in lines) > 80  # the figures needed more than COLUMNS gave

    listed = run_cli("runs", "--store", str(store), env=NARROW)
    assert listed.returncode == 0, listed.stderr
    assert "…" not in listed.stdout
    headline = "; ".join(f"{_load(s)}: {s['summary']['output_throughput_tok_s']:,.1f} tok/s" for s in steps)
    assert headline in listed.stdout and sim.openai_url in listed.stdout


def test_piped_estimate_and_count_are_whole() -> None:
    done = run_cli("estimate", "--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--batch", "1,8,64",
                   env=NARROW)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    header = next(_cells(line) for line in done.stdout.splitlines() if "┃" in line)
    assert header[:2] == ["batch", "fits"] and "tok/s per request" in header and "tok/s in all" in header
    text = "tokometer keeps every figure whole when its output goes to a pipe " * 4
    counted = run_cli("count", "--show", text, env=NARROW)
    assert counted.returncode == 0, counted.stderr
    assert "…" not in counted.stdout
    listed = run_cli("count", "--list-prices", env=NARROW)
    assert listed.returncode == 0 and "…" not in listed.stdout
