"""How an engine process ended, in words: "exited with status 1" or "was killed by SIGILL (illegal
instruction)", with what the user can do about the common signals.

``subprocess`` reports a death by signal N as the exit status -N; nobody should have to know that
-4 means the CPU refused an instruction. ``EngineDied`` carries the status and the signal so code
(the build's smoke run) can act on it, and reads as one line for the user.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tokometer.engines._fs import built_binary_path
from tokometer.util.errors import EngineError

__all__ = ["EngineDied", "died_error", "exit_reason", "signal_advice", "signal_of"]

_REBUILD = "run 'tokometer serve --rebuild' to rebuild it for this CPU"
# Signal name -> (what it means, in a few words; what to do or look at).
_SIGNALS: dict[str, tuple[str, str]] = {
    "SIGILL": ("illegal instruction", "the build uses CPU instructions this machine refuses"),
    "SIGSEGV": ("segmentation fault", "the engine crashed: a bug in it, or a damaged model file"),
    "SIGBUS": ("bus error", "a memory-mapped file (the model?) was truncated or became unreadable"),
    "SIGKILL": ("killed", "perhaps out of memory (the kernel's OOM killer: see `dmesg`), or `kill -9`"),
    "SIGABRT": ("aborted", "the engine stopped on a failed internal check; its log says which"),
    "SIGFPE": ("arithmetic error", "the engine crashed on a bad arithmetic operation"),
    "SIGTERM": ("terminated", "something else asked it to stop"),
    "SIGINT": ("interrupted", "Ctrl-C reached it"),
}


def signal_of(code: int | None) -> signal.Signals | None:
    """The signal that ended a process with exit status ``code`` (negative, as subprocess reports it)."""
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code)
    except ValueError:
        return None


def exit_reason(code: int | None) -> str:
    """``exited with status 1``, or ``was killed by SIGILL (illegal instruction)``."""
    sig = signal_of(code)
    if sig is None:
        return "has not exited" if code is None else f"exited with status {code}"
    meaning = _SIGNALS.get(sig.name, (signal.strsignal(sig) or "", ""))[0].lower()
    return f"was killed by {sig.name}" + (f" ({meaning})" if meaning else "")


def _is_our_build(program: str) -> bool:
    try:
        return bool(program) and Path(program).resolve() == built_binary_path().resolve()
    except OSError:
        return False


def signal_advice(code: int | None, program: str = "") -> str:
    """What to do about the signal behind ``code`` ("" if none). ``program``: the binary that ran."""
    sig = signal_of(code)
    if sig is None:
        return ""
    if sig.name == "SIGILL" and not _is_our_build(program):
        return "this binary uses CPU instructions this machine refuses; rebuild it for this CPU"
    advice = _SIGNALS.get(sig.name, ("", ""))[1]
    return f"{advice}; {_REBUILD}" if sig.name == "SIGILL" else advice


class EngineDied(EngineError):
    """An engine process ended on its own: ``exit_code`` as subprocess reports it, ``signal`` if one killed it."""

    def __init__(self, message: str, exit_code: int | None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.signal = signal_of(exit_code)


def died_error(name: str, code: int | None, when: str, log_excerpt: str, program: str = "") -> EngineDied:
    """The one-line error for an engine that ended ``when`` (e.g. "while starting"), quoting its log."""
    advice = signal_advice(code, program)
    advice_part = f": {advice}" if advice else ""
    return EngineDied(f"{name} {exit_reason(code)} {when}{advice_part}; its log ends: {log_excerpt}", code)
