"""`DoctorSpec`: what ``tokometer doctor`` is asked to examine, validated."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tokometer.protocols.registry import PROTOCOLS, default_api_for_url
from tokometer.util.httpurl import http_url_problem

__all__ = ["DoctorSpec"]


class DoctorSpec(BaseModel):
    """A server to examine: its URL and protocol, the model to ask for, a key, the hardware it runs on."""

    model_config = ConfigDict(extra="forbid")

    url: str
    api: str | None = None
    """Protocol (`tokometer.protocols.registry.PROTOCOLS`); None: guessed from the URL, as ``bench`` does."""
    model: str = ""
    """The model to ask for; empty: the first one the server lists."""
    api_key: str | None = Field(None, exclude=True, repr=False)
    hardware: str | None = None
    """What the server runs on (a ``tokometer estimate`` hardware name, or ``host``): speed is compared with
    the roofline estimate when the model is known too."""
    estimate_model: str | None = None
    """The model for the estimate when the served name is not one ``estimate`` knows (a GGUF file, an id)."""
    tokenizer: str = "auto"
    """The model's tokenizer for the prompt-token check: ``auto`` (the server's /tokenize), or anything
    ``tokometer count --tokenizer`` takes."""
    quick: bool = False
    """Skip what costs time: the load, the prefix-cache pair, the context probes, the disk read."""
    timeout_s: float = Field(60.0, gt=0)
    """Limit of one request (connecting: a sixth of it, at most 10 s)."""

    @property
    def protocol(self) -> str:
        return self.api or default_api_for_url(self.url)

    @model_validator(mode="after")
    def _check(self) -> DoctorSpec:
        if problem := http_url_problem(self.url):
            raise ValueError(f"URL {self.url!r} {problem}")
        if self.api is not None and self.api not in PROTOCOLS:
            raise ValueError(f"unknown API {self.api!r}: use one of {', '.join(sorted(PROTOCOLS))}")
        if self.api is not None and not PROTOCOLS[self.api].streams:
            raise ValueError(f"doctor checks a generating server's streams; {self.api} answers are not streamed: "
                             f"measure them with tokometer bench --api {self.api}")
        return self
