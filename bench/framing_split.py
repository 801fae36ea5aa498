"""How fast does the SSE/NDJSON splitter (`tokometer.protocols.common.framing`) go, on usual and hostile streams?

Prints seconds per case, median of ``--repeat`` runs:

1. ``no-delimiter``: 12 MiB with no event delimiter, fed in 64 KiB pieces, then one ``\\n\\n``
   (the case that was quadratic: every piece rescanned the whole buffer);
2. ``one-event-a-chunk``: 100,000 OpenAI-sized events (~160 bytes), one a chunk (the usual stream);
3. ``split-events``: the same events each cut in two pieces (an event carried over every time);
4. ``watch``: the bench's per-chunk `EventWatch` (count events, size the open one) on case 2's chunks,
   where that class exists.

Run it on two trees to compare: ``PYTHONPATH=src .venv/bin/python bench/framing_split.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from tokometer.protocols.common import framing

EVENT = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
         b'"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n')


def no_delimiter() -> None:
    splitter = framing.EventSplitter("sse")
    piece = b"y" * 65536
    for _ in range(192):
        splitter.feed(piece)
    assert len(splitter.feed(b"\n\n")) == 1


def one_event_a_chunk() -> None:
    splitter = framing.EventSplitter("sse")
    for _ in range(100_000):
        splitter.feed(EVENT)


def split_events() -> None:
    splitter = framing.EventSplitter("sse")
    head, tail = EVENT[:70], EVENT[70:]
    for _ in range(100_000):
        splitter.feed(head)
        splitter.feed(tail)


def watch() -> None:
    counter = framing.EventWatch("sse", max_events=200_000)
    for _ in range(100_000):
        counter.feed(EVENT)
    assert counter.events == 100_000


def timed(case: Callable[[], None], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        case()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases: dict[str, Callable[[], None]] = {"no-delimiter": no_delimiter, "one-event-a-chunk": one_event_a_chunk,
                                            "split-events": split_events}
    if hasattr(framing, "EventWatch"):
        cases["watch"] = watch
    for name, case in cases.items():
        repeat = 1 if name == "no-delimiter" and not hasattr(framing, "EventWatch") else args.repeat
        print(f"{name:>18}: {timed(case, repeat):8.4f} s")


if __name__ == "__main__":
    main()
