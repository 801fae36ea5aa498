"""Context and truncation: the real context window, what happens past it, output caps, token counts.

- **The window**: as the server advertises it (vLLM's ``max_model_len`` in ``/v1/models``, llama.cpp's
  ``n_ctx`` per slot in ``/props``, TGI's ``max_total_tokens``: the benchmark's `advertised_context`),
  else found by a binary search with prompts of known length (not with ``--quick``). A search that reaches
  its own ceiling (`PROBE_LIMIT`) with every prompt taken whole found no limit: it says "no limit found up to
  N tokens", never that N is the window.
- **Past the window**: a prompt 32 tokens longer than the window is sent. An HTTP 400 is the honest
  answer; an answer whose ``usage.prompt_tokens`` is below what was sent is *silent truncation* (the
  model never saw the start of the prompt).
- **Output cap**: an answer asked for N tokens (ignore_eos) that stops at ``finish_reason=length``
  with fewer has hit a server-side cap (``--max-tokens`` on the server, a gateway's limit).
- **Prompt tokens**: the server's count of a short chat against the model's tokenizer with its chat
  template (the server's ``/tokenize`` + ``/apply-template`` by default: `tokometer.tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokometer.benchmark.preflight import advertised_context
from tokometer.doctor.finding import Finding
from tokometer.doctor.session import Exchange, Session
from tokometer.prompt import Prompt
from tokometer.util.errors import TokenizerError
from tokometer.util.shown import clipped

__all__ = ["OVERFLOW_MARGIN", "PROBE_LIMIT", "Fit", "NoLimit", "count_mismatch", "fit_of", "run"]

OVERFLOW_MARGIN = 32
"""Tokens past the window in the overflow probe."""
PROBE_LIMIT = 131_072
"""Longest window probed with a real prompt (a longer one costs a long prefill if the server takes it)."""
_SEARCH_START, _SEARCH_STEPS = 1024, 14
_ANSWER_TOKENS = 4
_CAP_ASK = 32


@dataclass(frozen=True, slots=True)
class Fit:
    """What a prompt of known length met: taken whole, refused, cut (silently) or another failure."""

    outcome: str
    """``fits``, ``refused``, ``truncated`` or ``failed``."""
    counted: int | None
    """The server's prompt-token count (usage), where it gave one."""


def fit_of(exchange: Exchange, sent_tokens: int) -> Fit:
    """Classify one probe: ``sent_tokens`` is the least the prompt's content holds."""
    record = exchange.record
    if record.error == "http_400_context_length" or record.status in (400, 413, 422):
        return Fit("refused", None)
    if record.error is not None:
        return Fit("failed", None)
    counted = record.input_tokens if record.input_tokens_source in ("usage", "native") else None
    if counted is not None and counted < sent_tokens:
        return Fit("truncated", counted)
    return Fit("fits", counted)


def count_mismatch(server: int, local: int) -> bool:
    """Whether the server's prompt-token count is off the tokenizer's by more than 2 tokens and 2%."""
    return abs(server - local) > max(2, 0.02 * local)


async def _probe(session: Session, n_tokens: int) -> tuple[Fit, Exchange, int]:
    prompt, exact, words = await session.prompt(n_tokens)
    sent = exact if exact is not None else words
    exchange = await session.send(prompt, _ANSWER_TOKENS)
    return fit_of(exchange, sent), exchange, sent


class NoLimit(int):
    """What a search found when every prompt up to its ceiling was taken whole: the longest prompt that fit
    (an `int`), which is not a context window."""


