"""Synthetic prompts of an exact input length, made with the model's tokenizer.

Each prompt is a different random run of common words (so a prefix cache
cannot make the second request look faster than the first), cut to exactly
``input_tokens`` tokens of the given tokenizer and checked by encoding it
again.

Shared prefixes (``prefix_tokens`` P, ``prefix_groups`` G): G prefixes of exactly P tokens are made first;
each prompt starts with one of them, then a line break and its own words, so that the whole prompt is still
exactly ``input_tokens`` tokens. The prompts go round the prefixes: each run of G prompts takes every prefix
once, in an order the seed shuffles (`_group`), so a run of N ≥ G prompts uses every prefix, each N / G times
to within one, and exactly G prompts find their prefix new. The first prompt with each prefix is marked
(``prefix_first``): it is the one a prefix cache cannot have seen.

With ``images`` (`tokometer.datasets.images`) each prompt also carries its own synthetic images; such
prompts repeat after 256 (their images are held in memory), so a server's image cache can help past that.

Without a tokenizer the prompt has ``input_tokens`` words and its length
in tokens is unknown: the source says so (``exact`` is False) and the run
reports the server's own count.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import replace

from tokometer.datasets.images import ImageSpec, make_images
from tokometer.datasets.words import WORDS
from tokometer.prompt import Prompt
from tokometer.tokens.base import Tokenizer
from tokometer.util.errors import DatasetError

__all__ = ["SyntheticSource", "make_exact_text"]

_ATTEMPTS = 8
_IMAGE_PROMPTS = 256
"""Distinct prompts made when each carries images (they repeat after that: a run holds them in memory)."""


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_exact_text(tokenizer: Tokenizer, n_tokens: int, rng: random.Random) -> str:
    """Text that ``tokenizer`` encodes to exactly ``n_tokens`` tokens."""
    if n_tokens <= 0:
        return ""
    for _ in range(_ATTEMPTS):
        ids = tokenizer.encode(_words(rng, n_tokens + 8))
        while len(ids) < n_tokens:
            ids += tokenizer.encode(" " + _words(rng, n_tokens - len(ids) + 8))
        text = tokenizer.decode(ids[:n_tokens])
        if tokenizer.count(text) == n_tokens:
            return text
        # Decoding a cut can merge differently on re-encoding; nudge the end until it fits.
        for trim in range(1, 4):
            candidate = tokenizer.decode(ids[: n_tokens - trim])
            extra = n_tokens - tokenizer.count(candidate)
            if extra > 0:
                candidate += " " + _words(rng, extra)
                if tokenizer.count(candidate) == n_tokens:
                    return candidate
    raise DatasetError(
        f"could not make a prompt of exactly {n_tokens} tokens with tokenizer {tokenizer.name}; "
        "use a prompt file (--dataset) instead"
    )


class SyntheticSource:
    """Endless distinct prompts of ``input_tokens`` tokens (exact with a tokenizer)."""

    def __init__(
        self,
        input_tokens: int,
        *,
        tokenizer: Tokenizer | None = None,
        seed: int = 0,
        unique: int = 8192,
        prefix_tokens: int = 0,
        prefix_groups: int = 1,
        images: ImageSpec | None = None,
    ) -> None:
        if input_tokens < 1:
            raise DatasetError("--input-tokens must be at least 1")
        if prefix_tokens and not 0 < prefix_tokens < input_tokens:
            raise DatasetError(f"--prefix-tokens {prefix_tokens} must be less than --input-tokens {input_tokens}: "
                               "each prompt is its shared prefix and then its own words")
        if prefix_groups < 1:
            raise DatasetError("--prefix-groups must be at least 1")
        self.prefix_tokens = prefix_tokens
        self.prefix_groups = prefix_groups
        self._prefixes: list[str] = []
        self._seen_groups: set[int] = set()
        self._round: tuple[int, list[int]] = (-1, [])
        """The round of prefixes last used (`_group`): its number and its order."""
        self.input_tokens = input_tokens
        self.tokenizer = tokenizer
        self.seed = seed
        self.images = images
        self.unique = min(unique, _IMAGE_PROMPTS) if images is not None else unique
        self.exact = tokenizer is not None
        shared = f", {prefix_groups} shared prefix{'es' if prefix_groups > 1 else ''} of {prefix_tokens}" \
            if prefix_tokens else ""
        pictures = f", {images.describe()}" if images is not None else ""
        self.name = (f"synthetic({input_tokens} tokens{shared}{pictures}, "
                     f"{'exact: ' + tokenizer.name if tokenizer else 'words'})")
        self._cache: list[Prompt] = []

    def _make(self, index: int) -> Prompt:
        prompt = self._make_text(index)
        if self.images is None:
            return prompt
        return replace(prompt, images=make_images(self.images, self.seed, index))

    def _make_text(self, index: int) -> Prompt:
        rng = random.Random(f"{self.seed}:{index}")
        if self.prefix_tokens:
            return self._make_shared(index, rng)
        if self.tokenizer is None:
            return Prompt.from_text(_words(rng, self.input_tokens))
        text = make_exact_text(self.tokenizer, self.input_tokens, rng)
        return Prompt.from_text(text, input_tokens=self.input_tokens)

    def _prefix(self, group: int) -> str:
        while len(self._prefixes) <= group:
            rng = random.Random(f"{self.seed}:prefix:{len(self._prefixes)}")
            self._prefixes.append(make_exact_text(self.tokenizer, self.prefix_tokens, rng) if self.tokenizer
                                  else _words(rng, self.prefix_tokens))
        return self._prefixes[group]

    def _group(self, index: int) -> int:
        """Prompt ``index``'s prefix: its place in its round of ``prefix_groups`` prompts, in that round's order (a
        shuffle of the seed's); the last round's order is kept."""
        number, place = divmod(index, self.prefix_groups)
        if self._round[0] != number:
            order = list(range(self.prefix_groups))
            random.Random(f"{self.seed}:prefix-round:{number}").shuffle(order)
            self._round = (number, order)
        return self._round[1][place]

    def _make_shared(self, index: int, rng: random.Random) -> Prompt:
        group = self._group(index)
        first = group not in self._seen_groups
        self._seen_groups.add(group)
        prefix = self._prefix(group) + "\n"
        own = self.input_tokens - self.prefix_tokens
        if self.tokenizer is None:
            return replace(Prompt.from_text(prefix + _words(rng, own)), prefix_group=group, prefix_first=first)
        for _ in range(_ATTEMPTS):  # the line break may merge with the words around it: fit the tail
            text = prefix + make_exact_text(self.tokenizer, max(1, own), rng)
            miss = self.input_tokens - self.tokenizer.count(text)
            if miss == 0:
                return replace(Prompt.from_text(text, input_tokens=self.input_tokens), prefix_group=group,
                               prefix_first=first)
            own += miss
        raise DatasetError(f"could not make a prompt of exactly {self.input_tokens} tokens after a shared prefix "
                           f"of {self.prefix_tokens} with tokenizer {self.tokenizer.name}")

    def prepare(self, n: int, stop: threading.Event | None = None) -> None:
        """Make the first ``min(n, unique)`` prompts now, before any timing starts; return early once
        ``stop`` is set (Ctrl-C while a thread makes them)."""
        while len(self._cache) < min(n, self.unique) and not (stop is not None and stop.is_set()):
            self._cache.append(self._make(len(self._cache)))

    def prompts(self) -> Iterator[Prompt]:
        """Distinct prompts, the same sequence for the same seed; repeats after ``unique``."""
        index = 0
        while True:
            slot = index % self.unique
            if slot == len(self._cache):
                self._cache.append(self._make(slot))
            yield self._cache[slot]
            index += 1
