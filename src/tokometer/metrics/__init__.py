"""Metrics: pure functions of `RequestRecord`s, distributions, step summaries.

``DEFINITIONS`` is written into every JSON result so a reader never has to
guess what a name means.
"""

from __future__ import annotations

from typing import Final

from tokometer.metrics.distribution import PERCENTILES, Distribution
from tokometer.metrics.summary import SLO, StepSummary, summarize
from tokometer.metrics.textcheck import SLACK, TOLERANCE

__all__ = ["DEFINITIONS", "PERCENTILES", "SLO", "Distribution", "StepSummary", "summarize"]

DEFINITIONS: Final[dict[str, str]] = {
    "ttft_ms": "time to first token: first event carrying generated text (or reasoning text) minus the time the "
    "request was sent; role-only, empty and usage-only events do not count",
    "ttft_from_due_ms": "first token minus the time the load profile scheduled the request (includes client lag)",
    "client_lag_ms": "time the request was sent minus the time it was scheduled; > 0 means the client fell behind",
    "connect_ms": "time spent opening new connections (requests that reused a kept-alive connection are not in it)",
    "tpot_ms": "decode time per output token: (last token time - first token time) / (output tokens - tokens of "
    "the first event); equals (last - first) / (output_tokens - 1) when the first event carries one token; "
    "tokens the server counted but never streamed (hidden reasoning) are left out",
    "decode_speed_tok_s": "1 / TPOT per request: the steady decode-phase speed (tokens/s once the answer "
    "streams); TPOT and decode speed count reasoning and answer tokens alike, as far as they were streamed",
    "itl_ms": "inter-token latency: each gap between consecutive content events divided by the tokens the later "
    "event carried (token-normalised)",
    "chunk_gap_ms": "raw gaps between consecutive content events, not normalised",
    "e2e_ms": "end-to-end latency: stream closed minus request sent",
    "e2e_speed_tok_s": "output tokens / E2E per request: the naive average speed, a whole request's time "
    "over its tokens (mixes network, TTFT and decode)",
    "prefill_speed_tok_s": "input tokens / TTFT per request as the client sees it (includes queueing and network)",
    "duration_s": "max(end) - min(sent) over the measured requests (warm-up excluded)",
    "output_throughput_tok_s": "sum of output tokens of completed requests / duration",
    "request_throughput_rps": "completed requests / duration",
    "achieved_concurrency": "sum of E2E of measured requests / duration",
    "send_rate_rps": "(requests sent - 1) / (last send - first send): the offered load actually achieved",
    "goodput_rps": "completed requests meeting every given SLO / duration",
    "completion_rate_rps": "(completed requests - 1) / (last end - first end): the rate the server finished "
    "requests; under a request rate, below send_rate_rps means the queue grew through the step",
    "ttft_growth": "mean TTFT of the last quarter of completed requests (in send order) / mean TTFT of the first "
    "quarter: well above 1 when requests waited longer as the step went on (a growing queue)",
    "overload": "whether the server kept up with the requests sent: queue_grew when the 99 % lower bound of the "
    "Theil-Sen slope of TTFT (E2E without streaming) against send time is above zero (Mann-Kendall, one-sided, "
    "alpha 1 %); fell_behind when the completions over their span against the sends over theirs, as two Poisson "
    "counts, have an exact conditional binomial p below 1 %; sustained_rps = send rate / (1 + slope)",
    "percentile_ci": "per latency metric and percentile, its 95 % distribution-free interval [low, high]: the "
    "order statistics whose ranks bracket the percentile by the binomial distribution; null for an end the "
    "sample cannot bound (a p99 needs 368 values for an upper end)",
    "ttft_cold_prefix_ms": "TTFT of the requests that were the run's first with their shared prefix "
    "(--prefix-groups): nothing can have cached it",
    "ttft_warm_prefix_ms": "TTFT of the requests sent after an earlier request with the same prefix had its first "
    "token (its prefill, the prefix's included, was done)",
    "prefix_cache_speedup": "ttft_cold_prefix_ms p50 / ttft_warm_prefix_ms p50: about 1 without a prefix cache",
    "output_tokens.source": "where output token counts came from: usage (server usage block), native (engine "
    "counters), tokenizer, estimate (count of content events)",
    "output_tokens.text_check": "per completed answer whose output count is the server's (usage, native): the "
    "text received (answer and reasoning fields) counted by the model's tokenizer where one is local, else its "
    "UTF-8 bytes (an upper bound: a token is at least one byte); an answer is short when the server's count "
    f"(less reasoning it did not send) exceeds that by more than max({SLACK} tokens, {TOLERANCE:.0%}); null when "
    "not checked",
    "server_prefill_ms": "the engine's own prompt-processing time, where the protocol reports it",
    "server_decode_tok_s": "the engine's own decode speed, where the protocol reports it",
    "percentiles": "linear interpolation between closest ranks (numpy default)",
    "reasoning": "reasoning models only (null when no answer of the step had reasoning): reasoning sent in "
    "reasoning_content / reasoning deltas (Ollama: thinking) or inline between <think> and </think>",
    "reasoning.ttfat_ms": "time to first answer token: the first event carrying answer text that is not only "
    "whitespace (not reasoning, not a think tag) minus the time the request was sent; equals TTFT for an answer "
    "without reasoning; answers that never got past their reasoning are left out (counted in no_answer)",
    "reasoning.reasoning_tokens": "output tokens that were reasoning, per answer that reasoned: usage "
    "(usage.completion_tokens_details.reasoning_tokens), native (tokens of the reasoning events where each "
    "event's count is exact), tokenizer (the model's tokenizer on the reasoning text), estimate (each event's "
    "share of the output by characters); an answer cut while reasoning was all reasoning; hidden: those the "
    "server counted but never streamed (o-series APIs), kept out of TPOT, ITL and decode speed",
    "tool_calls": "answers that called a tool only (null when none did): tool-call deltas (delta.tool_calls, a "
    "function name or an argument fragment) are output, so they count for TTFT, TPOT and ITL like answer text",
    "tool_calls.time_to_first_tool_call_ms": "the first event carrying a tool-call delta minus the time the request "
    "was sent; equals TTFT when the answer began with its call",
    "tool_calls.tool_call_tokens": "output tokens that were tool calls, per answer that called one: all output "
    "tokens (their source) when the answer streamed nothing else, else the model's tokenizer on the names and "
    "argument fragments (tokenizer), else each event's share by characters (estimate)",
    "images": "requests that sent images only (bench --images): images sent, and image_tokens: "
    "usage.prompt_tokens_details.image_tokens where the server reports it (reported: how many answers did); "
    "unknown otherwise, never guessed",
    "reasoning.answer_tokens": "output tokens - reasoning tokens, per completed answer",
    "reasoning.reasoning_share": "sum of reasoning tokens / sum of output tokens of the completed answers",
    "reasoning.answer_decode_speed_tok_s": "decode speed of the answer alone: tokens of the events after the first "
    "answer event / (last token time - first answer token time)",
}