async def _search(session: Session) -> tuple[int, str] | NoLimit | None:
    """The window found by trying prompts of known length: doubling, then bisecting; `NoLimit` when no prompt
    up to `PROBE_LIMIT` was refused or cut."""
    good, bad = 0, None
    size = _SEARCH_START
    for _ in range(_SEARCH_STEPS):
        fit, _, _ = await _probe(session, size)
        if fit.outcome == "failed":
            return None
        if fit.outcome == "truncated" and fit.counted is not None:
            return fit.counted + _ANSWER_TOKENS, "found by a probe: the server cut a longer prompt to this"
        if fit.outcome == "fits":
            good = size
            if bad is None:
                if size * 2 > PROBE_LIMIT:
                    break
                size *= 2
                continue
        else:
            bad = size
        if bad is not None and bad - good <= max(16, bad // 64):
            break
        size = (good + bad) // 2 if bad is not None else size
    if good == 0:
        return None
    if bad is None:
        return NoLimit(good)
    how = f"found by probing: {good:,} prompt tokens fit" + (f", {bad:,} do not" if bad else "")
    session.refused_at = bad
    return good + _ANSWER_TOKENS, how


async def run(session: Session) -> None:
    """The context check."""
    spec = session.bench_spec()
    session.context = await advertised_context(spec, session.model, session.probe)
    if session.context is None and not session.spec.quick:
        found = await _search(session)
        if isinstance(found, NoLimit):
            session.add(Finding("context.no_limit_found", "info",
                                f"no context limit found up to {int(found):,} prompt tokens: the server advertises "
                                "no window and took every probe whole", {"context_tokens": None,
                                                                         "largest_prompt_taken": int(found),
                                                                         "probe_limit": PROBE_LIMIT},
                                f"The probe stops at {PROBE_LIMIT:,} tokens: the window is at least that long, or "
                                "the server shifts or drops context without saying so."))
        elif found is None:
            session.skip("context", "the server advertises no context window and the probe could not find one")
        else:
            session.context = found
    if session.context is not None:
        window, where = session.context
        session.add(Finding("context.window", "info", f"context window: {window:,} tokens ({where})",
                            {"context_tokens": window, "source": where}))
        if session.spec.quick:
            session.skip("context", "--quick: no prompt past the window was sent")
        elif window + OVERFLOW_MARGIN > PROBE_LIMIT:
            session.skip("context", f"the window ({window:,}) is too long to probe with a real prompt")
        else:
            await _overflow(session, window)
    await _output_cap(session)
    await _prompt_count(session)


async def _overflow(session: Session, window: int) -> None:
    fit, exchange, sent = await _probe(session, max(window + OVERFLOW_MARGIN, session.refused_at or 0))
    record = exchange.record
    evidence: dict[str, object] = {"context_tokens": window, "prompt_tokens_sent": sent,
                                   "status": record.status, "answer": record.error_detail[:240]}
    if fit.outcome == "refused":
        session.add(Finding("context.overflow_refused", "info",
                            f"a prompt of {sent:,} tokens (past the window) is refused with HTTP {record.status}",
                            evidence, "Fine: clients get a clear error. Cut prompts before sending "
                            "(tokometer count shows their length with the chat template)."))
    elif fit.outcome == "truncated":
        evidence["prompt_tokens_counted"] = fit.counted
        session.add(Finding("context.silent_truncation", "warning",
                            f"a prompt of {sent:,} tokens was cut to {fit.counted:,} without an error",
                            evidence, "The model never saw the cut part of long prompts, and nothing says so: cut "
                            "prompts yourself before sending, or give the server a longer context (vLLM "
                            "--max-model-len, llama.cpp --ctx-size, Ollama num_ctx)."))
    elif fit.outcome == "fits":
        evidence["prompt_tokens_counted"] = fit.counted
        session.add(Finding("context.window_larger", "info",
                            f"a prompt of {sent:,} tokens, past the advertised window, was taken whole",
                            evidence, "The server takes more than it advertises: its advertised window is not "
                            "its limit (a per-slot figure, or a context shift)."))
    else:
        session.add(Finding("context.overflow_failed", "warning",
                            f"a prompt past the window failed with {record.error}, not a clear 400", evidence,
                            "The server (or a proxy) fails on long prompts instead of refusing them: check its log, "
                            "its request size limit (a proxy's client_max_body_size) and its memory."))


async def _output_cap(session: Session) -> None:
    ask = _CAP_ASK // 2 if session.spec.quick else _CAP_ASK
    prompt, _, _ = await session.prompt(16)
    record = (await session.send(prompt, ask, ignore_eos=True)).record
    if record.error is not None:
        session.skip("context", f"the output-cap request failed: {record.error}: {clipped(record.error_detail)}")
        return
    got = record.output_tokens or 0
    evidence = {"max_tokens_asked": ask, "output_tokens": got, "finish_reason": record.finish_reason,
                "counted_by": record.output_tokens_source}
    if record.finish_reason == "length" and got < ask:
        session.add(Finding("context.output_cap", "warning",
                            f"answers stop at {got} tokens (finish_reason=length) though max_tokens was {ask}",
                            evidence, "The server (or a gateway) caps answers below what is asked: raise its cap "
                            "(e.g. llama.cpp --n-predict, a gateway's max_tokens limit), or continue long answers "
                            "in segments."))
    elif record.finish_reason == "stop" and got < ask:
        session.add(Finding("context.ignore_eos_ignored", "info",
                            f"an answer asked to ignore EOS stopped at {got} of {ask} tokens", evidence,
                            "The server does not honour ignore_eos: benchmarks cannot fix the answer length, so "
                            "compare decode speeds, not end-to-end times."))


async def _prompt_count(session: Session) -> None:
    messages = [{"role": "user", "content": "How many tokens does this question take, with the chat template?"}]
    tokenizer = await session.tokenizer()
    if tokenizer is None:
        session.skip("context", "no tokenizer to check the server's prompt-token count against (give --tokenizer)")
        return
    record = (await session.send(Prompt.from_text(messages[0]["content"]), 1)).record
    if record.error is not None or record.input_tokens is None:
        session.skip("context", "the server gave no prompt-token count (usage) to check")
        return
    import asyncio

    try:
        local = await asyncio.to_thread(tokenizer.count_chat, messages)
        how = "with the chat template"
    except TokenizerError:
        local = await asyncio.to_thread(tokenizer.count, messages[0]["content"])
        how = "content only: the tokenizer has no chat template"
    evidence = {"server_prompt_tokens": record.input_tokens, "tokenizer_prompt_tokens": local,
                "tokenizer": tokenizer.name, "counted": how}
    if count_mismatch(record.input_tokens, local):
        session.add(Finding("context.token_count_mismatch", "warning",
                            f"the server counts {record.input_tokens} prompt tokens, the tokenizer {local} ({how})",
                            evidence, "The server's tokenizer or chat template is not the model's (a wrong "
                            "--chat-template, a different tokenizer file): answers, budgets and bills differ from "
                            "what the model expects. Serve the model's own template."))
    else:
        session.add(Finding("context.token_count", "info",
                            f"the server's prompt-token count matches the tokenizer ({record.input_tokens}, {how})",
                            evidence))
