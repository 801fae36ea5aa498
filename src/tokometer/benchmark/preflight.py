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
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.common.protocol import ContextProbe, Protocol, root_of
from tokometer.protocols.llamacpp import slot_context
from tokometer.protocols.registry import PROTOCOLS, create_client, protocol_named
from tokometer.records import RequestRecord
from tokometer.util.errors import EndpointError
from tokometer.util.shown import clipped
from tokometer.util.waitnotice import WAIT_NOTICE_AFTER_S, say_while_waiting

__all__ = ["advertised_context", "preflight", "protocol_hint", "server_root"]

def server_root(url: str) -> str:
    """scheme://host:port of ``url``."""
    return root_of(url)


async def _spoken(probe: Probe, url: str) -> list[Protocol]:
    """The protocols the server at ``url``'s origin answers the probes of."""
    found = []
    for protocol in PROTOCOLS.values():
        if protocol.detect is None:
            continue
        path, key = protocol.detect
        data = await probe.get_json(server_root(url) + path)
        if isinstance(data, dict) and key in data:
            found.append(protocol)
    return found


async def protocol_hint(spec: BenchSpec, probe: Probe) -> str:
    """What to change when the server does not serve ``spec``'s protocol at its URL, in words."""
    spoken = await _spoken(probe, spec.url)
    protocol = protocol_named(spec.api)
    family = protocol.family_name
    base = protocol.base_path
    if (base and any(p.family_name == family for p in spoken)
            and not urlsplit(spec.url).path.rstrip("/").endswith(base)):
        return f"it serves the {protocol.vendor} API under {base}: use --url {server_root(spec.url)}{base}"
    others = [p.name for p in spoken if p.family_name != family]
    if others:
        return f"this server does not speak --api {spec.api}; try --api {others[0]}"
    if spoken:
        return f"check the URL's path ({urlsplit(spec.url).path or '/'})"
    return "is the URL right, and is this an inference server? (none of the known APIs answered)"


async def advertised_context(spec: BenchSpec, model: str, probe: Probe) -> tuple[int, str] | None:
    """(context tokens, where it was read) as the server advertises it for one request, if it does."""
    context = protocol_named(spec.api).context
    if context is not None and not context.at_root and (found := await _ask(context, spec, model, probe)):
        return found  # under the API's URL (vLLM's /v1/models): asked first
    props = await probe.get_json(server_root(spec.url) + "/props")  # llama.cpp, also behind its OpenAI API
    if (n_ctx := slot_context(props)) is not None:
        return n_ctx, "n_ctx per slot in /props"
    if context is not None and context.at_root:  # at the server's root (TGI's /info): after llama.cpp's
        return await _ask(context, spec, model, probe)
    return None


async def _ask(context: ContextProbe, spec: BenchSpec, model: str, probe: Probe) -> tuple[int, str] | None:
    """(context tokens, where) as ``context`` reads them from the server, if it does."""
    tokens = context.read(await probe.get_json(context.url(spec.url)), model)
    return None if tokens is None else (tokens, context.where)


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
                        max_event_bytes=spec.max_event_bytes, max_response_bytes=spec.max_response_bytes or 0)
    record = RequestRecord(index=-1, step=-1)
    with say_while_waiting(lambda: _waiting(spec, record)):
        async with StreamClient(target, create_client(spec.api), params, timeouts) as client:
            await client.send(Prompt.from_text("Hello"), record)
    error, detail = record.error, record.error_detail
    if error is None:
        pass
    elif error in ("http_404", "http_4xx") and record.status in (404, 405):
        raise EndpointError(f"{spec.url}: the check request got {clipped(detail)}: "
                            f"{await protocol_hint(spec, probe)}")
    elif error in ("http_401", "http_403"):
        if spec.api_key is None and not any(k.lower() == "authorization" for k in spec.headers):
            raise EndpointError(f"{spec.url} wants an API key ({clipped(detail)}): give --api-key KEY "
                                "(or set TOKOMETER_API_KEY)")
        hint = ""
        protocol = protocol_named(spec.api)
        if protocol.key_header != "authorization" and not any(k.lower() == "authorization" for k in spec.headers):
            hint = (f" (it went as {protocol.key_header}, as {protocol.vendor} takes it; a server that reads only "
                    "Authorization: Bearer, as vLLM does, needs --header 'Authorization: Bearer KEY' too)")
        raise EndpointError(f"{spec.url} refused the API key given ({clipped(detail)}): check --api-key{hint}")
    elif error in ("redirect", "protocol", "connect"):
        raise EndpointError(f"{spec.url}: the check request failed: {detail}")
    elif error == "timeout" and not record.first_byte_ns:  # every request of the run would wait as long
        raise EndpointError(f"{spec.url} took the check request and sent not one byte back ({clipped(detail)}): is "
                            "it the server meant, and is it up? (a server that needs longer to begin an answer: "
                            "raise --idle-timeout and --timeout)")
    else:
        warnings.append(f"the check request before the run failed ({error}: {clipped(detail)}); measuring anyway")
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
