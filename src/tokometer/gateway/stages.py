"""The gateway's admission: the stages a request passes before it is relayed, as one ordered table.

`STAGES` lists them in the order they run:

==========  ===================================================  ====================================
stage       checks (and what it finds)                           refusals (`Refusal`)
==========  ===================================================  ====================================
key         the API key (only with ``[[keys]]``)                 `KEY_REFUSED`
body        the body arrives whole, in time, within its size     `BODY_TIMEOUT`, `BODY_IDLE_TIMEOUT`,
                                                                 `BODY_TOO_LARGE`, `CLIENT_GONE`
translate   a JSON object of the client protocol's request shape `BAD_BODY`, `BAD_FIELD`,
            (its fields' types, counts and sizes), as a chat     `TOO_MANY_MESSAGES`, `OVER_LIMIT`
            request
validate    the translated request's fields (a Messages or       `BAD_BODY`, `BAD_FIELD`,
            Responses client's; an OpenAI client's were the      `TOO_MANY_MESSAGES`, `OVER_LIMIT`
            client's shape)
messages    at most ``max_messages`` messages                    `TOO_MANY_MESSAGES`
route       a route serves the ``model``                         `MODEL_NOT_FOUND`
rate        the key's and the route's rate limits have room      `RATE_LIMITED`
            (only with limits: `tokometer.gateway.ratelimit`)
budget      the key's token budget is not spent (only with keys) `BUDGET_SPENT`
prompt      the prompt's tokens (counted, cut, ``max_tokens``    `TOO_LONG`, `COUNTING_BUSY`
            capped: `tokometer.gateway.counting`)
cache       a cached answer (only with a cache): replayed        (none)
==========  ===================================================  ====================================

Each stage is a small function of the `Gateway` and the request's `Admission` (what the stages have
found so far). It returns None to pass the request on, or the response that ends it: a refusal, whose
shape (status, error type and code, the ``reason`` label of ``tokometer_gateway_rejected_total``) is
declared once, as a `Refusal` next to the stage, or at the cache the cached answer. A stage that
waits (reads the body, asks the budget store, counts in a thread, looks in the cache) is a `Wait`;
the others are `Check`s, called without an await. A stage that cannot apply to a gateway's config
(keys, budgets, a cache) is left out of that gateway's table when it starts (`stages_for`), so
the request path pays nothing for what is not configured. `Gateway.handle` runs the table, then
relays what passed (`tokometer.gateway.relay`) with the `RelayContext` of `Admission.context`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from tokometer.gateway.auth import auth_error
from tokometer.gateway.cache import cache_key
from tokometer.gateway.outcome import RelayContext
from tokometer.gateway.prompt import TooLong
from tokometer.gateway.ratelimit import Limit, any_limits, limits_of
from tokometer.inbound.body import BodyTimeout, BodyTooLarge, discard_rest, read_body
from tokometer.inbound.connections import EVICTED
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.inbound.shapes import FieldError, check
from tokometer.protocols.gateway_clients import client_protocol, relays_openai_bytes, to_chat_request
from tokometer.protocols.gateway_clients import error_body as client_error_body
from tokometer.protocols.openai.errors import error_body
from tokometer.protocols.openai.request import check_request

if TYPE_CHECKING:
    from tokometer.gateway.auth import KeyRing
    from tokometer.gateway.budget import TokenBudgets
    from tokometer.gateway.cache import AnswerCache, CachedAnswer
    from tokometer.gateway.config import GatewayConfig, KeyConfig, RouteConfig
    from tokometer.gateway.counting import CountingLanes
    from tokometer.gateway.prometheus import GatewayMetrics
    from tokometer.gateway.prompt import PromptCheck, PromptLimiter
    from tokometer.gateway.ratelimit import RateLimits
    from tokometer.inbound.request_limits import RequestLimits
    from tokometer.protocols.gateway_clients import ClientApi, Endpoint

__all__ = ["STAGES", "Admission", "Check", "GatewayParts", "Refusal", "Wait", "stages_for"]

log = logging.getLogger("tokometer.gateway")

Answer = Response | None
"""What a stage returns: None (the request goes on) or the response that ends it."""


class GatewayParts(Protocol):
    """What the stages read of the gateway (`tokometer.gateway.app.Gateway`, which imports this module)."""

    config: GatewayConfig
    limits: RequestLimits
    """The limits of a request's fields (`tokometer.inbound.request_limits`, ``max_messages`` from the config)."""
    keys: KeyRing
    metrics: GatewayMetrics
    budgets: TokenBudgets
    rates: RateLimits
    limiters: dict[str, PromptLimiter]
    counting: CountingLanes
    cache: AnswerCache | None
    worker: str | None

    def replay(self, ctx: RelayContext, hit: CachedAnswer) -> Response:
        """A cached answer, written in the client's protocol."""


