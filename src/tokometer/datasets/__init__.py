"""Prompt sources: synthetic prompts of exact length, JSONL, ShareGPT, one fixed prompt."""

from __future__ import annotations

from tokometer.datasets.base import PromptSource
from tokometer.datasets.files import FixedSource, JsonlSource, ShareGPTSource, load_source_file
from tokometer.datasets.synthetic import SyntheticSource

__all__ = [
    "FixedSource",
    "JsonlSource",
    "PromptSource",
    "ShareGPTSource",
    "SyntheticSource",
    "load_source_file",
]
