"""The exceptions tokometer raises at its API boundary.

Errors *on the request path* are not exceptions: a failed request becomes a
`RequestRecord` with an error category and the run goes on (see `records.py`).
What is raised here is for things the user must fix before anything can be
measured: bad options, an unreadable dataset, an endpoint that answers nothing.

    TokometerError                 every error the CLI turns into one line, exit 2 (`exit_status`)
    ├── ConfigError                options or config values that make no sense
    ├── DatasetError               a prompt source that cannot be read or parsed
    ├── EndpointError              the target answers nothing, or not what was asked
    ├── EngineError                an engine could not be started or died
    ├── TokenizerError             a tokenizer could not be loaded
    ├── StoreError                 the results store could not be opened or written
    ├── OutputError                an output file could not be written (named; the previous version is kept)
    ├── RunFailed                  a run that started failed part-way (a Ray actor, the engine died): exit 1
    └── (gateway) UpstreamError    an upstream failed, with the bench's ErrorCategory; AllUpstreamsFailed

Each message is written to be shown as it is: what was wrong and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DatasetError",
    "EndpointError",
    "EngineError",
    "OutputError",
    "RunFailed",
    "StoreError",
    "TokenizerError",
    "TokometerError",
]


class TokometerError(Exception):
    """Base of every error tokometer reports to the user in one line."""

    exit_status: int = 2
    """The command's exit status when this error ends it: 2, bad input or a failure before any work."""


class ConfigError(TokometerError):
    """An option, a spec or a config file value is invalid."""


class DatasetError(TokometerError):
    """A prompt source could not be read or has malformed entries."""


class EndpointError(TokometerError):
    """The endpoint under test cannot be reached or does not speak the protocol."""


class EngineError(TokometerError):
    """An inference engine could not be started, or stopped unexpectedly."""

    command_line: tuple[str, ...] = ()
    """The engine's command line, when the engine had been started (its launcher sets it), else empty."""
    engine_log: str = ""
    """The end of the engine's own log, when the engine had been started (its launcher sets it), else empty."""


class TokenizerError(TokometerError):
    """A tokenizer could not be loaded or used."""


class StoreError(TokometerError):
    """The results store could not be opened or written."""


class OutputError(TokometerError):
    """An output file could not be written (`tokometer.util.atomicfile`): the message names it."""


class RunFailed(TokometerError):
    """A run that had started failed part-way (a Ray actor or the embedded engine died); what finished is saved.

    Not bad input: the command exits 1, as a run with failed requests does."""

    exit_status = 1
