"""What a finished step warns of, as sentences: a pure function of what the step measured.

`step_warnings` gathers, in this order: the server's numbers that were not believed, answers whose text
was lost on the way (`tokometer.metrics.textcheck`), a tokenizer that disagrees with the server's counts,
prompts answered from the server's prompt cache, and the client's own health (saturated, or a note).
The findings of the server's /metrics (`tokometer.benchmark.observation`) come before these; they are
the observation's, not computed here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import StepSummary
from tokometer.metrics.textcheck import TextCheck
from tokometer.records import RequestRecord

__all__ = ["CACHE_WARNING_SHARE", "MISMATCH_LIMIT", "prompt_cache_warning", "rejected_numbers_warning",
           "step_warnings", "token_mismatch_warning"]

MISMATCH_LIMIT = 0.02
"""Above this share of difference between the server's output-token count and the tokenizer's, a step warns."""

CACHE_WARNING_SHARE = 0.10
"""Above this share of prompt tokens answered from the server's cache, a step is reported as not cold."""


def prompt_cache_warning(summary: StepSummary, server: dict[str, Any] | None) -> str | None:
    """A sentence when the server answered much of the step's prompts from its prompt cache."""
    rate, source = summary.prompt_cache_hit_rate, "the server's answers"
    if rate is None and server is not None and server.get("prefix_cache_hit_rate") is not None:
        rate, source = float(server["prefix_cache_hit_rate"]), "the server's /metrics"
    if rate is None or rate <= CACHE_WARNING_SHARE:
        return None
    return (f"{100 * rate:.0f}% of the prompt tokens came from the server's prompt cache ({source}): TTFT and "
            "prefill are faster than for new prompts. A repeated --seed, shared prefixes in the dataset or an "
            "earlier run's prompts do this; compare only runs with the same cache-hit rate")


def rejected_numbers_warning(summary: StepSummary) -> str | None:
    """A sentence when some of the server's counts were not believed (`tokometer.protocols.common.numbers`)."""
    if not summary.server_numbers_rejected:
        return None
    return (f"the server's numbers were not believed for {summary.server_numbers_rejected} request(s), for "
            f"example {summary.server_numbers_example}: their counts came from the next source down (the "
            "tokenizer, the engine's counters or the events received; see output_tokens.source)")


def token_mismatch_warning(records: list[RequestRecord], count: Callable[[str], int],
                           check: TextCheck | None) -> str | None:
    """A sentence when the server's output-token counts and the local tokenizer's differ by over `MISMATCH_LIMIT`."""
    server = local = 0
    short = {s.index for s in check.short} if check is not None else set()  # text lost on the way: warned of apart
    for r in records:
        # an answer with reasoning sent in a field of its own has less text than tokens: not comparable
        if r.ok and r.output_text and r.output_tokens_source in ("usage", "native") and r.output_tokens \
                and not r.reasoning_tokens and r.index not in short:
            server += r.output_tokens
            local += count(r.output_text)
    if server and abs(local - server) / server > MISMATCH_LIMIT:
        return (f"the server counted {server} output tokens but the tokenizer counts {local} "
                f"({100 * (local - server) / server:+.1f}%): is the tokenizer the model's own?")
    return None


def step_warnings(step: LoadStep, summary: StepSummary, health: ClientHealth, records: list[RequestRecord], *,
                  server: dict[str, Any] | None = None, check: TextCheck | None = None,
                  count: Callable[[str], int] | None = None, shared_prefix: bool = False) -> list[str]:
    """The warnings of one step, in the order the report shows them.

    ``check``: the step's text check (`summary.text_check`); ``count``: the local tokenizer, if there is one;
    ``shared_prefix``: the prompts share a prefix on purpose (``--prefix-tokens``), so a warm cache is expected.
    """
    warnings: list[str] = []
    if rejected := rejected_numbers_warning(summary):
        warnings.append(rejected)
    if check is not None and (short := check.warning()):
        warnings.append(short)
    if count is not None and (mismatch := token_mismatch_warning(records, count, check)):
        warnings.append(mismatch)
    # shared prefixes (--prefix-tokens), sessions' histories and a trace's shared blocks are there to be
    # cached: their effect is reported, not warned of
    if not shared_prefix and not step.sessions and step.mode != "trace" and (
            warm := prompt_cache_warning(summary, server)):
        warnings.append(warm)
    if health.saturated:
        warnings.append(health.verdict)
    if health.note:
        warnings.append(health.note)
    return warnings
