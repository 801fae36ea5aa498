"""Tokens: the model's own tokenizer, chat templates, budgets and prices.

    load_tokenizer(spec)            a --tokenizer / --model value -> a tokenizer (see loader.py)
    count_tokens(text | messages)   tokens with the model's tokenizer (and chat template)
    fit_to_budget(text, n)          cut to n tokens at a token boundary (end, start or middle)
    max_output_tokens(ctx, prompt)  what a context window leaves for the answer
    PriceTable.load().cost(...)     what tokens cost, in money or platform credits

Tokenizers: a GGUF's own (converted once, cached; the bundled Gemma 3 270M's is the default),
Hugging Face (tokenizer.json, or AutoTokenizer for a model id or directory), tiktoken, and an
engine's /tokenize. None of them ever falls back to a character estimate.
"""

from __future__ import annotations

from tokometer.tokens.base import BaseTokenizer, Tokenizer
from tokometer.tokens.budget import count_tokens, fit_to_budget, max_output_tokens
from tokometer.tokens.chat import ChatCount, count_chat, parse_messages
from tokometer.tokens.gguf_vocab import gguf_tokenizer
from tokometer.tokens.hf import FileTokenizer
from tokometer.tokens.hf_auto import HFTokenizer
from tokometer.tokens.loader import load_tokenizer
from tokometer.tokens.pricing import Cost, ModelPrice, PriceTable
from tokometer.tokens.remote import ServerTokenizer, probe_server_tokenizer
from tokometer.tokens.tiktoken_ import TiktokenTokenizer

__all__ = [
    "BaseTokenizer",
    "ChatCount",
    "Cost",
    "FileTokenizer",
    "HFTokenizer",
    "ModelPrice",
    "PriceTable",
    "ServerTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "count_chat",
    "count_tokens",
    "fit_to_budget",
    "gguf_tokenizer",
    "load_tokenizer",
    "max_output_tokens",
    "parse_messages",
    "probe_server_tokenizer",
]
