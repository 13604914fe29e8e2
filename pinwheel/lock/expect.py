"""The part of expect.json that the manifest and the lock's own slices decide, with no index: the lock writes
it, and `lock --check` and the build derive it again and refuse a committed expect.json that differs."""
from __future__ import annotations

from typing import Mapping

from packaging.utils import canonicalize_name

from ..plan import Plan
from ..resolve import baseline_broken, reads_base
from ..resolve.resolver import exclusions
from ..resolve.resolver import removal_breaks as resolver_removal_breaks
from ..steps import kind_of
from ..steps.registry import step_allowances
from .format import EXPECT_SCHEMA
from .inputs import base_kept, base_kept_excluded, stays_removed

# The keys whose values come from the index's metadata (each --no-deps package's Requires-Dist): checked for
# their shape and their names, not derived.
FROM_THE_INDEX = ("suppressed", "dropped", "overridden_edges")


def _with_fallbacks(plan: Plan):
    for p in plan.packages():
        yield from ((p, p.fallback) if getattr(p, "fallback", None) else (p,))


def _kept_from_base(plan: Plan, installed_here: set[str]):
    """(the base's inventory, the packages this image keeps from it), or (None, set()) where the image
    reads no base: what the base's own manifest declared holds for those packages only."""
    inv = plan.resolution.base_inventory
    if not reads_base(plan) or inv is None:
        return None, set()
    return inv, set(base_kept(plan)) - installed_here


def inherited_import_skip(plan: Plan, installed_here: set[str]) -> dict[str, str]:
    """The base's own import skips (a base pinwheel built: its inventory keeps them), for the packages this
    image keeps from the base; one it installs again is judged by this manifest alone."""
    inv, kept = _kept_from_base(plan, installed_here)
    return {name: f"{why} (the base's own manifest)" for name, why in inv.import_skip if name in kept} if inv else {}


def inherited_verify(plan: Plan, installed_here: set[str]) -> dict[str, dict]:
    """The base's own checks, as inherited_import_skip has its skips; one this image installs again is
    checked as this manifest says."""
    inv, kept = _kept_from_base(plan, installed_here)
    return {name: {**check, "from": "base"} for name, check in inv.verify if name in kept} if inv else {}


def removal_breaks(plan: Plan, removed: list[str]) -> dict[str, list[str]]:
    """removed package -> the packages its remove step's `breaks` leaves unmet on purpose (those that stay
    removed only)."""
    out: dict[str, set[str]] = {}
    for s in plan.steps:
        for name in kind_of(s).effect(s).removes:
            parents = [p for p, _why in resolver_removal_breaks(s, canonicalize_name(name))]
            if parents and canonicalize_name(name) in removed:
                out.setdefault(canonicalize_name(name), set()).update(parents)
    return {n: sorted(ps) for n, ps in sorted(out.items())}


def derived_expect(plan: Plan, pins: Mapping[str, str], conditional: Mapping[str, str]) -> dict:
    """expect.json but its FROM_THE_INDEX keys: ``pins`` (what the slices install), ``fallbacks`` (what the
    fallback files install), and what the manifest says (exclusions, import skips, verify checks, overrides,
    and on a base with an environment what stays, what goes and what the base already broke)."""
    out = {
        "schema": EXPECT_SCHEMA,
        "variant": plan.variant.name,
        "pins": dict(sorted(pins.items())),
        # installed only when the local wheel they stand in for is missing: not checked as pins
        "fallbacks": dict(sorted(conditional.items())),
    }
    excluded = {name: dict(sorted(names.items())) for name, names in sorted(exclusions(plan).items()) if name in pins}
    if excluded:
        out["excluded"] = excluded
    import_skip = {**inherited_import_skip(plan, set(pins) | set(conditional)),
                   **{q.name: f"needs: {q.needs}: {q.needs_why}" for q in _with_fallbacks(plan) if getattr(q, "needs", None)}}
    if import_skip:
        out["import_skip"] = dict(sorted(import_skip.items()))
    allowed_unmet = step_allowances(plan)
    if allowed_unmet:  # what source steps' --no-deps installs may leave unmet: their pip check findings pass
        out["allowed_unmet"] = {n: dict(sorted(a.items())) for n, a in sorted(allowed_unmet.items())}
    verify = {**inherited_verify(plan, set(pins) | set(conditional)),
              **{q.name: {"import": list(q.verify.imports), "python": q.verify.python, "needs": q.verify.needs,
                       **({"check": q.verify.check} if q.verify.check else {})}
                 for q in _with_fallbacks(plan) if getattr(q, "verify", None)}}
    if verify:
        out["verify"] = dict(sorted(verify.items()))
    if reads_base(plan):
        out["base_unchanged"] = {n: ver for n, ver in base_kept(plan).items() if n not in pins}
        out["removed"] = sorted(stays_removed(plan) - set(pins) - set(conditional))
        breaks = removal_breaks(plan, out["removed"])
        if breaks:  # only then: a lock whose removals name no breaks keeps its expect.json
            out["removal_breaks"] = breaks
        out["baseline_broken"] = sorted({f"{e.parent} {e.requirement}" for e in baseline_broken(plan)})
        kept_excluded = base_kept_excluded(plan, set(pins) | set(conditional))
        if kept_excluded:  # only then: expect.json without such packages is unchanged
            out["base_kept_excluded"] = kept_excluded
    overridden = sorted(p.name for p in plan.packages() if p.override)
    if overridden:
        out["overridden"] = overridden
    return out
