"""TGI ``/generate_stream`` request bodies as a server reads them: `GENERATE_REQUEST`, checked at the inbound boundary.

TGI's API documentation's shapes, with the counts of `tokometer.inbound.request_limits`: ``inputs`` a string
(required); ``parameters`` an object: ``max_new_tokens``, ``top_k``, ``truncate`` and ``best_of`` whole
numbers, ``stop`` an array of strings, the sampling numbers, the flags booleans.
"""

from __future__ import annotations

from tokometer.inbound.shapes import Arr, Bool, Int, Num, Obj, Str
from tokometer.protocols.openai.request import MAX_TOKENS_LIMIT

__all__ = ["GENERATE_REQUEST"]

GENERATE_REQUEST = Obj({
    "inputs": Str(),
    "stream": Bool(),
    "parameters": Obj({
        "max_new_tokens": Int(0, MAX_TOKENS_LIMIT),
        "stop": Arr(Str(), "max_stop_sequences"),
        "temperature": Num(),
        "top_p": Num(),
        "top_k": Int(0, MAX_TOKENS_LIMIT),
        "typical_p": Num(),
        "repetition_penalty": Num(),
        "frequency_penalty": Num(),
        "truncate": Int(0, MAX_TOKENS_LIMIT),
        "best_of": Int(1, 128),
        "seed": Int(0, 2**64 - 1),
        "details": Bool(),
        "decoder_input_details": Bool(),
        "do_sample": Bool(),
        "return_full_text": Bool(),
        "top_n_tokens": Int(0, 1024),
    }),
}, required=("inputs",))
"""``POST /generate_stream`` (and ``/generate``)."""
