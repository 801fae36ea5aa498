"""compressed-tensors' ``re:`` ignore entries read as fnmatch patterns (`tokometer.perf.modulepatterns`): any
regular expression either is refused in one ValueError or, as the fnmatch patterns its alternatives expand to,
matches exactly the module names ``re.match`` does."""

from __future__ import annotations

import fnmatch
import re
import warnings

from hypothesis import given
from hypothesis import strategies as st

from tokometer.perf.modulepatterns import regex_as_globs

NAMES = ["model.layers.0.self_attn.q_proj", "model.layers.12.mlp.gate", "model.layers.3.mlp.experts.7.up_proj",
         "lm_head", "model.layers.1.self_attn.o_proj", "vision_tower.blocks.0.attn", "a.b", "ab", ".", "", "x$y",
         "model-a/b:c", "model.layers.10.mlp.shared_expert.down_proj", "re:x", "*?[", "mlp.gate$",
         "model.layers.0.mlp.gate_proj", "mlp.up_proj", "x", "gateup", "|", "a|b", "b", "ax", "up"]
PIECES = [".*", ".+", ".", "\\.", "\\$", "\\-", "\\*", "^", "$", "model", "layers", "self_attn", "mlp", "gate", "0",
          "1", "_", "-", "/", ":", "a", "b", "(", "|", "[0-9]", "+", "?", "\\d", "x", "y", "[", "*", ")", "(?:", ")?",
          "(a|b)", "(gate|up)", "\\|", "(?i)", "){2}", "(|x)"]


@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join))
def test_an_ignore_regex_is_refused_or_matches_what_re_match_does(regex: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "possible nested set": the test's own compile, not the reader's
            compiled = re.compile(regex)
    except re.error:
        compiled = None
    try:
        globs = regex_as_globs(regex)
    except ValueError as exc:
        assert "is a regular expression beyond '.*', '.', alternatives and literal text" in str(exc) or \
            "alternatives" in str(exc)
        return
    assert compiled is not None, regex  # only valid expressions are read
    for name in NAMES:
        assert (compiled.match(name) is not None) == any(fnmatch.fnmatchcase(name, g) for g in globs), \
            (regex, globs, name)
