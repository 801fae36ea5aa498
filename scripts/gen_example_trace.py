"""Write tokometer's example request trace (src/tokometer/datasets/data/example_trace.jsonl).

The trace is made up here, from a fixed seed, in the Mooncake format (one JSON object a line: ``timestamp``
in ms from the first request, ``input_length`` and ``output_length`` in tokens, ``hash_ids``: one id per
512-token block of the prompt, the last block possibly partial). It mimics what such traces show at a small
scale, ~20 s and 60 requests:

- arrivals: Poisson at 3 requests/s, with one burst of 6 requests in the same millisecond;
- most requests start with the same 2-block system prompt (ids 0 and 1), as an agent's do;
- a third of them continue an earlier request's conversation: its blocks, then new ones (a multi-turn chat
  whose history a prefix cache can reuse); the rest start a new conversation after the system prompt;
- prompts of 600 to 3,000 tokens, answers of 16 to 160.

Run it with ``.venv/bin/python scripts/gen_example_trace.py``; it prints what it wrote.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

BLOCK = 512
OUT = Path(__file__).resolve().parents[1] / "src" / "tokometer" / "datasets" / "data" / "example_trace.jsonl"
SYSTEM = [0, 1]


def main() -> None:
    rng = random.Random(20250815)
    next_id = len(SYSTEM)
    entries: list[tuple[int, int, int, list[int]]] = []  # timestamp ms, input, output, hash ids
    t = 0.0
    while len(entries) < 60:
        burst = 6 if len(entries) == 30 else 1
        if burst == 1:
            t += rng.expovariate(3.0) * 1000
        for _ in range(burst):
            earlier = [e for e in entries if len(e[3]) < 5]
            if earlier and rng.random() < 1 / 3:
                parent = rng.choice(earlier)
                ids = parent[3][:parent[1] // BLOCK]  # the parent's partial last block is not history
                new = rng.randint(1, 2)
            else:
                ids = list(SYSTEM) if rng.random() < 0.85 else []
                new = rng.randint(1, 4)
            ids = ids + list(range(next_id, next_id + new))
            next_id += new
            length = (len(ids) - 1) * BLOCK + rng.randint(100, BLOCK)
            if length < 600:
                ids.append(next_id)
                next_id += 1
                length = (len(ids) - 1) * BLOCK + rng.randint(100, BLOCK)
            entries.append((round(t), length, rng.randint(16, 160), ids))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    first = entries[0][0]
    lines = [json.dumps({"timestamp": ts - first, "input_length": n, "output_length": out, "hash_ids": ids})
             for ts, n, out, ids in entries]
    OUT.write_text("".join(line + "\n" for line in lines), "utf-8")
    print(f"wrote {OUT}: {len(entries)} requests over {(entries[-1][0] - first) / 1000:.1f} s")


if __name__ == "__main__":
    main()
