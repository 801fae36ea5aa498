"""How long does ``bench --time-slice`` take to summarise a step, after the step ends?

Builds ``--requests`` synthetic finished requests of ``--events`` one-token events each, sent evenly over
60 s and each 2 s long, then times `tokometer.metrics.window.time_slices` cutting the step into ``--slices``
slices (1,000 is the cap, `MAX_SLICES`), best of ``--repeat`` rounds. Run it on each commit to compare:

    PYTHONPATH=src .venv/bin/python bench/time_slices.py [--requests 10000] [--events 256] [--slices 1000]
"""

from __future__ import annotations

import argparse
import time

from tokometer.metrics.window import time_slices
from tokometer.records import RequestRecord

S = 1_000_000_000


def _records(n: int, events: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        sent = int(i * 60 * S / n)
        first = sent + S // 10
        gap = (2 * S - S // 10) // events
        stamps = [first + k * gap for k in range(events)]
        out.append(RequestRecord(index=i, sent_ns=sent + 1, due_ns=sent + 1, first_byte_ns=stamps[0],
                                 first_token_ns=stamps[0], last_token_ns=stamps[-1], end_ns=stamps[-1] + 1,
                                 event_ns=stamps, event_tokens=[1.0] * events, output_tokens=events,
                                 output_tokens_source="usage", input_tokens=100, status=200,
                                 finish_reason="length"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=256)
    parser.add_argument("--slices", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    records = _records(args.requests, args.events)
    span_s = (max(r.end_ns for r in records) - min(r.sent_ns for r in records)) / 1e9
    width = span_s / args.slices * 1.0001  # just under --slices slices
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        out = time_slices(records, width, lambda t: 100.0)
        best = min(best, time.perf_counter() - start)
    print(f"{args.requests} requests x {args.events} events, {len(out['slices'])} slices of {out['slice_s']:g} s: "
          f"{best:.2f} s")


if __name__ == "__main__":
    main()
