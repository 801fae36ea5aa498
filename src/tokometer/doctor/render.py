"""Console output of ``tokometer doctor``: findings grouped by check, a line per skipped part, a summary line."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from tokometer.doctor.finding import DoctorReport
from tokometer.util.shown import clipped

__all__ = ["evidence_text", "render_report"]

_STYLE = {"info": "green", "warning": "yellow", "error": "bold red"}


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list):
        shown = ", ".join(_value(v) for v in value[:6])
        return f"[{shown}{', …' if len(value) > 6 else ''}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} {_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def evidence_text(evidence: dict[str, Any]) -> str:
    """The evidence as ``name=value`` pairs, one line (long answers cut: `tokometer.util.shown.clipped`)."""
    parts = []
    for key, value in evidence.items():
        if value is None or value == "":
            continue
        parts.append(f"{key}={clipped(_value(value))}")
    return "; ".join(parts)


def render_report(console: Console, report: DoctorReport) -> None:
    """Print ``report``: each check's findings (severity, id, title; evidence; fix), what was skipped, a summary.
    ``console`` prints strings verbatim (`tokometer.cli.output.make_console`): the server's words are data; the
    styles are `Text` spans."""
    console.print(f"tokometer doctor {report.url} (api {report.api}, model {clipped(report.model or '?')})")
    for check, findings in report.by_check():
        console.print()
        console.print(check, style="bold")
        for finding in findings:
            console.print(Text.assemble("  ", (f"{finding.severity:<7}", _STYLE[finding.severity]),
                                        f" {finding.id}: {finding.title}"), soft_wrap=True)
            evidence = evidence_text(finding.evidence)
            if evidence:
                console.print(Text.assemble("          ", ("evidence:", "dim"), f" {evidence}"), soft_wrap=True)
            if finding.fix:
                console.print(Text.assemble("          ", ("fix:", "dim"), f" {finding.fix}"), soft_wrap=True)
    if report.skipped:
        console.print()
        for skipped in report.skipped:
            console.print(f"skipped ({skipped.check}): {skipped.reason}", soft_wrap=True)
    console.print()
    console.print(f"Summary: {report.summary()}")
