"""What a peer answers (JSON, Prometheus text) is read by shape: a value of the wrong kind, sign or size where a
count, a list or an object belongs reads as absent (or is one line), never a traceback nor a figure made of it.

Before: a ``/v1/models`` whose ``data`` was a number ended ``bench`` in a TypeError traceback, and ``true``, ``0``
or ``-1`` as vLLM's ``max_model_len``, llama.cpp's ``n_ctx`` or TGI's ``max_total_tokens`` was a context window
(``bench`` refused to run: "more than the server's context of -1"); a model list that was a JSON list ended
``quality`` in an AttributeError. In Prometheus text (``/metrics``, a DCGM exporter's): ``+Inf`` or ``1e400`` as a
DCGM bitmask or PCIe link field ended ``top`` and ``bench`` in an OverflowError traceback, and a negative
utilisation or memory was shown as read; a histogram bucket of ``+Inf``, a negative ``_sum`` or a bound of ``NaN``
made latency percentiles and a mean of -300 ms. A ``model_path`` in ``/props`` longer than a file name may be
ended ``doctor`` in one line of errno 36 instead of its report. The servers are loopback servers that answer as no
real engine does (`tests.hostile_servers`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from typing import Any

import pytest

from tests.conftest import run_cli_here
from tests.hostile_servers import Answer, hostile, json_answer
from tokometer.client.probe import Probe
from tokometer.protocols.registry import protocol_named


def _completion(conn: socket.socket, stop: threading.Event) -> None:
    """A 200 streamed completion of one token, with its usage and ``[DONE]``: the check request's answer."""
    body = (b'data: {"choices":[{"index":0,"text":"hi","finish_reason":"length"}],'
            b'"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}\n\ndata: [DONE]\n\n')
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))


def _bench(answers: dict[str, Answer]) -> Any:
    with hostile({**answers, "/v1/completions": _completion}) as server:
        return run_cli_here("bench", "--url", server.url, "--api", "openai-completions", "--model", "m", "-n", "1",
                            "--input-tokens", "8", "--output-tokens", "4", "--tokenizer", "none", "--no-store")


@pytest.mark.parametrize("answers", [
    {"/v1/models": json_answer({"data": 5})},
    {"/v1/models": json_answer({"data": {"id": "m", "max_model_len": 4}})},
    {"/v1/models": json_answer({"data": [{"id": "m", "max_model_len": True}]})},
    {"/v1/models": json_answer({"data": [{"id": "m", "max_model_len": -1}]})},
    {"/v1/models": json_answer({"data": [{"id": "m", "max_model_len": 4.0}]})},
    {"/props": json_answer({"default_generation_settings": {"n_ctx": True}})},
    {"/props": json_answer({"default_generation_settings": {"n_ctx": 0}})},
    {"/props": json_answer({"default_generation_settings": {"n_ctx": "4"}})}])
def test_a_context_window_that_is_no_whole_number_is_not_one(answers: dict[str, Answer]) -> None:
    done = _bench(answers)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "context of" not in done.stderr


@pytest.mark.parametrize(("answers", "where"), [
    ({"/v1/models": json_answer({"data": ["x", {"id": "m", "max_model_len": 10}]})}, "max_model_len in /v1/models"),
    ({"/props": json_answer({"default_generation_settings": {"n_ctx": 10}})}, "n_ctx per slot in /props")])
def test_a_whole_context_window_is_still_read(answers: dict[str, Answer], where: str) -> None:
    done = _bench(answers)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith(f"more than the server's context of 10 ({where}): lower them, or give the "
                                        "server a bigger context"), done.stderr


@pytest.mark.parametrize(("info", "context"), [({"max_total_tokens": True}, None), ({"max_total_tokens": -5}, None),
                                               ({"max_total_tokens": [1]}, None), ([{"max_total_tokens": 9}], None),
                                               ({"max_total_tokens": 4096}, 4096)])
def test_tgi_max_total_tokens_is_a_whole_number_or_nothing(info: object, context: int | None) -> None:
    probe = protocol_named("tgi").context
    assert probe is not None
    with hostile({"/info": json_answer(info)}) as server:
        answer = asyncio.run(Probe().get_json(probe.url(server.url)))
    assert probe.read(answer, "m") == context


