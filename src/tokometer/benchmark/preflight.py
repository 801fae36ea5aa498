"""One request before the run: does the server speak this protocol, does it want a key, is the context big enough.

A run of a thousand requests that all fail with 404 or 401 measures nothing and fills the store
with failures. So before anything is measured or stored, one request is sent exactly as the run
will send them (the same client, protocol, headers and TLS settings), asking for one token:

- 404/405: the server does not serve this protocol's path. The server's other endpoints are
  probed (OpenAI ``/v1/models``, Ollama ``/api/tags``, TGI ``/info``, llama.cpp ``/props``) and
  the error names the ``--api`` (or the ``/v1`` URL) that would work;
- 401/403: the server wants a key (``--api-key``), or refuses the one given;
- a redirect or an answer that breaks HTTP: named as it is.

Other failures (5xx, resets, timeouts) are the server's behaviour under test: the run goes on and
the check's outcome is a warning. Then the context the server advertises (vLLM's
``max_model_len``, llama.cpp's ``n_ctx`` per slot, TGI's ``max_total_tokens``) is compared with
``--input-tokens`` + ``--output-tokens``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from tokometer.benchmark.spec import BenchSpec
from tokometer.client.probe import Probe
from tokometer.client.streamclient import StreamClient, Target, Timeouts
from tokometer.datasets import Prompt
from tokometer.errors import EndpointError
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.registry import create_backend
from tokometer.records import RequestRecord
from tokometer.waitnotice import WAIT_NOTICE_AFTER_S, say_while_waiting

__all__ = ["advertised_context", "preflight", "protocol_hint", "server_root"]

_PROBES: tuple[tuple[str, str, str], ...] = (
    ("openai-chat", "/v1/models", "data"),
    ("ollama", "/api/tags", "models"),
    ("tgi", "/info", "model_id"),
    ("llamacpp", "/props", "default_generation_settings"),
)
"""(--api, GET path at the server's root, a key its JSON answer has)."""


def server_root(url: str) -> str:
    """scheme://host:port of ``url``."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def _spoken(probe: Probe, url: str) -> list[str]:
    """The protocols the server at ``url``'s origin answers the probes of."""
    found = []
    for api, path, key in _PROBES:
        data = await probe.get_json(server_root(url) + path)
        if isinstance(data, dict) and key in data:
            found.append(api)
    return found


async def protocol_hint(spec: BenchSpec, probe: Probe) -> str:
    """What to change when the server does not serve ``spec``'s protocol at its URL, in words."""
    spoken = await _spoken(probe, spec.url)
    family = "openai" if spec.api.startswith("openai") else spec.api
    if family == "openai" and "openai-chat" in spoken and not urlsplit(spec.url).path.rstrip("/").endswith("/v1"):
        return f"it serves the OpenAI API under /v1: use --url {server_root(spec.url)}/v1"
    others = [api for api in spoken if not api.startswith(family)]
    if others:
        return f"this server does not speak --api {spec.api}; try --api {others[0]}"
    if spoken:
        return f"check the URL's path ({urlsplit(spec.url).path or '/'})"
    return "is the URL right, and is this an inference server? (none of the known APIs answered)"


async def advertised_context(spec: BenchSpec, model: str, probe: Probe) -> tuple[int, str] | None:
    """(context tokens, where it was read) as the server advertises it for one request, if it does."""
    root = server_root(spec.url)
    if spec.api.startswith("openai"):
        data = await probe.get_json(spec.url.rstrip("/") + "/models")
        for entry in (data or {}).get("data", []) if isinstance(data, dict) else []:
            if isinstance(entry, dict) and entry.get("id") == model and isinstance(entry.get("max_model_len"), int):
                return entry["max_model_len"], "max_model_len in /v1/models"
    props = await probe.get_json(root + "/props")  # llama.cpp, also behind its OpenAI API
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
            return settings["n_ctx"], "n_ctx per slot in /props"
    if spec.api == "tgi":
        info = await probe.get_json(root + "/info")
        if isinstance(info, dict) and isinstance(info.get("max_total_tokens"), int):
            return info["max_total_tokens"], "max_total_tokens in /info"
    return None


def _waiting(spec: BenchSpec, record: RequestRecord) -> str:
    what = "the first byte of its answer" if not record.first_byte_ns else "the end of its answer"
    return (f"tokometer: waiting for {spec.url} to answer the check request: {what} has not come in "
            f"{WAIT_NOTICE_AFTER_S:g} s (it fails after --idle-timeout {spec.idle_timeout_s:g}s or "
            f"--timeout {spec.request_timeout_s:g}s)")


async def preflight(spec: BenchSpec, model: str, probe: Probe, warnings: list[str]) -> float | None:
    """Send one 1-token request as the run will; raise EndpointError for what no run could survive. Returns how
    long the answer took (seconds; None when it failed): no request of the run can be much quicker."""
    target = Target(spec.url, spec.api_key, dict(spec.headers), spec.tls())
    params = GenerationParams(model=model, max_tokens=1, temperature=spec.temperature, seed=spec.seed_value,
                              include_usage=spec.include_usage)
    timeouts = Timeouts(connect=spec.connect_timeout_s, idle=spec.idle_timeout_s, total=spec.request_timeout_s,
                        max_event_bytes=spec.max_event_bytes)
    record = RequestRecord(index=-1, step=-1)
    with say_while_waiting(lambda: _waiting(spec, record)):
        async with StreamClient(target, create_backend(spec.api), params, timeouts) as client:
            await client.send(Prompt.from_text("Hello"), record)
    error, detail = record.error, record.error_detail
    if error is None:
        pass
    elif error in ("http_404", "http_4xx") and record.status in (404, 405):
        raise EndpointError(f"{spec.url}: the check request got {detail[:120]}: "
                            f"{await protocol_hint(spec, probe)}")
    elif error in ("http_401", "http_403"):
        if spec.api_key is None and not any(k.lower() == "authorization" for k in spec.headers):
            raise EndpointError(f"{spec.url} wants an API key ({detail[:120]}): give --api-key KEY "
                                "(or set TOKOMETER_API_KEY)")
        hint = ""
        if spec.api == "anthropic-messages" and not any(k.lower() == "authorization" for k in spec.headers):
            hint = (" (it went as x-api-key, as Anthropic takes it; a server that reads only Authorization: Bearer, "
                    "as vLLM does, needs --header 'Authorization: Bearer KEY' too)")
        raise EndpointError(f"{spec.url} refused the API key given ({detail[:120]}): check --api-key{hint}")
    elif error in ("redirect", "protocol", "connect"):
        raise EndpointError(f"{spec.url}: the check request failed: {detail}")
    else:
        warnings.append(f"the check request before the run failed ({error}: {detail[:160]}); measuring anyway")
    if spec.dataset is None and spec.prompt is None:
        context = await advertised_context(spec, model, probe)
        wanted = spec.input_tokens + spec.output_tokens
        if context is not None and wanted > context[0]:
            raise EndpointError(f"--input-tokens {spec.input_tokens} + --output-tokens {spec.output_tokens} = "
                                f"{wanted:,} tokens, more than the server's context of {context[0]:,} "
                                f"({context[1]}): lower them, or give the server a bigger context")
    if error is None and record.end_ns and record.sent_ns:
        return (record.end_ns - record.sent_ns) / 1e9
    return None
