"""``tokometer report --tune NAME`` (or ``--tune-json FILE``): a tune's answer as markdown or one HTML page.

The tables are `tokometer.tune.render`'s rows (the console prints the same ones): each variant against the
baseline with ``compare``'s verdict words and intervals, what stands beside each variant (memory, what the
hardware allows, quality), the best per objective, the Pareto front, the variants that did not finish with the
engine's last words. The HTML page is self-contained (no script, no chart library) and carries the whole
``tune --json`` document in ``<script type="application/json" id="tokometer-tune">`` so it can be read back.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Sequence

from tokometer.report.html import embed_json
from tokometer.tune.answer import TuneAnswer
from tokometer.tune.outcome import TuneRecord
from tokometer.tune.render import (
    BESIDE_COLUMNS,
    BEST_COLUMNS,
    FLOOR_COLUMNS,
    FRONT_COLUMNS,
    answer_json,
    beside_rows,
    best_rows,
    failed_lines,
    floor_rows,
    front_rows,
    note_lines,
    variant_columns,
    variant_rows,
)

__all__ = ["TUNE_DATA_ID", "tune_html", "tune_markdown"]

TUNE_DATA_ID = "tokometer-tune"
"""The ``id`` of the element that holds the ``tune --json`` document in the HTML page."""
_LEGEND = ("Each cell: the variant's value: its verdict against the baseline, the change and its 95 % interval "
           "(bootstrap over requests, as 'tokometer compare' judges two runs). A variant is better or worse only "
           "when its whole interval also lies beyond the noise floor: how far the baseline moved between its two "
           "runs, first and last; otherwise 'cannot decide'.")


def _sections(record: TuneRecord, answer: TuneAnswer) -> list[tuple[str, Sequence[str], list[list[str]]]]:
    """The tables, titled, in the order shown."""
    return [(f"Each variant against the baseline ({record.engine}, seed {record.seed})", variant_columns(answer),
             variant_rows(answer)),
            ("Noise floor: the baseline run again after every variant", FLOOR_COLUMNS, floor_rows(answer)),
            ("Beside each variant", BESIDE_COLUMNS, beside_rows(answer)),
            ("Best per objective", BEST_COLUMNS, best_rows(answer)),
            ("Pareto front: decode tok/s per request (p50) against output tok/s", FRONT_COLUMNS,
             front_rows(answer))]


def _md_table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(_one_line(c).replace("|", "\\|") for c in cells) + " |"

    return [line(header), "| " + " | ".join("---" for _ in header) + " |", *(line(row) for row in rows)]


def tune_markdown(record: TuneRecord, answer: TuneAnswer) -> str:
    """The answer as markdown (a pull-request comment), ending with a newline."""
    lines = [f"## tune {record.name}", "", f"Started {record.started_at or '-'}, "
             f"{'finished ' + record.finished_at if record.finished_at else 'not finished'}.", ""]
    for title, header, rows in _sections(record, answer):
        lines += [f"### {title}", "", *_md_table(header, rows), ""]
        if title.startswith("Each variant"):
            lines += [_LEGEND, ""]
    lines += [answer.front.note, ""]
    if failed := failed_lines(answer):
        lines += ["### Did not finish", ""]
        for line, words in failed:
            fence = "`" * max(3, _longest_run(words, "`") + 1)
            lines += [f"- {_one_line(line)}", *([f"  {fence}", textwrap.indent(words, "  "), f"  {fence}"]
                                                 if words else []), ""]
    if notes := note_lines(answer):
        lines += ["### Notes", "", *(f"- {_one_line(line)}" for line in notes), ""]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _longest_run(text: str, char: str) -> int:
    """The longest run of ``char`` in ``text`` (a fence must be longer than any inside it)."""
    return max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)


def _html_table(header: Sequence[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = ("body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1300px;padding:1rem 1.5rem 3rem;color:#222}"
        "table{border-collapse:collapse;margin:.6rem 0 1rem;font-size:.9rem}"
        "th,td{border-bottom:1px solid #e4e4e4;padding:.25rem .6rem;text-align:left}th{background:#f6f6f6}"
        ".note{color:#555;font-style:italic}li.failed{color:#b00020}")


def tune_html(record: TuneRecord, answer: TuneAnswer, title: str | None = None) -> str:
    """One self-contained page: the tables, the notes, and the ``tune --json`` document embedded."""
    heading = html.escape(title or f"tokometer tune {record.name}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{heading}</title><style>{_CSS}</style>"
             f"</head><body><h1>{heading}</h1>"]
    for name, header, rows in _sections(record, answer):
        parts.append(f"<h2>{html.escape(name)}</h2>{_html_table(header, rows)}")
        if name.startswith("Each variant"):
            parts.append(f"<p class='note'>{html.escape(_LEGEND)}</p>")
    parts.append(f"<p class='note'>{html.escape(answer.front.note)}</p>")
    if failed := failed_lines(answer):
        items = "".join(f"<li class='failed'>{html.escape(line)}"
                        + (f"<pre>{html.escape(words)}</pre>" if words else "") + "</li>" for line, words in failed)
        parts.append(f"<h2>Did not finish</h2><ul>{items}</ul>")
    if notes := note_lines(answer):
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    parts.append(f'<script type="application/json" id="{TUNE_DATA_ID}">{embed_json(answer_json(record, answer))}'
                 "</script></body></html>\n")
    return "".join(parts)
