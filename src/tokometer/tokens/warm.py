"""``python -m tokometer.tokens.warm [GGUF...]``: convert GGUF tokenizers ahead of time.

The first use of a GGUF's tokenizer converts it to a cached ``tokenizer.json`` (~5 s for the
bundled Gemma 3 270M's 262k-entry vocabulary on 2 cores); later loads take ~1 s. Set-up runs
this once so that the first ``tokometer count`` is as fast as the rest. With no argument it
converts the bundled model's tokenizer.
"""

from __future__ import annotations

import sys
import time

from tokometer.util.errors import TokometerError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Convert (or find cached) each GGUF's tokenizer; print where it is and how long it took."""
    from tokometer.tokens.gguf_vocab import gguf_tokenizer
    from tokometer.tokens.loader import load_tokenizer

    paths: list[str | None] = list(sys.argv[1:] if argv is None else argv)
    try:
        for path in paths or [None]:
            started = time.perf_counter()
            tok = gguf_tokenizer(path) if path else load_tokenizer(None)
            where = getattr(tok, "path", "")
            print(f"{tok.name}: ready in {time.perf_counter() - started:.1f} s ({where})")
    except TokometerError as exc:
        print(f"tokometer: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
