"""LoRA adapters in the simulator (``sim --lora NAME,...``): served beside the base model as vLLM serves them
(``--enable-lora --lora-modules``), with a modelled cost for loading one.

- **Names.** With adapters configured, a request names the base model (``--model``) or one of the adapters; any
  other name is refused as vLLM refuses it: HTTP 404 ``{"error": {"message": "The model `x` does not exist.",
  "type": "NotFoundError", "param": "model", "code": 404}}`` (`refusal`). Without adapters any name is served,
  as before. The model lists (``/v1/models``, ``/api/tags``) list the adapters after the model (`listed_with`),
  as vLLM does, so a client that takes the first listed model still gets the base one.
- **Slots.** At most ``max_loras`` adapters are loaded at once (vLLM's ``--max-loras``); `AdapterSlots` keeps
  them, the least recently used evicted first.
- **Switch cost.** Loading an adapter that is not loaded costs ``switch_ms``:
  in scripted timing, the request that needs it gets its first token that much later; in the modelled engine
  (`tokometer.sim.engine`), the batch step that first needs it takes that much longer, and the scheduler admits
  no request whose adapter would make the running batch hold more than ``max_loras`` adapters (it waits, as in
  vLLM). The base model never pays. Each request's trace (``GET /sim/trace``) says its ``adapter`` and whether
  its arrival made the simulator load it (``adapter_loaded``), the truth a test holds per-tenant TTFT against.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.responses import JSONResponse

from tokometer.protocols.common.server import ProtocolServer
from tokometer.util.limits import MAX_ADAPTERS, Millis

__all__ = ["MAX_ADAPTERS", "AdapterSlots", "LoraConfig", "listed_with", "not_found_message", "not_served",
           "parse_lora_names", "refusal"]

MAX_ADAPTER_NAME_CHARS: Final = 256


class LoraConfig(BaseModel):
    """The adapters served, how many fit at once, and what loading one costs."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    names: tuple[str, ...] = Field(min_length=1, max_length=MAX_ADAPTERS)
    max_loras: int = Field(1, ge=1, le=MAX_ADAPTERS)
    """Adapters loaded at once (vLLM's ``--max-loras``)."""
    switch_ms: Millis = 0.0
    """Time to load an adapter that is not loaded."""

    @field_validator("names")
    @classmethod
    def _names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not name or len(name) > MAX_ADAPTER_NAME_CHARS or not name.isprintable() or name != name.strip():
                raise ValueError(f"an adapter name is one line of 1 to {MAX_ADAPTER_NAME_CHARS} printable "
                                 "characters without spaces around it")
        if len(set(names)) != len(names):
            raise ValueError("an adapter is named twice: name each once")
        return names


def listed_with(listing: dict[str, Any], more: list[dict[str, Any]]) -> dict[str, Any]:
    """A protocol's model list with the entries of ``more`` (the same protocol's lists of the adapters) after its
    own, under the same key (``data``, ``models``)."""
    out = dict(listing)
    for key, entries in listing.items():
        if isinstance(entries, list):
            out[key] = entries + [e for extra in more if isinstance(extra.get(key), list) for e in extra[key]]
    return out


def parse_lora_names(text: str) -> tuple[str, ...]:
    """``a,b`` -> ``("a", "b")`` (``sim --lora``)."""
    return tuple(part.strip() for part in text.split(","))


def not_found_message(model: str, base: str) -> str:
    """vLLM's words for a model (or adapter) it does not serve."""
    return f"The model `{model}` does not exist. Valid aliases: {base}."


def refusal(model: str, base: str, lora: LoraConfig | None) -> str | None:
    """Why ``model`` is not served (vLLM's message), or None: it is the base model or an adapter, or no adapters
    are configured (then any name is served)."""
    if lora is None or model in ("", base) or model in lora.names:
        return None
    return not_found_message(model, base)


def not_served(proto: ProtocolServer, message: str) -> JSONResponse:
    """The 404 answer to a model name not served, in vLLM's shape (``param`` names the ``model`` field)."""
    body = proto.error_body(404, message, "NotFoundError")
    if isinstance(body.get("error"), dict):
        body["error"]["param"] = "model"
    return JSONResponse(body, status_code=404)


class _Adapted(Protocol):
    adapter: str | None


def adapter_fits(adapter: str | None, running: Iterable[_Adapted], max_loras: int) -> bool:
    """Whether a sequence of ``adapter`` may join the ``running`` ones: the base model always; an adapter when
    they would hold at most ``max_loras`` adapters with it."""
    if adapter is None:
        return True
    held = {s.adapter for s in running if s.adapter is not None}
    return adapter in held or len(held) < max_loras


def batch_loads(slots: AdapterSlots, decode: Iterable[_Adapted], prefill: Iterable[tuple[_Adapted, int]]) -> int:
    """How many adapters a step's batch had to load (each marked used in ``slots``)."""
    needed = dict.fromkeys(s.adapter for s in (*decode, *(p for p, _ in prefill)) if s.adapter is not None)
    return sum(slots.use(name) for name in needed)


class AdapterSlots:
    """The adapters loaded now, at most ``capacity``, least recently used first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._loaded: OrderedDict[str, None] = OrderedDict()
        self.loads = 0
        """Adapters loaded since start."""

    def use(self, name: str) -> bool:
        """Mark ``name`` used; True when it had to be loaded (the least recently used evicted to make room)."""
        if name in self._loaded:
            self._loaded.move_to_end(name)
            return False
        if len(self._loaded) >= self.capacity:
            self._loaded.popitem(last=False)
        self._loaded[name] = None
        self.loads += 1
        return True

    @property
    def loaded(self) -> list[str]:
        return list(self._loaded)

    def to_json(self) -> dict[str, Any]:
        return {"loaded": self.loaded, "capacity": self.capacity, "loads": self.loads}
