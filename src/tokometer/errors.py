"""The exceptions tokometer raises at its API boundary.

Errors *on the request path* are not exceptions: a failed request becomes a
`RequestRecord` with an error category and the run goes on (see `records.py`).
What is raised here is for things the user must fix before anything can be
measured: bad options, an unreadable dataset, an endpoint that answers nothing.

    TokometerError                 every error the CLI turns into one line, exit 2
    ├── ConfigError                options or config values that make no sense
    ├── DatasetError               a prompt source that cannot be read or parsed
    ├── EndpointError              the target answers nothing, or not what was asked
    ├── EngineError                an engine could not be started or died
    ├── TokenizerError             a tokenizer could not be loaded
    ├── StoreError                 the results store could not be opened or written
    └── (gateway) UpstreamError    an upstream failed, with the bench's ErrorCategory; AllUpstreamsFailed

Each message is written to be shown as it is: what was wrong and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DatasetError",
    "EndpointError",
    "EngineError",
    "StoreError",
    "TokenizerError",
    "TokometerError",
]


class TokometerError(Exception):
    """Base of every error tokometer reports to the user in one line."""


class ConfigError(TokometerError):
    """An option, a spec or a config file value is invalid."""


class DatasetError(TokometerError):
    """A prompt source could not be read or has malformed entries."""


class EndpointError(TokometerError):
    """The endpoint under test cannot be reached or does not speak the protocol."""


class EngineError(TokometerError):
    """An inference engine could not be started, or stopped unexpectedly."""


class TokenizerError(TokometerError):
    """A tokenizer could not be loaded or used."""


class StoreError(TokometerError):
    """The results store could not be opened or written."""
