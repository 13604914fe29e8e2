"""What a resolve reads besides requirements.in and constraints.txt, and what the lock says of it: the
overrides (uv's --override: packages marked `override: true`) with the edges they contradict, and the
pyproject.toml a resolve with named indexes compiles (uv applies a package's explicit index to a project's
dependencies, not to a requirements file)."""
from __future__ import annotations

from typing import Mapping

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..plan import Plan, PlannedPackage
from ..resolve import reads_base, requirement_text
from .format import entry_text, parse_entries
from .inputs import LockInputs, base_kept

# The project file a resolve with named indexes reads: uv applies a package's index (explicit: that
# package comes only from it) to a pyproject.toml's dependencies, not to a requirements file.
PROJECT = "pyproject.toml"


def named_indexes(plan: Plan) -> dict[str, PlannedPackage]:
    """name -> package, of each active package the manifest names to an index."""
    return {p.name: p for p in plan.packages() if getattr(p, "index", None) is not None}


def project_file(plan: Plan, inputs: LockInputs) -> str:
    """pyproject.toml of the resolve: the requirements, each named package's index, the indexes (explicit)."""
    import tomli_w

    named = named_indexes(plan)
    indexes = {p.index.name: p.index for p in named.values()}
    doc = {
        "project": {"name": "pinwheel-lock", "version": "0", "dependencies": list(inputs.requirements)},
        "tool": {"uv": {
            "sources": {name: {"index": p.index.name} for name, p in sorted(named.items())},
            "index": [{"name": i.name, "url": i.url, "explicit": True, **({"format": "flat"} if i.flat else {})}
                      for _, i in sorted(indexes.items())],
        }},
    }
    return tomli_w.dumps(doc)


def page_pins(plan: Plan) -> set[str]:
    """The packages the manifest names to a find-links page (an index with `flat: true`)."""
    return {name for name, p in named_indexes(plan).items() if p.index.flat}


def with_page_hashes(compiled: str, names: set[str], hashes_of, where: str) -> str:
    """The resolver's output with hashes for those of ``names`` it pinned without: uv hashes no file of a
    find-links page it reads over HTTP. Each gets every file of its version the page lists, by the sha256 of
    its link (hashes_of(name, version)); one the page gives none for is refused there."""
    lines = compiled.splitlines()
    for e in reversed(parse_entries(lines, where)):
        if e.package.name in names and not e.package.hashes:
            text = entry_text(e.package.name, e.package.version, hashes_of(e.package.name, e.package.version))
            lines[e.start:e.start + 1] = text.splitlines()
    return "\n".join(lines) + "\n"


def overrides_file(plan: Plan, inputs: LockInputs) -> str:
    lines = [f"# pinwheel: overrides of variant {plan.variant.name}: packages the manifest marks `override: true`.",
             "# Every other requirement on them gives way to these pins (uv's --override); each overridden",
             "# edge is named in expect.json (overridden_edges) and in the report.",
             "# (generated from the manifest by `build.py lock`; do not edit)."]
    return "\n".join(lines + list(inputs.overrides)) + "\n"


def overridden_edges(plan: Plan, pins: Mapping[str, str], indexes) -> list[str]:
    """"parent requirement" of each locked requirement an override contradicts on purpose: what the build's
    pip check may report, and nothing else about those packages."""
    overridden = {p.name for p in plan.packages() if p.override and p.active}
    if not overridden:
        return []
    extras = {p.name: frozenset(Requirement(p.requirement).extras) for p in plan.packages()}
    # what the image holds: the slices' pins, and on a base with packages the base's kept ones (their
    # metadata is the inventory's), whose requirements an override contradicts just the same
    held = {**(base_kept(plan) if reads_base(plan) else {}), **pins}
    edges = set()
    for name, version in sorted(held.items()):
        for r in indexes.requires(name, version, extras.get(name, frozenset())):
            dep = canonicalize_name(r.name)
            if dep in overridden and dep in pins and not r.specifier.contains(pins[dep], prereleases=True):
                edges.add(f"{name} {requirement_text(r)}")
    return sorted(edges)
