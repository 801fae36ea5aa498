"""A file of requests' lengths (``estimate --lengths``): the shapes it takes, what it refuses, and the estimate it
sets (`tokometer.perf.lengthsfile`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli_here
from tokometer.perf import hardware_table, lengthsfile
from tokometer.perf.lengths import decode_context, reserved_room
from tokometer.perf.lengthsfile import read_lengths
from tokometer.perf.loaders import resolve_model
from tokometer.perf.roofline import Deployment, Efficiency, decode_step_s
from tokometer.perf.target import reach_target
from tokometer.util.errors import ConfigError

PAIRS = [(100, 100), (100, 300), (2000, 20), (50, 1500)]
EXPECTED = decode_context([i for i, _ in PAIRS], [o for _, o in PAIRS])
ROOM = reserved_room([i for i, _ in PAIRS], [o for _, o in PAIRS])


def _file(tmp_path: Path, text: str, name: str = "lengths.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text", [
    "input_length,output_length\n" + "".join(f"{i},{o}\n" for i, o in PAIRS),  # MLPerf's digests
    "".join(f"{i},{o}\n" for i, o in PAIRS),  # no header: the prompt first
    "id,osl,note,isl\n" + "".join(f"r{n},{o},\"a, b\",{i}\n" for n, (i, o) in enumerate(PAIRS)),  # other columns
    "Input_Tokens , Output_Tokens\n\n" + "".join(f"{i} , {o}\n\n" for i, o in PAIRS),  # spaces, case, blank lines
    "".join(json.dumps({"prompt_tokens": i, "completion_tokens": o, "x": [1]}) + "\n" for i, o in PAIRS),
])
def test_each_shape_gives_the_means_and_the_steps_context(tmp_path: Path, text: str) -> None:
    got = read_lengths(_file(tmp_path, text))
    assert got.requests == 4
    assert got.input_mean == pytest.approx(562.5) and got.output_mean == pytest.approx(480)
    assert (got.input_tokens, got.output_tokens) == (562, 480)  # round half to even
    assert got.decode_context == pytest.approx(EXPECTED)


@pytest.mark.parametrize(("text", "says"), [
    ("", "no request in it"),
    ("input_tokens,output_tokens\n", "no request in it"),
    ("in,out\n1,2\n", "names no prompt column"),
    ("input_tokens,answer\n1,2\n", "names no answer column"),
    ("input_tokens,output_tokens\n10,abc\n", "line 2: the answer length 'abc' is not a whole number"),
    ("10,-5\n", "line 1: the answer length '-5' is not a whole number"),
    ("10,2.5\n", "line 1: the answer length '2.5' is not a whole number"),
    ("10,\u00b2\n", "is not a whole number"),  # a superscript two: isdigit() says yes, int() no
    ("10,99999999999\n", "is past"),
    ("input_tokens,output_tokens\n10\n", "line 2: 1 column(s), the lengths are in columns 1 and 2"),
    ("5,0\n7,0\n", "every answer is 0 tokens"),
    ('{"input_tokens": 3}\n', "line 1: no answer length"),
    ('{"input_tokens": true, "output_tokens": 3}\n', "line 1: the prompt length True is not a whole number"),
    ('{"input_tokens": 3, "output_tokens": 4}\n[1, 2]\n', "line 2: not a JSON object"),
    ('{"input_tokens": 3, "output_tokens": NaN}\n', "line 1: not a JSON object"),
])
def test_a_file_that_is_not_one_is_one_line_naming_where(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=None) as caught:
        read_lengths(_file(tmp_path, text))
    message = str(caught.value)
    assert says in message and "\n" not in message and message.startswith("--lengths ")


def test_a_file_past_its_bounds_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_line = _file(tmp_path, "1,2\n" + "1" * (lengthsfile.MAX_LINE_BYTES + 1) + ",2\n")
    with pytest.raises(ConfigError, match=r"line 2: longer than 65,536 bytes"):
        read_lengths(long_line)
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"1,2\n\xff\xfe,3\n")
    with pytest.raises(ConfigError, match="line 2: not UTF-8 text"):
        read_lengths(binary)
    monkeypatch.setattr(lengthsfile, "MAX_LENGTHS_BYTES", 64)
    with pytest.raises(ConfigError, match="larger than 0 MiB: give a sample of the requests"):
        read_lengths(_file(tmp_path, "1000,2000\n" * 10))


def test_no_more_requests_than_the_bound_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lengthsfile, "MAX_REQUESTS", 3)
    with pytest.raises(ConfigError, match="line 4: more than 3 requests"):
        read_lengths(_file(tmp_path, "".join(f"{i},{o}\n" for i, o in PAIRS)))


def test_the_estimate_takes_the_files_means_and_spread(tmp_path: Path) -> None:
    path = _file(tmp_path, "input_length,output_length\n" + "".join(f"{i},{o}\n" for i, o in PAIRS))
    out = tmp_path / "e.json"
    spread = run_cli_here("estimate", "-m", "llama-3.1-8b", "-H", "H100-SXM", "--dtype", "fp8", "-b", "1,64",
                          "--lengths", str(path), "--json", str(out))
    assert spread.returncode == 0, spread.stderr
    assert f"lengths   4 requests ({path}): means 562.5 → 480.0 tokens; a decoding sequence holds 693 tokens" \
        in spread.stdout
    assert "; a slot holds 1,305 tokens reserved on average, not the means' 1,042" in spread.stdout
    data = json.loads(out.read_text())["estimate"]
    assert (data["input_tokens"], data["output_tokens"]) == (562, 480)
    assert data["lengths"]["decode_context_tokens"] == pytest.approx(EXPECTED)
    assert data["lengths"]["reserved_room_tokens"] == pytest.approx(ROOM)
    # each sequence's room is the slots' 1,305 tokens on average: fewer fit than 1,042 a sequence would let
    d = Deployment(resolve_model("llama-3.1-8b"), hardware_table()["H100-SXM"], "fp8", "fp8")
    assert data["max_sequences"] == d.kv_sequences(round(ROOM)) < d.kv_sequences(562 + 480)
    assert data["batches"][1]["context_tokens_mid_answer"] == round(64 * EXPECTED)
    alike = tmp_path / "a.json"
    same = run_cli_here("estimate", "-m", "llama-3.1-8b", "-H", "H100-SXM", "--dtype", "fp8", "-b", "1,64",
                        "--input-tokens", "562", "--output-tokens", "480", "--json", str(alike))
    assert same.returncode == 0, same.stderr
    plain = json.loads(alike.read_text())["estimate"]
    assert plain["lengths"] is None and plain["batches"][1]["context_tokens_mid_answer"] == 64 * (562 + 240)
    # the spread's 693 tokens a sequence against the means' 802: each step reads less cache, so it runs faster
    assert data["max_load"]["output_tok_s"] > plain["max_load"]["output_tok_s"]


@pytest.mark.parametrize(("extra", "says"), [
    (("--input-tokens", "100"), "leave out --input-tokens"),
    (("--output-tokens", "100", "--input-tokens", "5"), "leave out --input-tokens and --output-tokens"),
    (("--target", "1000", "--input-tokens", "5"), "leave out --input-tokens"),
    (("--run", "1"), "leave out --run, --calibrate and --workload embed"),
    (("--workload", "embed"), "leave out --run, --calibrate and --workload embed"),
])
def test_lengths_beside_what_they_replace_is_refused(tmp_path: Path, extra: tuple[str, ...], says: str) -> None:
    path = _file(tmp_path, "10,20\n")
    result = run_cli_here("estimate", "-m", "llama-3.1-8b", "-H", "H100-SXM", "--lengths", str(path), *extra)
    assert result.returncode == 2 and says in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_bad_lengths_file_ends_the_command_in_one_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "input_tokens,output_tokens\n1,x\x1b[2J\n")
    result = run_cli_here("estimate", "-m", "llama-3.1-8b", "-H", "H100-SXM", "--lengths", str(path))
    assert result.returncode == 2 and "line 2: the answer length" in result.stderr
    assert "\x1b" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    missing = run_cli_here("estimate", "-m", "llama-3.1-8b", "-H", "H100-SXM", "--lengths", str(tmp_path / "no"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_target_takes_the_files_means_and_spread(tmp_path: Path) -> None:
    path = _file(tmp_path, "input_length,output_length\n" + "".join(f"{i},{o}\n" for i, o in PAIRS))
    lengths = read_lengths(path)
    h100 = [hardware_table()["H100-SXM"]]
    spread = reach_target(resolve_model("llama-3.1-8b"), 20_000, h100, ["fp8"], lengths=lengths)
    means = reach_target(resolve_model("llama-3.1-8b"), 20_000, h100, ["fp8"], input_tokens=562, output_tokens=480)
    assert (spread.input_tokens, spread.output_tokens) == (562, 480)
    assert spread.context_tokens == pytest.approx(EXPECTED) and means.context_tokens == 562 + 240
    # one stream: a decode step at the cached tokens the lengths give, not the means'
    one = spread.best_single_gpu
    assert one is not None
    assert one.batch1_tok_s == pytest.approx(1 / decode_step_s(one.deployment, 1, round(EXPECTED), Efficiency()))
    # 693 tokens a sequence against the means' 802: each step reads less cache, so a smaller batch reaches it
    first = next(o for o in spread.options if o.reached)
    assert first.batch < next(o for o in means.options if o.reached).batch
    assert first.aggregate_tok_s == pytest.approx(
        first.batch / decode_step_s(first.deployment, first.batch, round(first.batch * EXPECTED), Efficiency()))
    out = tmp_path / "t.json"
    cli = run_cli_here("estimate", "-m", "llama-3.1-8b", "-H", "H100-SXM", "--dtype", "fp8", "--target", "20000",
                       "--lengths", str(path), "--json", str(out))
    assert cli.returncode == 0, cli.stderr
    assert "(562 tokens in, 480 out)" in cli.stdout and "a decoding sequence holds 693 tokens" in cli.stdout
    data = json.loads(out.read_text())["target"]
    assert data["context_tokens"] == pytest.approx(EXPECTED) and data["lengths"]["requests"] == 4
