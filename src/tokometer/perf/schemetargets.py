"""Which compressed-tensors ``config_groups`` scheme each linear module of a model takes, by the rule vLLM 0.32
resolves it by (``compressed_tensors/compressed_tensors.py``: ``from_config``, ``get_scheme_dict``;
``compressed_tensors/utils.py``: ``find_matched_target``; ``compressed_tensors_moe.py``: ``get_moe_method``):

    1. a group whose one target ends with ``Attention`` is dropped (attention quantisation, read with the cache)
    2. the groups' targets make one map, target to scheme, in the order written: a target written twice keeps its
       first place and takes its last group's scheme
    3. a module's name is matched against the targets in that order: a target equal to it, or ``re:`` and a
       regular expression matched from the name's start (read as fnmatch patterns,
       `tokometer.perf.modulepatterns.entry_globs`: never run)
    4. else its class's name: a target contained in it (any case), or an ``re:`` one that matches it; a linear
       module's class is taken as ``Linear`` (vLLM's ``QKVParallelLinear``, ``RowParallelLinear`` ... end so),
       the routed experts' as ``RoutedExperts``, which vLLM gives ``Linear``'s scheme after every other target
    5. no target: the module keeps its 16-bit dtype

A layer's routed experts take the scheme their expert 0's three projections find (``….experts.0.gate_proj``,
``up_proj``, ``down_proj``; Mixtral's family's ``w1``, ``w3``, ``w2``), as vLLM looks it up. The attention's and
MLP's projections are matched by the names the checkpoint's targets are written for (``q_proj``, ``gate_proj``, ...;
another family's own, ``c_attn``, ``c_fc``, ..., `tokometer.perf.modulenames`), not by vLLM's fused ``qkv_proj`` and
``gate_up_proj`` (which it matches by their parts when no target names the fused module). The modules are those
`tokometer.perf.unquantized.linear_modules` names, in every spelling: a module that some spelling's name matches
takes that target's group (several: all of them), else its class's. A module in ``ignore`` is left to
`tokometer.perf.unquantized`, as the rest of that list.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from tokometer.perf.modulepatterns import entry_globs
from tokometer.perf.unquantized import MAX_PATTERN_CHARS, MAX_PATTERNS, MAX_WORK, ROUTED_EXPERTS, linear_modules
from tokometer.util.shown import FIELD_CHARS, quoted

__all__ = ["module_group", "module_groups", "scheme_targets"]

_LINEAR_CLASS = "Linear"
_EXPERTS_CLASS = "RoutedExperts"


def scheme_targets(groups: dict[Any, Any]) -> dict[str, str]:
    """The map vLLM makes of ``groups`` (a ``config_groups`` object): each target, in its order, to the key of the
    group whose scheme it takes (module docstring, rules 1 and 2). ValueError naming a group whose ``targets`` is
    not a list of 1 to `MAX_PATTERN_CHARS`-character names, or where they pass `MAX_PATTERNS` together."""
    out: dict[str, str] = {}
    for key, group in groups.items():
        targets = group.get("targets") if isinstance(group, dict) else None
        if not isinstance(targets, list) or not all(
                isinstance(t, str) and 0 < len(t) <= MAX_PATTERN_CHARS for t in targets):
            raise ValueError(f"the targets of its group {quoted(str(key), FIELD_CHARS)} are not a list of module "
                             f"names of 1 to {MAX_PATTERN_CHARS} characters")
        if len(targets) == 1 and targets[0].endswith("Attention"):
            continue
        out.update(dict.fromkeys(targets, str(key)))
        if len(out) > MAX_PATTERNS:
            raise ValueError(f"its config_groups hold more than {MAX_PATTERNS:,} targets")
    return out


def module_groups(cfg: dict[str, Any], targets: dict[str, str]) -> dict[str, set[str | None]]:
    """For each kind of linear module in the model ``cfg`` describes (`tokometer.perf.unquantized.linear_modules`:
    attention, dense MLP, shared expert, routed experts), the groups its modules take by ``targets``
    (`scheme_targets`), None for modules no target matches (module docstring). `NotMatched` for a model whose
    modules are not named there; ValueError for a regular expression not read, or a matching that would take more
    than `MAX_WORK` tries."""
    resolver = _Resolver(targets)
    out: dict[str, set[str | None]] = {}
    for kind, names in linear_modules(cfg):
        out.setdefault(kind, set()).update(resolver.groups(names, kind == ROUTED_EXPERTS))
    return out


def module_group(targets: dict[str, str], name: str, experts: bool = False) -> str | None:
    """The group the one module ``name`` takes by ``targets`` (`scheme_targets`), None for none; ``experts``: a
    routed expert's projection (of the class ``RoutedExperts``). ValueError for a regular expression not read."""
    return next(iter(_Resolver(targets).groups((name,), experts)))


class _Resolver:
    """``targets`` as vLLM tries them: exact names looked up, ``re:`` ones as fnmatch patterns in their order; the
    class-name match of a linear module and of the routed experts found once."""

    def __init__(self, targets: dict[str, str]) -> None:
        self._groups = list(targets.values())
        self._exact = {target: place for place, target in enumerate(targets) if not target.startswith("re:")}
        self._globs = {target: entry_globs(target, "config_groups target") for target in targets
                       if target.startswith("re:")}
        if sum(map(len, self._globs.values())) > MAX_PATTERNS:
            raise ValueError(f"its config_groups targets expand to more than {MAX_PATTERNS:,} patterns")
        self._patterns = [(place, self._globs[target]) for place, target in enumerate(targets)
                          if target in self._globs]
        self._linear = self._by_class(list(targets.items()), _LINEAR_CLASS)
        experts = list(targets.items())
        if _LINEAR_CLASS in targets and _EXPERTS_CLASS not in targets:  # _add_fused_moe_to_target_scheme_map
            experts.append((_EXPERTS_CLASS, targets[_LINEAR_CLASS]))
        self._experts = self._by_class(experts, _EXPERTS_CLASS)
        self._work = 0

    def groups(self, names: tuple[str, ...], experts: bool) -> set[str | None]:
        """The groups a module spelled ``names`` takes: those of the first target each spelling's name matches,
        else its class's (the routed experts' with ``experts``); {None} where neither matches."""
        named: set[str | None] = {self._groups[place] for place in map(self._by_name, names) if place is not None}
        return named or {self._experts if experts else self._linear}

    def _by_name(self, name: str) -> int | None:
        """The place of the first target that matches ``name`` (rule 3), or None."""
        exact = self._exact.get(name)
        for place, globs in self._patterns:
            if exact is not None and place > exact:
                break
            self._work += len(globs)
            if self._work > MAX_WORK:
                raise ValueError(f"its config_groups targets take more than {MAX_WORK:,} tries to match")
            if any(fnmatch.fnmatchcase(name, glob) for glob in globs):
                return place
        return exact

    def _by_class(self, targets: list[tuple[str, str]], name: str) -> str | None:
        """The group of the first of ``targets`` (target, group) that matches the class ``name`` (rule 4)."""
        for target, group in targets:
            globs = self._globs.get(target)
            if any(fnmatch.fnmatchcase(name, glob) for glob in globs) if globs is not None else \
                    target.lower() in name.lower():
                return group
        return None
