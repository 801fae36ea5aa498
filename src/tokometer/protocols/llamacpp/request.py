"""llama.cpp ``/completion`` request bodies as a server reads them: `COMPLETION_REQUEST`, checked at the boundary.

llama.cpp server's README's shapes, with the counts of `tokometer.inbound.request_limits`: ``prompt`` a
string or an array (of token ids and strings); ``n_predict`` a whole number from -2; ``stop`` an array of
strings; ``logit_bias`` an array of ``[token, bias]`` pairs or an object of them (bounded like OpenAI's);
``n_probs`` a whole number; the sampling numbers; the flags booleans.
"""

from __future__ import annotations

from tokometer.inbound.shapes import Anything, Arr, Bool, Int, Map, Num, Obj, OneOf, Str
from tokometer.protocols.openai.request import MAX_TOKENS_LIMIT, NAME

__all__ = ["COMPLETION_REQUEST"]

COMPLETION_REQUEST = Obj({
    "prompt": OneOf((Str(), Arr(Anything())), "a string or an array of token ids and strings"),
    "n_predict": Int(-2, MAX_TOKENS_LIMIT),
    "stream": Bool(),
    "stop": Arr(Str(), "max_stop_sequences"),
    "logit_bias": OneOf((Arr(Arr(Anything(), says="a [token, bias] pair"), "max_logit_bias_entries"),
                         Map(OneOf((Num(), Bool()), "a number or false"), "max_logit_bias_entries", NAME)),
                        "an array of [token, bias] pairs or an object of them"),
    "n_probs": Int(0, 1024),
    "temperature": Num(),
    "top_p": Num(),
    "top_k": Int(0, MAX_TOKENS_LIMIT),
    "min_p": Num(),
    "seed": Int(-2**63, 2**63 - 1),
    "ignore_eos": Bool(),
    "return_tokens": Bool(),
    "cache_prompt": Bool(),
    "id_slot": Int(-1, 1 << 20),
    "grammar": Str(),
    "json_schema": Obj(),
})
"""``POST /completion``."""
