"""How many GPUs served a run: the count the user stated (``bench --gpus``), else the one the engine's saved
command line implies (the product of vLLM's and SGLang's tensor, pipeline and data parallel sizes).

The Pareto front and the per-GPU throughput divide by it (`tokometer.metrics.pareto`); a run whose count is
not known is left on the total. A leaf (it imports only `tokometer.util.limits`), because the benchmark, the store's
recovery of an aborted run and ``compare`` all read it: in ``tokometer.engines`` it would close an import cycle
(the store would import engines, whose vLLM planner imports perf, which reads stored runs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.util.limits import MAX_GPUS

__all__ = ["gpu_count"]

_PARALLEL = re.compile(r"^(?:--tensor-parallel-size|-tp|--tp-size|--tp|--pipeline-parallel-size|-pp|--pp-size"
                       r"|--data-parallel-size|-dp|--dp-size|--dp)(?:=(\d+))?$", re.ASCII)
"""vLLM's and SGLang's parallel-size flags: the GPUs of a deployment are their product."""


def _argv_gpus(argv: Sequence[Any]) -> int | None:
    """The product of the parallel sizes on an engine's command line (each a whole number from 1 to `MAX_GPUS`
    in ASCII digits: ``"²"`` is a digit to `str.isdigit` but not to `int`); None when it names none."""
    sizes: list[int] = []
    for i, arg in enumerate(argv):
        match = _PARALLEL.match(str(arg))
        if match is None:
            continue
        value = match.group(1) or (str(argv[i + 1]) if i + 1 < len(argv) else "")
        if value.isascii() and value.isdigit() and len(value) <= len(str(MAX_GPUS)) and 1 <= int(value) <= MAX_GPUS:
            sizes.append(int(value))
    return math.prod(sizes) if sizes else None


def gpu_count(engine: Mapping[str, Any] | None, stated: Any = None) -> tuple[int | None, str]:
    """How many GPUs served a run and how that is known; (None, why not) when it is not. ``stated``: what the
    user said (``bench --gpus N``, saved in the run's spec as ``gpus``), taken first when it is a whole number
    from 1 to `MAX_GPUS`. Else from the engine identity saved with it: a vLLM or SGLang engine (not on CPU)
    serves on the product of its command line's tensor, pipeline and data parallel sizes (1 without any; not
    known past `MAX_GPUS`). GPU telemetry is not used: it reads the GPUs of a machine or an exporter, not those
    of the deployment (a node's other GPUs, another job's)."""
    if isinstance(stated, int) and not isinstance(stated, bool) and 1 <= stated <= MAX_GPUS:
        return stated, f"{stated} GPU{'s' if stated > 1 else ''} from bench --gpus"
    facts = engine or {}
    name = str(facts.get("engine") or "").lower()
    if name not in ("vllm", "sglang"):
        if facts.get("engine"):
            return None, f"the {facts['engine']} engine saved with the run names no GPU count"
        return None, "no engine saved with the run says how many GPUs served it"
    if str(facts.get("device") or "").lower() == "cpu":
        return None, f"a {name} engine on CPU"
    count = _argv_gpus(facts.get("argv") or ()) or 1
    if count > MAX_GPUS:
        return None, f"the {name} command line's parallel sizes multiply to {count} GPUs, more than {MAX_GPUS}"
    return count, f"{count} GPU{'s' if count > 1 else ''} from the {name} command line"
