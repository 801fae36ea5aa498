"""A tune's variants started for real: the embedded llama.cpp with the bundled model, on loopback.

Each start is a real ``llama-server``: its command line carries the variant's settings, a flag it refuses comes back
in its own words with nothing left running, both starts are timed, and ``quantization=Q8_0`` serves the bundled
model requantised with the real llama-quantize.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from typing import Any

import psutil
import pytest

from tests.conftest import require_llama_server
from tokometer.engines.handle import EngineHandle
from tokometer.tune.launch import LaunchOptions, VariantStartFailed, start_variant
from tokometer.tune.outcome import Variant
from tokometer.tune.settings import GGUF_TYPES
from tokometer.util.errors import EngineError

pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def _engine() -> None:
    require_llama_server()


def _llama_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "llama-server" in p.name()]


def _flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


def _complete(handle: EngineHandle) -> dict[str, Any]:
    body = json.dumps({"model": handle.model, "prompt": "The capital of France is", "max_tokens": 4,
                       "temperature": 0}).encode()
    request = urllib.request.Request(handle.openai_url + "/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def _llama_quantize() -> str:
    from tokometer.engines.quantize import find_llama_quantize

    required = os.environ.get("TOKOMETER_REQUIRE_ENGINE") == "1"
    try:
        return find_llama_quantize(build=required)
    except EngineError as exc:
        if required:
            pytest.fail(f"llama-quantize is required here but could not be found or built: {exc}")
        pytest.skip(f"no llama-quantize (run 'make engine'): {exc}")


def test_a_variant_starts_with_its_settings_twice_timed_and_stops_whole() -> None:
    variant = Variant(1, "parallel=2", {"parallel": "2", "batch-size": "256", "flash-attn": "off"}, ("parallel",))
    with start_variant(variant, LaunchOptions()) as launched:
        argv = launched.command_line
        assert _flag(argv, "--parallel") == "2" and _flag(argv, "--ctx-size") == "8192"
        assert _flag(argv, "--batch-size") == "256" and _flag(argv, "--flash-attn") == "off"
        assert list(argv) == launched.handle.identity["argv"]
        assert launched.handle.identity["parallel"] == 2
        assert _complete(launched.handle)["choices"]
        assert launched.startup.first_s > 0
        assert launched.startup.second_s is not None and launched.startup.second_s > 0
        assert launched.handle.process is not None
        assert [p.pid for p in _llama_children()] == [launched.handle.process.pid]  # the first was stopped
    assert not launched.handle.alive() and _llama_children() == []


def test_a_flag_the_engine_refuses_is_a_failed_start_in_its_own_words_with_nothing_left() -> None:
    variant = Variant(1, "no-such-flag=3", {"parallel": "1", "no-such-flag": "3"}, ("no-such-flag",))
    with pytest.raises(VariantStartFailed) as caught:
        start_variant(variant, LaunchOptions())
    failed = caught.value
    assert "invalid argument: --no-such-flag" in failed.last_words
    assert "variant no-such-flag=3 did not start" in str(failed) and "\n" not in str(failed)
    assert failed.command_line[-2:] == ("--no-such-flag", "3") and "llama-server" in failed.command_line[0]
    assert _llama_children() == []


def test_a_refused_value_of_a_passed_through_flag_is_quoted_before_the_usage_it_prints() -> None:
    variant = Variant(1, "cache-type-k-draft=q9", {"cache-type-k-draft": "q9"}, ("cache-type-k-draft",))
    with pytest.raises(VariantStartFailed) as caught:
        start_variant(variant, LaunchOptions(second_start=False))
    assert re.search(r"--cache-type-k-draft.*q9", caught.value.last_words.splitlines()[0])
    assert _llama_children() == []


def test_an_engine_not_ready_in_time_is_a_failed_start_with_nothing_left() -> None:
    with pytest.raises(VariantStartFailed) as caught:
        start_variant(Variant(0, "baseline", {"parallel": "1"}), LaunchOptions(ready_timeout_s=0.001))
    assert "did not answer" in str(caught.value) and caught.value.command_line
    assert _llama_children() == []


def test_a_quantization_variant_serves_the_model_requantised() -> None:
    _llama_quantize()
    variant = Variant(1, "quantization=Q8_0", {"parallel": "1", "quantization": "Q8_0"}, ("quantization",))
    with start_variant(variant, LaunchOptions(second_start=False)) as launched:
        identity = launched.handle.identity
        assert identity["quantization"] == "Q8_0"
        assert "Q8_0" in identity["model_file"] and identity["model_file"] == _flag(launched.command_line, "--model")
        assert launched.startup.second_s is None
        assert _complete(launched.handle)["choices"]
    assert _llama_children() == []


def test_the_quantisation_types_are_the_ones_llama_quantize_lists() -> None:
    done = subprocess.run([_llama_quantize(), "--help"], capture_output=True, text=True, timeout=60, check=False)
    listed = re.findall(r"^\s+(?:\d+\s+or\s+)?([A-Z][A-Z0-9_]+)\s+:", done.stdout + done.stderr, re.MULTILINE)
    assert set(listed) - {"COPY"} == set(GGUF_TYPES)
