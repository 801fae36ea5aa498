"""`SpecOption`: a click option that stands for a field of a command's spec (a pydantic model or a dataclass).

Its default is the field's own, read from the spec when click first needs it (a run, or ``--help``), so the
number is written once, on the field, and ``--help`` of every other command does not import the spec. Its
flag is the field's word in the command's one-line errors (`flag_words`). GuideLLM's CLI reads its defaults
from its pydantic models the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import click

__all__ = ["SpecOption", "flag_words", "spec_options", "user_fields"]


class SpecOption(click.Option):
    """An option for ``field`` of the model ``spec()`` returns (a callable, so the import waits).

    ``to_cli`` turns the field's default into the option's (``600.0`` -> ``"600s"``), ``from_cli`` the option's
    value back into the field's (``"600s"`` -> ``600.0``; it is told the flag, for its error); ``default=`` given
    explicitly keeps click's own (an option whose absence the command reads itself, such as ``--url``).
    ``{default}`` in the help is the field's default as ``to_cli`` says it. ``also``: more fields the flag
    sets (``--workers``: processes, or with ``--ray`` Ray actors).
    """

    def __init__(self, *decls: Any, field: str, spec: Callable[[], type],
                 to_cli: Callable[[Any], Any] | None = None, from_cli: Callable[[Any, str], Any] | None = None,
                 also: tuple[str, ...] = (), **attrs: Any) -> None:
        self.field = field
        self.also = also
        self.spec = spec
        self._to_cli = to_cli
        self._from_cli = from_cli
        self._own_default = "default" in attrs
        super().__init__(*decls, **attrs)
        self.flag = max((o for o in self.opts if o.startswith("--")), key=len)

    def field_default(self) -> Any:
        """The spec field's default, as the option would take it."""
        spec: Any = self.spec()
        if dataclasses.is_dataclass(spec):
            (value,) = (f.default for f in dataclasses.fields(spec) if f.name == self.field)
        else:
            value = spec.model_fields[self.field].get_default(call_default_factory=True)
        return value if self._to_cli is None else self._to_cli(value)

    def field_value(self, value: Any) -> Any:
        """The option's value as its field takes it."""
        return value if self._from_cli is None else self._from_cli(value, self.flag)

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        if self._own_default:
            return super().get_default(ctx, call)
        return self.field_default()

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        template = self.help
        if template is not None and "{default}" in template:
            self.help = template.replace("{default}", str(self.field_default()))
        try:
            return super().get_help_record(ctx)
        finally:
            self.help = template


def spec_options(command: click.Command, spec: Callable[[], type]) -> Iterable[SpecOption]:
    """``command``'s options for the fields of ``spec``."""
    return (p for p in command.params if isinstance(p, SpecOption) and p.spec is spec)


def flag_words(command: click.Command, spec: Callable[[], type]) -> dict[str, str]:
    """Each field of ``spec`` that ``command``'s options set -> its flag (``request_timeout_s`` -> ``--timeout``)."""
    return {field: option.flag for option in spec_options(command, spec) for field in (option.field, *option.also)}


def user_fields(ctx: click.Context, spec: Callable[[], type]) -> set[str]:
    """The fields of ``spec`` whose options the user gave (on the command line or through their environment
    variable): the others are left to the spec's defaults."""
    given = {click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT,
             click.core.ParameterSource.PROMPT}
    return {field for option in spec_options(ctx.command, spec) if option.name is not None
            and ctx.get_parameter_source(option.name) in given for field in (option.field, *option.also)}