@pytest.mark.parametrize("models", [[1, 2], "x", {"data": 5}, {"data": {"id": "m"}}, {"data": [{"id": 7}]}])
def test_a_model_list_of_another_shape_ends_quality_in_one_line(models: object) -> None:
    with hostile({"/v1/models": json_answer(models)}) as server:
        done = run_cli_here("quality", server.url, server.url, "--limit", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith(f"could not list models at {server.url}/models: is the server up and "
                                        "OpenAI-compatible? (give --model-a to name the model)"), done.stderr


def _texts(*bodies: str) -> Answer:
    """200 text answers: ``bodies`` in turn, one a request, round and round."""
    turn = itertools.cycle(bodies)

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        body = next(turn).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
    return answer


def _top(answers: dict[str, Answer], gpu_metrics: str = "off") -> tuple[dict[str, Any], str]:
    """``top --once --json`` of a server answering ``answers``: (its frame, its standard error)."""
    with hostile(answers) as server:
        done = run_cli_here("top", server.root, "--once", "--json", "--interval", "0.1s",
                            "--gpu-metrics", gpu_metrics.replace("ROOT", server.root))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout), done.stderr


def _ttft(bucket: object = 5, total: object = 10, count: object = 10, seconds: object = 2, le: str = "0.1") -> str:
    return f"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running 1
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="{le}"}} {bucket}
vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {total}
vllm:time_to_first_token_seconds_count {count}
vllm:time_to_first_token_seconds_sum {seconds}
"""


@pytest.mark.parametrize("page", [_ttft(total="+Inf"), _ttft(bucket=-5), _ttft(count="1e400"), _ttft(seconds=-3),
                                  _ttft(seconds="NaN"), _ttft(le="NaN"), _ttft(le="-1")])
def test_a_histogram_with_a_value_no_latency_has_is_not_read(page: str) -> None:
    frame, _ = _top({"/metrics": _texts(_ttft(0, 0, 0, 0), page)})
    assert frame["latency_ms"]["ttft"] is None and frame["requests_running"] == 1.0


def test_a_well_formed_histogram_is_still_read() -> None:
    frame, _ = _top({"/metrics": _texts(_ttft(0, 0, 0, 0), _ttft())})
    ttft = frame["latency_ms"]["ttft"]
    assert (ttft["count"], ttft["mean"], ttft["quantiles"]["p50"]["kind"]) == (10.0, 200.0, "below")


def _dcgm(**fields: str) -> str:
    return "".join(f'DCGM_FI_DEV_{name}{{gpu="0",modelName="H100"}} {value}\n' for name, value in fields.items())


@pytest.mark.parametrize("field", ["CLOCKS_EVENT_REASONS", "PCIE_LINK_GEN", "PCIE_LINK_WIDTH"])
@pytest.mark.parametrize("value", ["+Inf", "1e400", "NaN", "-1"])
def test_a_dcgm_field_that_is_no_reading_is_left_out(field: str, value: str) -> None:
    metrics = _texts(_ttft())
    frame, _ = _top({"/metrics": metrics, "/dcgm": _texts(_dcgm(GPU_UTIL="-50", FB_USED="NaN", FB_FREE="1024",
                                                                 **{field: value}))}, "ROOT/dcgm")
    (gpu,) = frame["gpus"]
    assert (gpu["now"]["utilization"], gpu["now"]["memory_used_bytes"], gpu["now"]["throttle"]) == (None, None, [])
    assert (gpu["window"]["pcie_generation"], gpu["window"]["pcie_width"]) == (None, None)
    frame, stderr = _top({"/metrics": metrics, "/dcgm": _texts(_dcgm(**{field: value}))}, "ROOT/dcgm")
    assert frame["gpus"] == [] and "GPU metrics: no DCGM GPU series at" in stderr
    good = _dcgm(GPU_UTIL="50", FB_USED="1024", FB_FREE="1024")
    frame, _ = _top({"/metrics": metrics, "/dcgm": _texts(good, good, _dcgm(**{field: value}))}, "ROOT/dcgm")
    (gpu,) = frame["gpus"]  # the sampler's second reading had nothing to read: no sample, and no traceback
    assert gpu["history"]["utilization"] == [0.5], gpu


def _chat(conn: socket.socket, stop: threading.Event) -> None:
    """A 200 streamed chat answer of 8 tokens 10 ms apart (a stream, not a buffered answer), then its usage."""
    head = b'data: {"id":"c","created":1,"model":"m","choices":[{"index":0,'
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
    for _ in range(8):
        conn.sendall(head + b'"delta":{"content":" tok"}}]}\n\n')
        stop.wait(0.01)
    conn.sendall(head + b'"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":8,'
                 b'"total_tokens":17}}\n\ndata: [DONE]\n\n')


@pytest.mark.parametrize("hardware", [(), ("--hardware", "H100")])
def test_a_model_path_no_file_system_takes_is_no_model_file_to_doctor(hardware: tuple[str, ...]) -> None:
    props = {"model_path": "x" * 5000, "default_generation_settings": {"n_ctx": 4096}}
    answers = {"/v1/models": json_answer({"data": [{"id": "m"}]}), "/props": json_answer(props),
               "/v1/chat/completions": _chat}
    with hostile(answers) as server:
        done = run_cli_here("doctor", server.url, "--quick", "--json", "--tokenizer", "none", *hardware)
    assert done.returncode == 1 and done.stderr == "", done.stderr[:300]  # the report, not one line of errno 36
    skipped = [s["reason"] for s in json.loads(done.stdout)["skipped"]]
    assert "no model file found (neither /props nor the listening process names one)" in skipped
    assert any(s.startswith("no estimate for model 'xxx") for s in skipped) == bool(hardware)


@pytest.mark.timing  # a bound on the time a 16 MiB model list costs: in the timing lane
def test_a_model_list_of_700_000_names_costs_doctor_a_bounded_look_for_close_names() -> None:
    """Before: difflib ranked every listed name against the one asked for (21 s for these names alone here, each
    near enough to pass its quick filters); now the first `CLOSE_COMPARED`, and the names that extend the one asked
    for from the whole list."""
    names = [f"lam-{i:06d}" for i in range(700_000)]  # 15 MiB of JSON, within the 16 MiB an answer may have
    names[650_000] = "llama-3.1-8b-instruct-q4"  # far down the list: still found, by its prefix
    models = json_answer({"data": [{"id": name} for name in names]})
    with hostile({"/v1/models": models, "/v1/chat/completions": _chat}) as server:
        started = time.perf_counter()
        done = run_cli_here("doctor", server.url, "--quick", "--json", "--tokenizer", "none",
                            "--model", "llama-3.1-8b-instruct")
        took = time.perf_counter() - started
    assert done.returncode == 1 and done.stderr == "", done.stderr[:300]
    (finding,) = [f for f in json.loads(done.stdout)["findings"] if f["id"] == "reach.model_not_found"]
    assert finding["evidence"]["closest"][0] == "llama-3.1-8b-instruct-q4"
    assert took < 12, f"doctor took {took:.1f} s over a 700,000-name list"


def test_a_name_or_a_path_a_server_sends_is_shown_cut_in_each_line() -> None:
    """Before: doctor's header, its model_not_found finding and fix, its skip line (twice: the path and the error
    quoting it) and bench's run line held a 5,000-character model id or ``model_path`` whole."""
    props = {"model_path": "/models/" + "p" * 5000, "default_generation_settings": {"n_ctx": 4096}}
    answers = {"/v1/models": json_answer({"data": [{"id": "m" * 5000}]}), "/props": json_answer(props),
               "/v1/chat/completions": _chat, "/v1/completions": _completion}
    with hostile(answers) as server:
        runs = [run_cli_here("doctor", server.url, "--quick", "--tokenizer", "none", "--hardware", "H100"),
                run_cli_here("doctor", server.url, "--quick", "--tokenizer", "none", "--model", "llama"),
                run_cli_here("bench", "--url", server.url, "--api", "openai-completions", "-n", "1", "--input-tokens",
                             "8", "--output-tokens", "4", "--tokenizer", "none", "--no-store")]
    texts = [done.stdout + done.stderr for done in runs]
    assert [done.returncode for done in runs] == [1, 1, 0], texts
    assert all(len(line) < 600 for text in texts for line in text.splitlines())
    doctor, not_listed, bench = texts
    assert "(api openai-chat, model mmm" in doctor and "m… (5,000 characters))" in doctor
    assert "no estimate for model '/models/ppp" in doctor and "p…' (5,008 characters) on 'H100'" in doctor
    assert "File name too long: '/models/ppp" in doctor
    assert "does not list model 'llama'; it serves 'mmm" in not_listed
    assert "(--model 'mmm" in not_listed and "m…' (5,000 characters) is the closest)" in not_listed
    assert "; model mmm" in bench and "m… (5,000 characters); prompts:" in bench
