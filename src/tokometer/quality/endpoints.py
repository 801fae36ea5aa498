"""The two things ``tokometer quality`` compares: server URLs, or GGUF files it serves itself.

An endpoint is given as one of:

    http://host:port[/v1]        an OpenAI-compatible server (``/v1`` is added when the URL has no path)
    engine:bundled               the embedded llama.cpp engine on the bundled Gemma 3 270M Q4_K_M
    engine:PATH.gguf             the embedded engine on a GGUF file
    engine:bundled:Q2_K          ... on that model requantised to a llama.cpp type (Q2_K, Q3_K_M, Q8_0 ...)
    engine:PATH.gguf:Q3_K_M        with ``llama-quantize --allow-requantize``, made once into the cache
                                 (`tokometer.engines.quantize.requantized`)

`open_endpoints` starts what must be started (each engine with ``parallel`` slots), finds each
model name (``--model-a/-b``, else the first one ``/models`` lists) and whether the server is
llama.cpp (it answers ``/props``), and stops the engines on leaving.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tokometer.util.errors import ConfigError
from tokometer.util.shown import clipped

__all__ = ["ENGINE_PREFIX", "Endpoint", "EndpointSpec", "open_endpoints", "parse_endpoint"]

ENGINE_PREFIX = "engine:"


@dataclass(frozen=True)
class EndpointSpec:
    """What the user gave: a URL, or a model file (None: the bundled one) to serve, perhaps requantised."""

    text: str
    url: str | None = None
    model_path: Path | None = None
    quant: str | None = None

    @property
    def is_engine(self) -> bool:
        return self.url is None


@dataclass
class Endpoint:
    """A ready endpoint: its OpenAI base URL, server root, model, label and what kind of server it is."""

    label: str
    spec: EndpointSpec
    base_url: str
    root_url: str
    model: str
    llamacpp: bool = False
    identity: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = field(default=None, repr=False)

    def describe(self) -> str:
        return f"{clipped(self.model)} at {self.base_url}" + (" (embedded engine)" if self.spec.is_engine else "")


def parse_endpoint(text: str) -> EndpointSpec:
    """Parse one endpoint argument; ConfigError (one line) for one that cannot be right."""
    from tokometer.engines.quantize import QUANT_TYPE

    if text.startswith(ENGINE_PREFIX):
        rest = text[len(ENGINE_PREFIX):]
        quant = None
        head, _, tail = rest.rpartition(":")
        if head and QUANT_TYPE.match(tail):
            rest, quant = head, tail.upper()
        if not rest:
            raise ConfigError(f"{text!r}: say which model to serve, e.g. engine:bundled or engine:model.gguf")
        if rest == "bundled":
            return EndpointSpec(text, model_path=None, quant=quant)
        path = Path(rest).expanduser()
        if not path.is_file():
            raise ConfigError(f"{text!r}: model file {path} not found (engine:PATH.gguf, or engine:bundled)")
        return EndpointSpec(text, model_path=path, quant=quant)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{text!r} is neither a server URL (http://host:port/v1) nor engine:PATH.gguf / "
                          "engine:bundled")
    url = text.rstrip("/") if parts.path.strip("/") else text.rstrip("/") + "/v1"
    return EndpointSpec(text, url=url)


def _model_file(spec: EndpointSpec) -> Path | None:
    """The GGUF to serve: the given one (or the bundled one), requantised when a type was given."""
    if spec.quant is None:
        return spec.model_path
    from tokometer.bundled import bundled_model_path
    from tokometer.engines.buildprogress import progress_for_stderr
    from tokometer.engines.quantize import find_llama_quantize, requantized

    source = spec.model_path or bundled_model_path()
    progress = progress_for_stderr()
    try:
        binary = find_llama_quantize(build=True, progress=progress)
    finally:
        progress.close()
    return requantized(source, spec.quant, binary=binary)


async def _resolve(label: str, spec: EndpointSpec, base_url: str, model: str | None, api_key: str | None,
                   identity: dict[str, Any]) -> Endpoint:
    from tokometer.client.probe import Probe
    from tokometer.protocols.common.protocol import ids_of
    from tokometer.util.errors import EndpointError

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    probe = Probe(headers=headers)
    parts = urlsplit(base_url)
    root = f"{parts.scheme}://{parts.netloc}"
    if not model:
        listed = ids_of(await probe.get_json(base_url + "/models"))
        if not listed:
            raise EndpointError(f"endpoint {label}: could not list models at {base_url}/models: is the server up "
                                f"and OpenAI-compatible? (give --model-{label.lower()} to name the model)")
        model = listed[0]
    props = await probe.get_json(root + "/props")
    llamacpp = isinstance(props, dict) and "default_generation_settings" in props
    return Endpoint(label, spec, base_url, root, model, llamacpp, identity, api_key)


@contextlib.contextmanager
def open_endpoints(specs: tuple[EndpointSpec, EndpointSpec], models: tuple[str | None, str | None],
                   api_key: str | None = None, parallel: int = 2,
                   announce: Any = None) -> Iterator[tuple[Endpoint, Endpoint]]:
    """Start the engines among ``specs`` (``announce``: called with a line before each), resolve both
    endpoints, and stop the engines when the block ends."""
    import asyncio

    from tokometer.engines import LlamaCppSettings, start_llamacpp

    with contextlib.ExitStack() as stack:
        ready: list[Endpoint] = []
        for label, spec, model in zip(("A", "B"), specs, models, strict=True):
            identity: dict[str, Any] = {}
            base_url = spec.url
            if base_url is None:
                model_file = _model_file(spec)
                if announce is not None:
                    announce(f"Starting the embedded llama.cpp engine for {label} ({spec.text})...")
                engine = stack.enter_context(start_llamacpp(LlamaCppSettings(model_path=model_file,
                                                                             parallel=parallel)))
                base_url, identity = engine.openai_url, engine.identity
                model = model or engine.model
            ready.append(asyncio.run(_resolve(label, spec, base_url, model, api_key, identity)))
        yield ready[0], ready[1]
