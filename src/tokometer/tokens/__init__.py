"""Tokenizers: the protocol, a local tokenizer.json, and an engine's own /tokenize."""

from __future__ import annotations

from tokometer.tokens.base import Tokenizer
from tokometer.tokens.hf import FileTokenizer
from tokometer.tokens.server import ServerTokenizer, probe_server_tokenizer

__all__ = ["FileTokenizer", "ServerTokenizer", "Tokenizer", "probe_server_tokenizer"]
