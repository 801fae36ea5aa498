"""``--threads`` when none is given: ``$TOKOMETER_ENGINE_THREADS`` where set (the suite sets 1), else the physical
cores; an explicit setting wins; a bad value is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokometer.engines.llamacpp import THREADS_ENV_VAR, LlamaCppSettings, default_threads, llamacpp_argv
from tokometer.util.errors import EngineError
from tokometer.util.hostinfo import physical_cores
from tokometer.util.shown import SHOWN_CHARS


def _threads(settings: LlamaCppSettings) -> str:
    argv = llamacpp_argv("llama-server", Path("m.gguf"), 8080, settings)
    return argv[argv.index("--threads") + 1]


def test_the_variable_sets_the_default_and_an_explicit_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV_VAR, " 3 ")
    assert default_threads() == 3 and _threads(LlamaCppSettings()) == "3"
    assert _threads(LlamaCppSettings(threads=2)) == "2"
    for unset in ("", "  "):
        monkeypatch.setenv(THREADS_ENV_VAR, unset)
        assert _threads(LlamaCppSettings()) == str(physical_cores())
    monkeypatch.delenv(THREADS_ENV_VAR)
    assert default_threads() == physical_cores()


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "two", "²", "4097", "9" * 5000])
def test_a_bad_value_is_one_line_saying_what_to_give(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(THREADS_ENV_VAR, value)
    with pytest.raises(EngineError) as caught:
        llamacpp_argv("llama-server", Path("m.gguf"), 8080, LlamaCppSettings())
    message = str(caught.value)
    assert message.startswith(f"${THREADS_ENV_VAR} is ") and "from 1 to 4096" in message
    assert "\n" not in message and len(message) < SHOWN_CHARS + 120
    assert _threads(LlamaCppSettings(threads=1)) == "1"  # an explicit setting does not read it
