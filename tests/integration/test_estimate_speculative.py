"""``tokometer estimate --spec-acceptance``: speculative decoding beside the batch rows, in the console, the JSON
and --explain; its options checked before any work (one line, exit status 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import run_cli
from tokometer.cli.estimate import command as estimate

WIDE = {"COLUMNS": "200"}
BASE = ["-m", "llama-3.3-70b", "-H", "H200-SXM", "--dtype", "fp8", "--tp", "2", "--batch", "1,512"]


def test_speculation_in_the_console_json_and_explanation(tmp_path: Path) -> None:
    out = tmp_path / "estimate.json"
    result = CliRunner(env=WIDE).invoke(estimate, [*BASE, "--spec-acceptance", "0.7", "--spec-tokens", "4",
                                                   "--draft-cost", "0.05", "--explain", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "speculative decoding: acceptance 0.7, 4 draft tokens (draft step 0.05 × the target's): 2.77 tokens" \
        in result.output
    assert "(1 − 0.7^5) / (1 − 0.7) = 2.773" in result.output  # --explain
    data = json.loads(out.read_text())
    spec = data["speculative"]
    assert spec["acceptance"] == 0.7 and spec["draft_tokens"] == 4 and spec["draft_cost"] == 0.05
    assert spec["tokens_per_round"] == pytest.approx(2.7731)
    small, large = spec["batches"]
    assert small["batch"] == 1 and small["speedup"] > 2  # bandwidth bound: verifying 5 tokens costs one step
    assert large["speedup"] < 1  # compute bound at 512: the verify step costs ~5 plain ones
    for ours, row in zip(spec["batches"], data["estimate"]["batches"], strict=True):  # beside the decode-only step
        assert ours["plain_step_ms"] == pytest.approx(row["decode_only"]["step_ms"]["expected"])
        assert ours["aggregate_tok_s"]["plain"] == pytest.approx(row["decode_only"]["aggregate_tok_s"]["expected"])
    assert spec["decode_only"] is True


def test_a_draft_model() -> None:
    result = CliRunner(env=WIDE).invoke(estimate, [*BASE, "--spec-acceptance", "0.8", "--draft-model",
                                                   "llama-3.2-1b"])
    assert result.exit_code == 0, result.output
    assert "(draft llama-3.2-1b): 3.36 tokens per verify step" in result.output


@pytest.mark.parametrize(("extra", "words"), [
    (["--draft-cost", "0.1"], "--draft-cost: speculative decoding needs --spec-acceptance too"),
    (["--spec-acceptance", "0.7"], "give --draft-model NAME or --draft-cost FRACTION"),
    (["--spec-acceptance", "0.7", "--draft-cost", "0.1", "--draft-model", "llama-3.2-1b"], "not both"),
    (["--spec-acceptance", "1.5", "--draft-cost", "0.1"], "--spec-acceptance"),
    (["--spec-acceptance", "0.7", "--draft-cost", "0.1", "--target", "14000"], "leave out"),
    (["--spec-acceptance", "0.7", "--spec-tokens", "0", "--draft-cost", "0.1"], "--spec-tokens"),
])
def test_bad_speculation_options_are_one_line_before_any_work(extra: list[str], words: str) -> None:
    done = run_cli("estimate", *BASE, *extra)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and words in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # refused before the estimate was worked out or printed
