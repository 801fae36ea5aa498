"""``tokometer quality``'s report as text: a plain table for a terminal, or markdown for a pull request."""

from __future__ import annotations

from tokometer.quality.verdict import EndpointSummary, Summary
from tokometer.util.shown import clipped

__all__ = ["render_markdown", "render_text"]


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def _rows(s: Summary) -> list[tuple[str, str, str]]:
    def acc(e: EndpointSummary) -> str:
        return f"{e.accuracy:.1%} [{e.accuracy_low:.1%}, {e.accuracy_high:.1%}] ({e.correct}/{s.items})"

    return [
        ("model", clipped(s.a.model), clipped(s.b.model)),
        ("endpoint", s.a.url, s.b.url),
        ("accuracy (Wilson 95 %)", acc(s.a), acc(s.b)),
        ("failed requests", str(s.a.failed), str(s.b.failed)),
        ("TTFT p50", f"{_num(s.a.ttft_p50_ms, '.1f')} ms", f"{_num(s.b.ttft_p50_ms, '.1f')} ms"),
        ("decode p50", f"{_num(s.a.decode_p50_tok_s, '.1f')} tok/s", f"{_num(s.b.decode_p50_tok_s, '.1f')} tok/s"),
    ]


def _agreement_lines(s: Summary) -> list[str]:
    d = s.difference
    div = (f"first divergence at token {_num(s.divergence_median, 'g')} (median of {s.diverging} diverging items)"
           if s.diverging else "no item diverges")
    return [
        f"exact match of greedy answers: {s.exact_match:.1%} [{s.exact_low:.1%}, {s.exact_high:.1%}] "
        f"of {s.compared} items; {div}",
        f"top-1 agreement: {_num(s.top1_agreement and s.top1_agreement * 100, '.1f')} % and mean KL(A‖B) "
        f"{_num(s.mean_kl, '.4f')} nats (max {_num(s.max_kl, '.3f')}) over {s.positions} positions "
        f"({s.forced_positions} teacher-forced), top-{s.top_logprobs} logprobs",
        f"KL compared {s.kl_method}",
        f"accuracy B − A: {d.difference * 100:+.1f} points, 95 % [{d.low * 100:+.1f}, {d.high * 100:+.1f}] "
        f"(paired, McNemar-based; A only right: {d.a_only}, B only right: {d.b_only}; "
        f"McNemar exact p = {d.p_value:.3g}, mid-p = {d.mid_p:.3g})",
        f"speed B / A: decode {_num(s.decode_ratio, '.2f')}×, TTFT {_num(s.ttft_ratio, '.2f')}×",
        "right answers by task, A / B of n: " + ", ".join(f"{task} {a}/{b} of {n}"
                                                         for task, (a, b, n) in s.by_task.items()),
    ]


def render_text(s: Summary) -> str:
    """Aligned plain text."""
    rows = [("", "A", "B"), *_rows(s)]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    return "\n".join([*lines, "", *_agreement_lines(s), "", f"verdict: {s.verdict.headline}",
                      f"  ({s.items} items, max {s.max_tokens} tokens each, {s.seconds:.0f} s)"]) + "\n"


def render_markdown(s: Summary) -> str:
    """Markdown: a table and bullet points."""
    rows = [("", "A", "B"), ("---", "---", "---"), *_rows(s)]
    table = "\n".join("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows)
    bullets = "\n".join(f"- {line}" for line in _agreement_lines(s))
    return (f"**{s.verdict.headline}**\n\n{table}\n\n{bullets}\n\n"
            f"{s.items} items, max {s.max_tokens} tokens each, {s.seconds:.0f} s. Rule: {s.verdict.rule}.\n")
