"""Embeddings (OpenAI's ``/embeddings``) and rerank (Cohere's and Jina's ``/rerank``): one JSON request, one
JSON answer, no stream. One package for both: they share the client's base (`client.NonStreamingClient`),
the batch of inputs and the reading of the answer; the simulator serves both in `tokometer.sim.embeddings`."""

from __future__ import annotations

from tokometer.protocols.common.protocol import ModelList, Protocol, ids_of
from tokometer.protocols.embeddings.client import OpenAIEmbeddings, Rerank
from tokometer.protocols.embeddings.request import EMBEDDINGS_REQUEST, RERANK_REQUEST

__all__ = ["EMBEDDINGS", "RERANK"]

EMBEDDINGS = Protocol("OpenAI", OpenAIEmbeddings, family="openai", base_path="/v1",
                      model_list=ModelList("/models", ids_of), picks_first_model=True, asks_stream_usage=True,
                      request=EMBEDDINGS_REQUEST)
RERANK = Protocol("Cohere", Rerank, base_path="/v1", model_list=ModelList("/models", ids_of),
                  picks_first_model=True, request=RERANK_REQUEST)
