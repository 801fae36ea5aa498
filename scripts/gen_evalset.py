#!/usr/bin/env python3
"""Generate ``src/tokometer/quality/evalset.jsonl``: the small eval set ``tokometer quality`` grades.

Every item is made here from a fixed seed (``SEED``) and lists written in this file, so the set is
licence-clean (no downloaded benchmark) and reproducible: running this script again writes the
same bytes (tests/unit/quality/test_quality.py checks it). Six tasks, 50 items each, 300 in all, each with
an exact answer that a small base model partly gets right:

    add        two-digit addition              "What is 23 + 58?"                    81
    capital    capital of a country            "What is the capital of Japan?"       Tokyo
    sequence   next term of an arithmetic run  "What comes next: 3, 7, 11, 15,"      19
    count      number of items in a list       "How many items: cat, pen, cup?"      3
    copy       repeat a list of words          "Repeat: red door lamp"               red door lamp
    letter     the letter after (or before) one "Which letter comes after K?"          L

Each prompt is few-shot, as a base model needs it: two worked examples of the same task (fixed
per task, never the item itself), then the question and ``A:``. The grader compares the first line
of the answer, trimmed, without a final full stop, case-insensitively, with ``answer``.

    python scripts/gen_evalset.py [--check]
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from collections.abc import Callable
from pathlib import Path

SEED = 14  # the issue that asked for it
PER_TASK = 50
OUT = Path(__file__).resolve().parents[1] / "src" / "tokometer" / "quality" / "evalset.jsonl"

CAPITALS = {
    "France": "Paris", "Germany": "Berlin", "Italy": "Rome", "Spain": "Madrid", "Portugal": "Lisbon",
    "Japan": "Tokyo", "China": "Beijing", "Russia": "Moscow", "Egypt": "Cairo", "Greece": "Athens",
    "Austria": "Vienna", "Poland": "Warsaw", "Norway": "Oslo", "Sweden": "Stockholm", "Finland": "Helsinki",
    "Denmark": "Copenhagen", "Ireland": "Dublin", "Hungary": "Budapest", "Belgium": "Brussels",
    "Netherlands": "Amsterdam", "Czechia": "Prague", "Romania": "Bucharest", "Bulgaria": "Sofia",
    "Serbia": "Belgrade", "Croatia": "Zagreb", "Ukraine": "Kyiv", "Turkey": "Ankara", "Iran": "Tehran",
    "Iraq": "Baghdad", "Syria": "Damascus", "Lebanon": "Beirut", "Jordan": "Amman", "Israel": "Jerusalem",
    "Saudi Arabia": "Riyadh", "India": "New Delhi", "Pakistan": "Islamabad", "Bangladesh": "Dhaka",
    "Nepal": "Kathmandu", "Thailand": "Bangkok", "Vietnam": "Hanoi", "Indonesia": "Jakarta",
    "Philippines": "Manila", "South Korea": "Seoul", "Mongolia": "Ulaanbaatar", "Kenya": "Nairobi",
    "Ethiopia": "Addis Ababa", "Nigeria": "Abuja", "Ghana": "Accra", "Morocco": "Rabat", "Peru": "Lima",
    "Chile": "Santiago", "Argentina": "Buenos Aires", "Colombia": "Bogota", "Venezuela": "Caracas",
    "Cuba": "Havana", "Mexico": "Mexico City", "Canada": "Ottawa", "Australia": "Canberra",
    "New Zealand": "Wellington", "Iceland": "Reykjavik",
}
WORDS = ("red", "blue", "cat", "dog", "pen", "cup", "tree", "lamp", "door", "book", "fish", "bird", "milk", "road",
         "star", "rain", "ship", "coin", "hat", "box", "sun", "moon", "key", "egg", "car", "bed", "map", "ring")


def _add(rng: random.Random) -> tuple[str, str]:
    a, b = rng.randint(10, 79), rng.randint(10, 19)
    return f"What is {a} + {b}?", str(a + b)


def _capital(rng: random.Random, pool: list[str]) -> tuple[str, str]:
    country = pool.pop()
    return f"What is the capital of {country}?", CAPITALS[country]


def _sequence(rng: random.Random) -> tuple[str, str]:
    start, step = rng.randint(1, 30), rng.randint(2, 9)
    terms = [start + step * i for i in range(5)]
    return f"What comes next: {', '.join(map(str, terms[:4]))},", str(terms[4])


def _count(rng: random.Random) -> tuple[str, str]:
    items = rng.sample(WORDS, rng.randint(2, 6))
    return f"How many items: {', '.join(items)}?", str(len(items))


def _copy(rng: random.Random) -> tuple[str, str]:
    words = " ".join(rng.sample(WORDS, rng.randint(2, 5)))
    return f"Repeat: {words}", words


def _letter(rng: random.Random) -> tuple[str, str]:
    way, alphabet = rng.choice((("after", string.ascii_uppercase), ("after", string.ascii_lowercase),
                                ("before", string.ascii_uppercase)))
    index = rng.randint(0, 24) + (way == "before")
    answer = alphabet[index + 1] if way == "after" else alphabet[index - 1]
    return f"Which letter comes {way} {alphabet[index]}?", answer


SHOTS: dict[str, tuple[tuple[str, str], ...]] = {
    "add": (("What is 12 + 7?", "19"), ("What is 30 + 15?", "45")),
    "capital": (("What is the capital of Kenya?", "Nairobi"), ("What is the capital of Peru?", "Lima")),
    "sequence": (("What comes next: 2, 4, 6, 8,", "10"), ("What comes next: 5, 10, 15, 20,", "25")),
    "count": (("How many items: sun, key?", "2"), ("How many items: egg, car, bed, map?", "4")),
    "copy": (("Repeat: sun key", "sun key"), ("Repeat: egg car bed", "egg car bed")),
    "letter": (("Which letter comes after B?", "C"), ("Which letter comes after M?", "N")),
}


def _prompt(task: str, question: str) -> str:
    shots = "".join(f"Q: {q}\nA: {a}\n\n" for q, a in SHOTS[task])
    return f"{shots}Q: {question}\nA:"


def generate(seed: int = SEED, per_task: int = PER_TASK) -> list[dict[str, str]]:
    """The items, in a fixed order (tasks interleaved, so ``--limit N`` takes a mix of all six)."""
    rng = random.Random(seed)
    shot_questions = {q for shots in SHOTS.values() for q, _ in shots}
    pool = sorted(c for c in CAPITALS if f"What is the capital of {c}?" not in shot_questions)
    rng.shuffle(pool)
    makers: dict[str, Callable[[random.Random], tuple[str, str]]] = {
        "add": _add, "capital": lambda r: _capital(r, pool), "sequence": _sequence, "count": _count,
        "copy": _copy, "letter": _letter,
    }
    by_task: dict[str, list[dict[str, str]]] = {task: [] for task in makers}
    for task, make in makers.items():
        seen = set(shot_questions)
        while len(by_task[task]) < per_task:
            question, answer = make(rng)
            if question in seen:
                continue
            seen.add(question)
            by_task[task].append({"id": f"{task}-{len(by_task[task]):03d}", "task": task,
                                  "prompt": _prompt(task, question), "answer": answer})
    return [by_task[task][i] for i in range(per_task) for task in makers]


def render(items: list[dict[str, str]]) -> str:
    """The JSONL text: one item a line, keys in a fixed order."""
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped file differs from a fresh one")
    args = parser.parse_args()
    text = render(generate())
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT}: {'up to date' if same else 'differs from the generator: run scripts/gen_evalset.py'}")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {len(text.splitlines())} items to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