@dataclass(frozen=True, slots=True, eq=False)
class Refusal:
    """An error the gateway answers itself at admission: its status, OpenAI error type and code, and the
    ``reason`` it is counted under (None: not counted). The body is in the shape the client's protocol reads."""

    status: int
    type: str | None
    """None: the answer has no body (the client has gone)."""
    code: str | None
    label: str | None
    headers: Mapping[str, str] | None = None

    def answer(self, gateway: GatewayParts, api: ClientApi, message: str) -> Response:
        """Count the refusal and answer it with ``message``."""
        self.count(gateway)
        return self.respond(api, self.body(message))

    def body(self, message: str) -> dict[str, Any]:
        """The error body with ``message``, in OpenAI's shape."""
        return error_body(message, self.type or "", self.code)

    def count(self, gateway: GatewayParts) -> None:
        if self.label is not None:
            gateway.metrics.rejected.labels(self.label).inc()

    def respond(self, api: ClientApi, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Response:
        """The answer with ``body`` (OpenAI's error shape), uncounted (``headers``: besides the refusal's own)."""
        if self.type is None:
            return Response(status_code=self.status)
        if headers:
            headers = {**(self.headers or {}), **headers}
        return JSONResponse(client_error_body(api, self.status, body), status_code=self.status,
                            headers=headers or self.headers)


_CLOSE = {"connection": "close"}
KEY_REFUSED = Refusal(401, "authentication_error", "invalid_api_key", "auth")
BODY_TIMEOUT = Refusal(408, "invalid_request_error", "request_timeout", "body_timeout", _CLOSE)
BODY_IDLE_TIMEOUT = Refusal(408, "invalid_request_error", "request_timeout", "body_idle_timeout", _CLOSE)
BODY_TOO_LARGE = Refusal(413, "invalid_request_error", "request_too_large", "body_too_large", _CLOSE)
CLIENT_GONE = Refusal(499, None, None, None)
BAD_BODY = Refusal(400, "invalid_request_error", None, "bad_body")
BAD_FIELD = Refusal(400, "invalid_request_error", "invalid_type", "bad_field")
TOO_MANY_MESSAGES = Refusal(400, "invalid_request_error", "too_many_messages", "too_many_messages")
OVER_LIMIT = Refusal(400, "invalid_request_error", "over_limit", "over_limit")
"""A field over a count or size limit (tools, stop sequences, logit_bias entries, content parts, a name's
length): the body's ``code`` names which (``too_many_tools``, ``string_too_long``)."""
MODEL_NOT_FOUND = Refusal(404, "invalid_request_error", "model_not_found", None)
BUDGET_SPENT = Refusal(429, "rate_limit_error", "token_budget_exceeded", "budget")
RATE_LIMITED = Refusal(429, "requests", "rate_limit_exceeded", "rate_limit")
TOO_LONG = Refusal(400, "invalid_request_error", "context_length_exceeded", "too_long")
COUNTING_BUSY = Refusal(503, "server_error", "counting_busy", "counting_busy", {"retry-after": "1"})

_TIMEOUTS = {refusal.label: refusal for refusal in (BODY_TIMEOUT, BODY_IDLE_TIMEOUT)}
"""The body's timeouts by `BodyTimeout.reason`."""


class Admission:
    """One request on its way through the stages: what they have found so far."""

    __slots__ = ("api", "body", "cache_key", "check", "endpoint", "key", "rate_headers", "rate_limits", "raw",
                 "received", "request", "route", "size")

    raw: bytes
    size: int
    body: dict[str, Any]
    """The request as an OpenAI ``endpoint`` request (translated from the client's protocol)."""
    route: RouteConfig
    check: PromptCheck
    """The prompt counted: the body to send upstream, its tokens, what was cut or capped."""

    def __init__(self, request: Request, endpoint: Endpoint, api: ClientApi, received: int) -> None:
        self.request = request
        self.endpoint = endpoint
        self.api = api
        self.received = received
        self.key: KeyConfig | None = None
        self.cache_key: str | None = None
        self.rate_limits: tuple[Limit, ...] = ()
        self.rate_headers: dict[str, str] | None = None

    def context(self, worker: str | None) -> RelayContext:
        """Everything decided before routing (``worker``: this process's index under ``--workers``)."""
        body, check, api = self.body, self.check, self.api
        stream = bool(body.get("stream"))
        options = body.get("stream_options")
        include_usage = not relays_openai_bytes(api) or bool(isinstance(options, dict) and options.get("include_usage"))
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        headers: dict[str, str] = {} if worker is None else {"x-tokometer-worker": worker}
        if self.rate_headers:
            headers.update(self.rate_headers)
        if check.truncated_from is not None:
            headers["x-tokometer-truncated-from"] = str(check.truncated_from)
        if check.capped_max_tokens is not None:
            headers["x-tokometer-max-tokens"] = str(check.capped_max_tokens)
        return RelayContext(self.route, self.endpoint, check.body, stream, include_usage,
                            self.key.name if self.key else None, self.cache_key, check.prompt_tokens,
                            asked if isinstance(asked, int) else None, self.received, headers, api,
                            self.rate_limits)


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "an unknown address"


# -- the stages, in order ------------------------------------------------------------------------
def _key(gateway: GatewayParts, a: Admission) -> Answer:
    key, problem = gateway.keys.identify_request(a.request.headers)
    if key is None:
        KEY_REFUSED.count(gateway)
        log.warning("authentication failed from %s: %s", _client(a.request), problem)
        return KEY_REFUSED.respond(a.api, auth_error(401, problem))
    a.key = key
    return None


async def _body(gateway: GatewayParts, a: Admission) -> Answer:
    limits, request = gateway.config.server, a.request
    try:
        a.raw = await read_body(request, limits.max_body_bytes, limits.body_timeout_s,
                                idle_timeout_s=limits.body_idle_timeout_s)
    except BodyTimeout as exc:
        refusal = _TIMEOUTS[exc.reason]
        refusal.count(gateway)
        log.warning("client %s: %s", _client(request), exc)
        return refusal.respond(a.api, refusal.body(str(exc)))
    except BodyTooLarge as exc:
        BODY_TOO_LARGE.count(gateway)
        await discard_rest(request)
        return BODY_TOO_LARGE.respond(a.api, BODY_TOO_LARGE.body(str(exc)))
    except ClientDisconnect:
        if not request.scope.get(EVICTED):  # closed to make room: logged as such already
            log.warning("client %s went away while sending its request body", _client(request))
        return CLIENT_GONE.respond(a.api, {})
    a.size = len(a.raw)
    return None


def _translate(gateway: GatewayParts, a: Admission) -> Answer:
    try:
        limits = gateway.limits
        body = parse_object(a.raw, limits.max_json_depth, limits.max_json_strings, limits.max_json_values)
        shape = client_protocol(a.api, a.endpoint).request
        if shape is not None:
            check(shape, body, gateway.limits)
        a.body = to_chat_request(a.api, body)
    except ValueError as exc:
        return _bad_request(gateway, a.api, exc)
    finally:
        del a.raw  # the bytes are not needed any more: a big body's memory goes before its prompt is counted
    return None


def _validate(gateway: GatewayParts, a: Admission) -> Answer:
    if relays_openai_bytes(a.api):
        return None  # an OpenAI client's request is its own shape, checked in _translate
    try:
        check_request(a.body, a.endpoint == "chat", gateway.limits)
    except ValueError as exc:
        return _bad_request(gateway, a.api, exc)
    return None


def _bad_request(gateway: GatewayParts, api: ClientApi, exc: ValueError) -> Response:
    if isinstance(exc, BadBody):
        return BAD_BODY.answer(gateway, api, str(exc))
    if isinstance(exc, FieldError) and exc.code != BAD_FIELD.code:
        if exc.code == TOO_MANY_MESSAGES.code:
            return TOO_MANY_MESSAGES.answer(gateway, api, str(exc))
        OVER_LIMIT.count(gateway)
        return OVER_LIMIT.respond(api, error_body(str(exc), OVER_LIMIT.type or "", exc.code))
    return BAD_FIELD.answer(gateway, api, f"invalid request: {exc}")  # a field of the wrong type: named, as OpenAI


def _messages(gateway: GatewayParts, a: Admission) -> Answer:
    messages, most = a.body.get("messages"), gateway.config.server.max_messages
    if isinstance(messages, list) and len(messages) > most:
        return TOO_MANY_MESSAGES.answer(gateway, a.api, f"{len(messages):,} messages is more than this gateway "
                                                        f"takes ({most:,}): send fewer")
    return None


def _route(gateway: GatewayParts, a: Admission) -> Answer:
    route = gateway.config.route(str(a.body.get("model", "")))
    if route is None:
        models = ", ".join(r.model for r in gateway.config.routes)
        return MODEL_NOT_FOUND.answer(gateway, a.api, f"model {a.body.get('model')!r} is not served here; "
                                                      f"models: {models}")
    a.route = route
    return None


async def _rate(gateway: GatewayParts, a: Admission) -> Answer:
    limits = a.rate_limits = limits_of(a.key, a.route)
    if not limits:
        return None
    verdict = await gateway.rates.admit(limits)
    headers = verdict.headers()
    if not verdict.admitted:
        RATE_LIMITED.count(gateway)
        kind = verdict.refused_by.limit.kind if verdict.refused_by is not None else "requests"
        return RATE_LIMITED.respond(a.api, error_body(verdict.message(), kind, RATE_LIMITED.code), headers)
    a.rate_headers = headers
    return None


async def _budget(gateway: GatewayParts, a: Admission) -> Answer:
    key = a.key
    if key is not None and key.tokens_per_period is not None:
        state = await gateway.budgets.state(key.name)
        if state.exceeded:
            return BUDGET_SPENT.answer(gateway, a.api, gateway.budgets.message(state))
    return None


async def _prompt(gateway: GatewayParts, a: Admission) -> Answer:
    try:
        check = await gateway.counting.check(gateway.limiters[a.route.model], a.body, a.endpoint, a.size)
    except TooLong as exc:
        return TOO_LONG.answer(gateway, a.api, str(exc))
    if check is None:
        return COUNTING_BUSY.answer(gateway, a.api, "too many large prompts are being counted at once: retry shortly")
    a.check = check
    return None


async def _cache(gateway: GatewayParts, a: Admission) -> Answer:
    cache, model = gateway.cache, a.route.model
    assert cache is not None
    ck = a.cache_key = cache_key(model, a.check.body, a.endpoint)
    if ck is None:
        return None
    hit = await cache.get(ck)
    gateway.metrics.cache.labels(model, "hit" if hit else "miss").inc()
    return None if hit is None else gateway.replay(a.context(gateway.worker), hit)


# -- the table -----------------------------------------------------------------------------------
def _always(gateway: GatewayParts) -> bool:
    return True


def _with_keys(gateway: GatewayParts) -> bool:
    return gateway.keys.enabled


def _with_rate_limits(gateway: GatewayParts) -> bool:
    return any_limits(gateway.config)


def _with_cache(gateway: GatewayParts) -> bool:
    return gateway.cache is not None


@dataclass(frozen=True, slots=True)
class Check:
    """A stage that decides at once."""

    name: str
    run: Callable[[GatewayParts, Admission], Answer]
    refusals: tuple[Refusal, ...] = ()
    applies: Callable[[GatewayParts], bool] = _always
    """Whether the stage can matter to a gateway (its config): if not, it is left out of its table."""


@dataclass(frozen=True, slots=True)
class Wait:
    """A stage that may wait (I/O, a thread): awaited."""

    name: str
    run: Callable[[GatewayParts, Admission], Awaitable[Answer]]
    refusals: tuple[Refusal, ...] = ()
    applies: Callable[[GatewayParts], bool] = _always


Stage = Check | Wait

STAGES: tuple[Stage, ...] = (
    Check("key", _key, (KEY_REFUSED,), _with_keys),
    Wait("body", _body, (BODY_TIMEOUT, BODY_IDLE_TIMEOUT, BODY_TOO_LARGE, CLIENT_GONE)),
    Check("translate", _translate, (BAD_BODY, BAD_FIELD, TOO_MANY_MESSAGES, OVER_LIMIT)),
    Check("validate", _validate, (BAD_BODY, BAD_FIELD, TOO_MANY_MESSAGES, OVER_LIMIT)),
    Check("messages", _messages, (TOO_MANY_MESSAGES,)),
    Check("route", _route, (MODEL_NOT_FOUND,)),
    Wait("rate", _rate, (RATE_LIMITED,), _with_rate_limits),
    Wait("budget", _budget, (BUDGET_SPENT,), _with_keys),
    Wait("prompt", _prompt, (TOO_LONG, COUNTING_BUSY)),
    Wait("cache", _cache, (), _with_cache),
)
"""The admission stages, in the order a request passes them."""


def stages_for(gateway: GatewayParts) -> tuple[Stage, ...]:
    """The stages of `STAGES` that apply to ``gateway``'s config, in order (chosen once, when it starts)."""
    return tuple(stage for stage in STAGES if stage.applies(gateway))
