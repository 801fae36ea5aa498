"""``serve``'s llama.cpp options leave their defaults to `LlamaCppSettings` (one place), and say the same number."""

from __future__ import annotations

import re

from tokometer.cli.serve import command
from tokometer.engines.llamacpp import LlamaCppSettings


def test_parallel_default_is_the_settings_and_the_help_says_it() -> None:
    option = next(p for p in command.params if p.name == "parallel")
    assert option.default is None  # not given: LlamaCppSettings decides
    stated = re.search(r"LlamaCppSettings\.parallel, (\d+)", option.help or "")
    assert stated is not None and int(stated.group(1)) == LlamaCppSettings.parallel
