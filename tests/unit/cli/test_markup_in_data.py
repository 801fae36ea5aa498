"""Brackets in data (a path, a model name, a run label, a reason, a server's words) reach the user as they are:
the console the command line prints through reads no rich markup in them (`tokometer.cli.output.make_console`),
so ``[/x]`` is no MarkupError and ``[max]`` or ``[bold]`` is not swallowed as a tag."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from tokometer.cli.estimate import command as estimate
from tokometer.cli.output import make_console
from tokometer.cli.runs import command as runs
from tokometer.doctor import CHECKS, DoctorReport, Finding, Skipped
from tokometer.doctor.render import render_report
from tokometer.perf.questions import EstimateSpec, run_estimate
from tokometer.perf.render import render_estimate
from tokometer.perf.trackrecord import Record
from tokometer.store import ResultStore

WIDE = {"COLUMNS": "200"}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
         "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100}


def _pipe_console(monkeypatch: pytest.MonkeyPatch) -> tuple[io.StringIO, Console]:
    """The console a command makes when its standard output is a pipe, and what it wrote there."""
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    return out, make_console()


def test_estimate_of_a_config_in_a_folder_named_with_tags(tmp_path: Path) -> None:
    config = tmp_path / "m[" / "x][bold]" / "config.json"  # the path says m[/x][bold]
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(LLAMA))
    result = CliRunner(env=WIDE).invoke(estimate, ["--model", str(config), "--hardware", "H100-SXM"])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert "Traceback" not in result.output
    assert f"{config.parent} bf16 (KV bf16) on 1 × H100-SXM" in result.output.splitlines()[0]
    assert f"sources   model: {config}; hardware: " in result.output


def test_a_known_miss_with_brackets_is_printed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The track record's reason (`tokometer.perf.published.KNOWN_MISSES`' words) keeps its ``E[max]``."""
    reason = "the ranks wait for the slowest (E[max] of Poisson arrivals a rank) [/x] [bold]not bold[/bold]"
    e = run_estimate(EstimateSpec(model="llama-3.1-8b", hardware="H100-SXM", dtype="bf16"))
    assert e.track_record is not None
    record = Record("llama-3.1-8b H100-SXM TP1 bf16", "held-out", (0.3,), reason)
    e = replace(e, track_record=replace(e.track_record, deployment=record))
    out, console = _pipe_console(monkeypatch)
    render_estimate(console, e)
    assert f"within ±15 %, the estimate a median 30 % faster; a known miss: {reason}\n" in out.getvalue()


def test_runs_lists_a_model_and_a_label_with_brackets_as_they_are(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        store.create_run(target="http://127.0.0.1:8000/v1", api="openai-chat", model="org/m[/x]", spec={},
                         engine=None, host=None, label="[bold]baseline[/bold] E[max]")
    finally:
        store.close()
    result = CliRunner(env=WIDE).invoke(runs, ["--store", str(tmp_path / "runs.db")])
    assert result.exit_code == 0 and result.exception is None, result.output
    row = next(line for line in result.output.splitlines() if "org/m[/x]" in line)
    assert "[bold]baseline[/bold] E[max]" in row


def test_doctor_prints_a_server_s_words_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """No escaping by hand: the server's model name, a finding's evidence and a skipped part's reason."""
    finding = Finding(f"{CHECKS[0]}.odd", "warning", "answered [/x]", evidence={"models": ["a[1]", "[red]b"]},
                      fix="set [bold]--model[/bold]")
    report = DoctorReport("http://h:1/v1", "openai-chat", "m[/x]", quick=True, findings=[finding],
                          skipped=[Skipped(CHECKS[0], "said E[max]")])
    out, console = _pipe_console(monkeypatch)
    render_report(console, report)
    text = out.getvalue()
    assert text.startswith("tokometer doctor http://h:1/v1 (api openai-chat, model m[/x])\n")
    assert f"  warning {CHECKS[0]}.odd: answered [/x]\n" in text
    assert "          evidence: models=[a[1], [red]b]\n" in text and "          fix: set [bold]--model[/bold]\n" in text
    assert f"skipped ({CHECKS[0]}): said E[max]\n" in text
