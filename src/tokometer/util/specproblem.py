"""`FieldProblem`: a spec's refusal that names its fields, so each reader sees the names they wrote.

A spec's check speaks field names: ``give {concurrency} or {rate}, not both``. Said to a library user
(``str(problem)``) the placeholders are the field names (``give concurrency or rate, not both``); a command
renders the same problem with its own words for the fields (`render` with ``{"concurrency": "--concurrency",
...}``), so the library holds no CLI words and the CLI no copy of the checks. A leaf: it imports nothing.
"""

from __future__ import annotations

import string
from collections.abc import Mapping

__all__ = ["FieldProblem"]


class FieldProblem(ValueError):
    """A ValueError (pydantic passes it on as the error's ``ctx["error"]``) whose message is a template.

    ``{name}`` in ``template`` is a field, unless ``values`` has ``name``: then it is that value (formatted as
    `str.format` would, ``{name!r}`` included). A field's words go in only through `render`, never through a
    value, so text a user typed cannot be taken for a placeholder.
    """

    def __init__(self, template: str, /, **values: object) -> None:
        self.template = template
        self.values = values
        super().__init__(self.render({}))

    @classmethod
    def naming(cls, field: str, message: str) -> FieldProblem:
        """A parser's message about ``field``, which the parser was given as the name to speak of: where the
        message starts with it, that start is the field's placeholder."""
        if not message.startswith(field):
            return cls("{message}", message=message)
        return cls("{" + field + "}{rest}", rest=message.removeprefix(field))

    def fields(self) -> list[str]:
        """The fields the message names, in order."""
        return [name for _, name, _, _ in string.Formatter().parse(self.template)
                if name is not None and name not in self.values]

    def render(self, words: Mapping[str, str]) -> str:
        """The message with each field said as ``words`` has it (its own name where ``words`` has none)."""
        return self.template.format_map({**{f: words.get(f, f) for f in self.fields()}, **self.values})
