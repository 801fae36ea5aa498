"""Rendering a Jinja chat template as transformers and llama.cpp render them: `render_template`.

A sandboxed environment with ``trim_blocks``/``lstrip_blocks``, a ``tojson`` filter that does not
escape HTML, and ``raise_exception`` / ``strftime_now``. Jinja is imported on first use. A leaf:
every tokenizer renders its chats through it (`tokometer.tokens.base.BaseTokenizer.render_chat`),
and `tokometer.tokens.chat` counts what the rendering adds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from tokometer.util.errors import TokenizerError

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = ["render_template"]


def _raise_exception(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=16)
def _compile(template: str) -> Template:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(template)


def render_template(template: str, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
                    **variables: Any) -> str:
    """Render a Jinja chat template (``bos_token``, ``eos_token`` and the like go in ``variables``)."""
    from jinja2.exceptions import TemplateError

    try:
        return _compile(template).render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                         **variables)
    except TemplateError as exc:
        raise TokenizerError(f"the chat template failed on these messages: {exc}") from None
