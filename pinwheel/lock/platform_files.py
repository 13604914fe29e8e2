"""Which files of a locked version a platform's lock may name.

A variant without ``platforms:`` keeps every file of each version in its hashes,
as pip with --require-hashes may take any of them. A variant that lists its
platforms gets one lock per platform, and each names only the files that
platform can install (its wheels, and sdists): no x86_64 wheel in an aarch64
lock, and the other way round.
"""
from __future__ import annotations

from typing import Iterable

from packaging.version import Version

from ..index.target import target_tags
from ..plan import Plan
from .format import LockError, parse_entries

# Recorded in the lock's inputs of such a variant, so a lock made before `platforms:` was added is stale.
TARGET_FILES = "target-only"


def per_platform(plan: Plan) -> bool:
    """Whether this Plan's lock names only its platform's files (the variant lists its platforms)."""
    return bool(plan.variant.platforms)


def for_target(plan: Plan):
    """A predicate on index files: can the Plan's target install this one?"""
    tags = frozenset(target_tags(plan.target.python, plan.target.platforms()))
    return lambda f: not f.is_wheel or bool(f.tags & tags)


def target_hashes(plan: Plan, indexes: Iterable, name: str, version: str) -> set[str]:
    """sha256:<hex> of every file of name==version on the indexes that the target can install."""
    want = Version(version)
    fits = for_target(plan)
    found: set[str] = set()
    for index in indexes:
        try:
            files = index.files(name)
        except Exception:  # an index without the project: the others may have it
            continue
        for f in files:
            if f.version == want and f.sha256 and fits(f):
                found.add(f"sha256:{f.sha256.lower()}")
    return found


def keep_target_hashes(text: str, plan: Plan, indexes: Iterable) -> str:
    """The resolver's output with only the target's files in each entry's --hash lines.

    A package with no file for the target is a LockError naming it and the platform.
    """
    indexes = list(indexes)
    lines = text.splitlines()
    missing: list[str] = []
    for e in reversed(parse_entries(lines, "resolver output")):
        p = e.package
        if not p.hashes:
            continue
        keep = target_hashes(plan, indexes, p.name, p.version)
        hashes = [h for h in p.hashes if h in keep]
        if not hashes:
            missing.append(p.pin)
            continue
        block = [lines[e.start]] + [f"    --hash={h}" + (" \\" if i < len(hashes) - 1 else "")
                                    for i, h in enumerate(hashes)]
        lines[e.start:e.start + 1 + len(p.hashes)] = block
    if missing:
        raise LockError(f"no file for {plan.container_platform} ({plan.target.platform}, Python "
                        f"{plan.target.python}) on the index: {', '.join(sorted(missing))}")
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")
