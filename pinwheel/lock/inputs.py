"""What a lock is made from, and its digest: the lock is stale when any of it changes.

``requirements.txt`` starts with ``# pinwheel-inputs: <sha256>``, the digest of
everything the lock was made from; ``check_lock`` recomputes it from the
manifest alone, without the network.

On a base that already holds a Python environment, the committed inventory is
an input too: its identity and content join the digest (a changed base makes
the lock stale), and every base package is a constraint at its installed
version unless the manifest asks for another version or a step removes it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..plan import Plan, PlannedPackage
from ..resolve.base import base_distributions, reads_base
from ..resolve.resolver import exclusions
from ..steps import kind_of
from .format import DEFAULT_ENGINE, ENGINES, LockError

# Bump when the lock's layout or the slicing rules change: every lock goes stale.
LOCK_FORMAT = 1


def _strip_extras(requirement: str) -> str:
    req = Requirement(requirement)
    req.extras = set()
    return str(req)


def _pin(p: PlannedPackage) -> str:
    return _strip_extras(p.requirement)


@dataclass(frozen=True)
class LockInputs:
    """Everything a lock is made from; its digest marks the lock stale when any of it changes."""

    variant: str
    python: str
    platform: str
    cuda: str
    torch: str
    extra_index_env: str | None
    engine: str
    requirements: tuple[str, ...]
    constraints: tuple[str, ...]
    layout: tuple[dict, ...]
    base: dict | None = None  # environment base / system site packages: the inventory's identity and digest
    files: str | None = None  # "target-only": a variant that lists its platforms hashes only its own files
    installer: str = "pip"  # uv: the lock pins uv too (installer.txt)
    overrides: tuple[str, ...] = ()  # the requirements of packages marked override: uv's --override

    def document(self) -> dict:
        return {
            "format": LOCK_FORMAT,
            "variant": self.variant,
            "target": {"python": self.python, "platform": self.platform, "cuda": self.cuda, "torch": self.torch},
            "extra_index_env": self.extra_index_env,
            "engine": self.engine,
            "requirements": list(self.requirements),
            "constraints": list(self.constraints),
            "steps": list(self.layout),
            **({"base": self.base} if self.base is not None else {}),
            **({"files": self.files} if self.files is not None else {}),
            **({"installer": self.installer} if self.installer != "pip" else {}),
            **({"overrides": list(self.overrides)} if self.overrides else {}),
        }

    def digest(self) -> str:
        text = json.dumps(self.document(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _package_layout(p: PlannedPackage) -> dict:
    return {
        "name": p.name,
        "requirement": p.requirement,
        "active": p.active,
        "no_deps": p.no_deps,
        "why": p.why if p.no_deps else None,
        "local": p.local is not None,
        "fallback": _package_layout(p.fallback) if p.fallback else None,
        # what expect.json lets the image leave unmet, with its why (absent otherwise, so older digests hold)
        **({"allow_missing": sorted([a.name, a.why] for a in p.allow_missing)} if getattr(p, "allow_missing", ()) else {}),
        **({"needs": [p.needs, p.needs_why]} if getattr(p, "needs", None) else {}),  # expect.json import_skip
        **({"exclude": sorted([x.name, x.why] for x in p.exclude)} if getattr(p, "exclude", ()) else {}),
        **({"override": p.why} if getattr(p, "override", False) else {}),  # overrides.txt and expect.json
        **({"index": [p.index.name, p.index.url, p.index.flat]} if getattr(p, "index", None) else {}),
        **({"verify": {"import": list(v.imports), "python": v.python, "needs": v.needs,
                       **({"check": v.check} if v.check else {})}}
           if (v := getattr(p, "verify", None)) else {}),  # expect.json verify
    }


def removed_names(plan: Plan) -> set[str]:
    """Every package an active step removes."""
    return {canonicalize_name(n) for s in plan.steps if s.active for n in kind_of(s).effect(s).removes}


def stays_removed(plan: Plan) -> set[str]:
    """Every package an active step removes that no later step installs again (a wheel set's package, a
    local wheel, or what a source step builds)."""
    out: set[str] = set()
    for s in plan.steps:
        if not s.active:
            continue
        out -= _installed_by(s)
        out |= {canonicalize_name(n) for n in kind_of(s).effect(s).removes}
    return out


def _installed_by(step) -> set[str]:
    effect = kind_of(step).effect(step)
    return ({p.name for p in step.packages if p.active} | {p.name for p in effect.installs}
            | {d.name for d in effect.direct})


def manifest_wants(plan: Plan) -> dict[str, list[Requirement]]:
    """name -> what the manifest itself asks of it: its packages' requirements, the shared pins, and the
    version each source step builds."""
    out: dict[str, list[Requirement]] = {}
    for s in plan.steps:
        if s.active:
            for d in kind_of(s).effect(s).direct:
                out.setdefault(d.name, []).append(Requirement(f"{d.name}=={d.version}"))
    for p in plan.packages():
        out.setdefault(p.name, []).append(Requirement(p.requirement))
        if p.fallback is not None and p.local is not None:
            out.setdefault(p.fallback.name, []).append(Requirement(p.fallback.requirement))
    for name, version in plan.shared_pins.items():
        out.setdefault(name, []).append(Requirement(f"{name}=={version}"))
    return out


def base_kept_excluded(plan: Plan, installed_by_steps: frozenset[str] | set[str] = frozenset()) -> dict[str, dict]:
    """The packages a manifest `exclude:` leaves out that the base already holds, and no step installs:
    name -> {"version": the base's, "excluded_on": [the packages that exclude it]}.

    `exclude` suppresses an edge; it installs and removes nothing. So a base that holds the excluded
    package keeps it, and the lock and the report name it; a `remove` step is how to drop it."""
    kept = base_kept(plan)
    out: dict[str, dict] = {}
    for parent, names in sorted(exclusions(plan).items()):
        for name in sorted(names):
            if name in kept and name not in installed_by_steps:
                out.setdefault(name, {"version": kept[name], "excluded_on": []})["excluded_on"].append(parent)
    return out


def base_kept(plan: Plan) -> dict[str, str]:
    """name -> version of the base packages the image keeps as they are: neither removed by a step nor
    asked for at another version by the manifest. They are the lock's constraints and in no slice."""
    wants = manifest_wants(plan)
    removed = removed_names(plan)
    out = {}
    for name, d in sorted(base_distributions(plan).items()):
        if name in removed:
            continue
        if all(r.specifier.contains(d.version, prereleases=True) for r in wants.get(name, ())):
            out[name] = d.version
    return out


def inventory_identity(plan: Plan) -> dict | None:
    """What of the base's inventory the lock depends on; None for a variant that does not read its base."""
    if not reads_base(plan):
        return None
    inv = plan.resolution.base_inventory
    if inv is None:
        return {"inventory": None}
    text = json.dumps(inv.to_json(), sort_keys=True, separators=(",", ":"))
    return {"image_id": inv.image_id, "digest": inv.digest, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def lock_inputs(plan: Plan, engine: str = DEFAULT_ENGINE) -> LockInputs:
    """The resolver inputs of a Plan: requirements (step order), constraints, layout."""
    if engine not in ENGINES:
        raise LockError(f"unknown lock engine {engine!r} (engines: {', '.join(ENGINES)})")
    requirements: list[str] = []
    constraints: dict[str, str] = {}
    for name, version in plan.shared_pins.items():
        constraints.setdefault(name, f"{name}=={version}")
    for p in plan.packages():
        if p.local is None and not p.no_deps:
            requirements.append(p.requirement)
        elif p.local is None:
            constraints.setdefault(p.name, _pin(p))
        fb = p.fallback
        if p.local is not None and fb is not None:
            constraints.setdefault(fb.name, _pin(fb))
            if not fb.no_deps:
                requirements.append(fb.requirement)
    # The base's packages are preferences, not constraints (the resolver keeps them where they still fit):
    # a move the manifest forces is resolved, sliced and reported by name, never made impossible.
    layout = tuple(
        {
            "index": s.index,
            "name": s.name,
            "gate": s.gate,
            "active": s.active,
            "packages": [_package_layout(p) for p in s.packages],
            **({"removes": sorted(r)} if (r := kind_of(s).effect(s).removes) else {}),
            **({"kind": s.kind, **part} if (part := kind_of(s).lock_part(s)) else {}),  # e.g. a patch's sha256
        }
        for s in plan.steps
    )
    v = plan.variant
    return LockInputs(
        variant=v.name,
        python=v.python,
        platform=v.platform,
        cuda=v.cuda,
        torch=v.torch,
        extra_index_env=v.torch_index_env,
        engine=engine,
        requirements=tuple(requirements),
        constraints=tuple(constraints.values()),
        layout=layout,
        base=inventory_identity(plan),
        files="target-only" if v.platforms else None,
        installer=plan.installer,
        overrides=tuple(_pin(p) for p in plan.packages() if p.override and p.active),
    )


def lock_inputs_digest(plan: Plan, engine: str = DEFAULT_ENGINE) -> str:
    """sha256 of the lock's inputs for this Plan and engine (no network)."""
    return lock_inputs(plan, engine).digest()

