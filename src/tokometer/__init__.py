"""tokometer: measure, explain and serve LLM inference speed."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
