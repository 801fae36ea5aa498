"""YAML as a user writes settings in it (a gateway config): PyYAML's safe loader (plain data, never a Python
object), without aliases.

An alias (``*name``) stands for the node its anchor (``&name``) marks. Nested (ten aliases of ten aliases of ...),
a few hundred bytes stand for a billion values ("billion laughs"): the loader shares them, but anything that walks
the result (validation, a copy, a JSON dump) expands them past any memory. Settings have no need of them, so the
first one is refused before anything is built: what the file holds is what its bytes say, within its size bound."""

from __future__ import annotations

from typing import Any, Final

import yaml

from tokometer.util.errors import ConfigError

__all__ = ["YAML_ERRORS", "load_settings"]

YAML_ERRORS: Final[tuple[type[Exception], ...]] = (yaml.YAMLError, ValueError)
"""What loading a file that is not valid YAML raises: PyYAML's errors, and ValueError for a value its tag cannot
take (an integer of more digits than Python converts, a date that is not one)."""


class _Alias(Exception):
    """The loader met an alias: its name and line (1-based)."""

    def __init__(self, name: str, line: int) -> None:
        super().__init__(name, line)
        self.name = name
        self.line = line


class _NoAliases(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no type information here
    """The safe loader, refusing each alias as it composes the node that would be there."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Alias(event.anchor, event.start_mark.line + 1)
        return super().compose_node(parent, index)


def load_settings(text: str, where: str) -> Any:
    """The one YAML document in ``text``; an alias in it is a `ConfigError` starting with ``where`` (the file),
    naming the alias and its line."""
    loader = _NoAliases(text)
    try:
        return loader.get_single_data()
    except _Alias as alias:
        raise ConfigError(f"{where}: line {alias.line}: YAML aliases (*{alias.name}) are not accepted (they can "
                          "make a small file stand for a huge one): write the value out in full") from None
    finally:
        loader.dispose()
