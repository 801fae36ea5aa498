"""``tokometer quality A B``: never judge a quantisation by speed alone.

The same prompts go to two endpoints (two builds of one model, or two engines); what comes back is
compared for agreement (exact match, first divergence, top-1 agreement and KL of the next-token
distributions), for accuracy on a small shipped eval set (with Wilson and paired intervals), and
for speed (TTFT and decode tok/s of the same requests), and summed up in a verdict by a stated rule.

    evalset    the shipped eval set and the grader
    agreement  token paths, KL over top-k, first divergence
    stats      Wilson and paired (McNemar-based) intervals
    endpoints  URLs or engine:PATH.gguf[:QTYPE], started and resolved
    logprobs   non-streamed requests for token paths, teacher forcing
    runner     the three passes
    verdict    the summary, the rule, and its rendering
"""

from __future__ import annotations

from tokometer.quality.evalset import EvalItem, load_evalset
from tokometer.quality.runner import QualityResult, QualitySpec, run_quality
from tokometer.quality.verdict import Summary, Verdict, summarise

__all__ = ["EvalItem", "QualityResult", "QualitySpec", "Summary", "Verdict", "load_evalset", "run_quality",
           "summarise"]
