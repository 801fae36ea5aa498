"""``tokometer tune``: a baseline engine setting, then one change at a time, each measured and judged against it.

The words of a tune, what it planned and what each variant gave, are in `tokometer.tune.outcome`; import from the
submodules.
"""

from __future__ import annotations

__all__: list[str] = []
