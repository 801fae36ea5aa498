"""Hypothesis strategies shared by the fuzz tests: JSON values, and numbers a hostile server might send."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["json_values", "numbers", "texts"]

texts = st.text(max_size=12)
"""Short text, any code points (surrogates excluded: they cannot be encoded)."""

_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
            | st.floats(allow_nan=False, allow_infinity=False) | texts)

json_values: st.SearchStrategy[Any] = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=12)
"""Any JSON value (numbers that JSON can write: no NaN or infinity)."""

numbers: st.SearchStrategy[Any] = st.one_of(
    st.integers(min_value=-5, max_value=300), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["12", "", "1e30", True, None, [4], {"n": 1}]))
"""What a server may put where a count or a duration goes."""
