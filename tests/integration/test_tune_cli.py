"""``tokometer tune`` as a user runs it: bad input is one line and exit 2 before anything starts; against the
embedded llama.cpp, --vary parallel=1,2 with a tiny workload starts each variant, saves its run and the tune, and a
second tune of the same name is refused while --resume carries it on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import require_llama_server, run_cli
from tokometer.store import ResultStore
from tokometer.tune.saved import load_tune

_TINY = ("-c", "1", "-n", "2", "--input-tokens", "16", "--output-tokens", "8", "--quiet")


@pytest.mark.parametrize(("args", "message"), [
    (("--vary", "parallel"), "is not NAME=V1,V2"),
    (("--vary", "parallel=0"), "variant parallel=0: setting parallel='0' is not allowed"),
    (("--vary", "parallel=2", "--grid", "--variants", "v.toml"), "--variants"),
    (("--set", "port=9", "--vary", "parallel=2"), "the baseline: setting port is not allowed"),
    (("--vary", "parallel=2", "-c", "0"), "--concurrency"),
    (("--vary", "parallel=2", "--name", "a b"), "tune name 'a b'"),
    (("--vary", "parallel=2", "--resume", "x", "--name", "y"), "leave --name out"),
    (("--grid",), "--grid needs --vary"),
    (("--variants", "missing.toml"), "cannot read"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "v.toml").write_text('[[variant]]\nname = "two"\nparallel = 2\n', "utf-8")
    done = run_cli("tune", *(a.replace("v.toml", str(tmp_path / "v.toml")).replace(
        "missing.toml", str(tmp_path / "missing.toml")) for a in args), "--store", str(tmp_path / "runs.db"),
        "--dry-run")
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr, done.stderr


@pytest.mark.engine
def test_tune_parallel_against_the_embedded_engine(tmp_path: Path) -> None:
    require_llama_server()
    store, out = tmp_path / "runs.db", tmp_path / "tune.json"
    dry = run_cli("tune", "--vary", "parallel=1,2", "--dry-run", *_TINY)
    assert dry.returncode == 0, dry.stderr
    assert "1. parallel=1" in dry.stdout and "--parallel 2" in dry.stdout  # each engine's command line
    done = run_cli("tune", "--vary", "parallel=1,2", "--name", "p", "--store", str(store), "--json", str(out),
                   *_TINY, timeout=900)
    assert done.returncode == 0, done.stderr
    for name in ("baseline", "parallel=1", "parallel=2", "baseline again"):
        assert f"{name}: done: start-up" in done.stdout  # one line per variant as it finished
    document = json.loads(out.read_text("utf-8"))
    assert document["schema"] == "tokometer.tune/1" and [v["status"] for v in document["variants"]] == ["finished"] * 3
    reader = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        record = load_tune(reader, "p")
        assert record is not None
        saved = record.to_json()  # the file is the saved record with the judgement of each variant beside it
        assert {k: document[k] for k in saved if k != "variants"} == {k: v for k, v in saved.items() if k != "variants"}
        assert [{k: row[k] for k in kept} for row, kept in zip(document["variants"], saved["variants"], strict=True)] \
            == saved["variants"]
        for outcome in record.outcomes:
            run = reader.run(outcome.run_id or 0)
            assert run is not None and run.status == "completed" and run.spec["seed"] == record.seed
            assert run.engine is not None and run.engine.argv == outcome.command_line
            assert outcome.startup is not None and outcome.startup.first_s > 0
        assert "--parallel 1" in " ".join(record.outcomes[1].command_line)
    finally:
        reader.close()
    shown = run_cli("runs", "--store", str(store), "--id", str(record.outcomes[2].run_id))
    assert shown.returncode == 0 and "engine command line:" in shown.stderr and "--parallel 2" in shown.stderr
    again = run_cli("tune", "--vary", "parallel=1,2", "--name", "p", "--store", str(store), *_TINY)
    assert again.returncode == 2 and "--resume p" in again.stderr
    resumed = run_cli("tune", "--resume", "p", "--store", str(store), "--quiet")
    assert resumed.returncode == 0 and "0 runs to go" in resumed.stdout, resumed.stderr
