"""Embeddings and rerank request bodies as a server reads them: `EMBEDDINGS_REQUEST`, `RERANK_REQUEST`.

OpenAI's ``/v1/embeddings``: ``input`` a string, an array of strings, an array of token ids or an array
of arrays of them (at most ``max_inputs``); ``encoding_format`` ``float`` or ``base64``; ``dimensions`` a
whole number. Cohere's and Jina's ``/v1/rerank``: ``query`` a string (required), ``documents`` strings or
``{"text": ...}`` objects (at most ``max_inputs``), ``top_n`` a whole number.
"""

from __future__ import annotations

from tokometer.inbound.shapes import Arr, Bool, Int, Obj, OneOf, Str
from tokometer.protocols.openai.request import NAME, TOKEN_ID

__all__ = ["EMBEDDINGS_REQUEST", "RERANK_REQUEST"]

_IDS = Arr(TOKEN_ID, says="an array")
EMBEDDINGS_REQUEST = Obj({
    "model": NAME,
    "input": OneOf((Str(), Arr(Str(), "max_inputs"), _IDS, Arr(_IDS, "max_inputs")),
                   "a string, an array of strings, an array of token ids, or an array of arrays of token ids"),
    "encoding_format": Str(options=("float", "base64")),
    "dimensions": Int(1, 1 << 16),
    "user": NAME,
}, required=("input",))
"""``POST /v1/embeddings``."""

RERANK_REQUEST = Obj({
    "model": NAME,
    "query": Str(),
    "documents": Arr(OneOf((Str(), Obj({"text": Str()}, required=("text",))), "a string or {\"text\": ...}"),
                     "max_inputs"),
    "top_n": Int(0, 1 << 20),
    "return_documents": Bool(),
}, required=("query", "documents"))
"""``POST /v1/rerank``."""
