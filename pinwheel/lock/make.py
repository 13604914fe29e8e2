"""Making a lock: one resolve by pip-compile or uv, hashes for the --no-deps pins, slices, files.

For one variant, the lock is one resolve of every package the image installs
from the index, then cut into one slice per wheel set (see ``slicing``). Every
``--no-deps`` pin and every shared pin is a constraint of the resolve, so no
step can move what an earlier one set.

The resolver runs (engines.py) with pip's and uv's own configuration files
and ``PIP_*`` index variables switched off: a lock is made from the index
(``default_index_url()``) and the variant's extra index only, never from a
machine's find-links directory, and no index URL or machine path lands in the
files. The directory is replaced whole (swap.py).

On a base that already holds a Python environment (``environment: base``, or a
venv with ``system_site_packages``) the lock is made against the base's
committed inventory: every base package the manifest keeps is a constraint at
its installed version, and is in no slice (the base already has it); a base
package the manifest asks for at another version is resolved and sliced like
any other, and replaces the base's. ``expect.json`` then also says what the
build's invariant checks about the base (see ``_expect``).
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..index import IndexClient, IndexClientError, RoutedSource, default_index_url, metadata_source
from ..plan import Plan, PlannedPackage
from ..resolve import (InventorySource, base_distributions, classify_requirements, reads_base,
                       requirement_text, with_inventory)
from ..resolve.resolver import exclusions
from ..workspace import LockFiles, Workspace
from .engines import Compiled, check_host_for_pip_compile, compile_lock, uv_version
from .platform_files import for_target, keep_target_hashes, per_platform
from .format import (
    DEFAULT_ENGINE,
    ENGINE_HEADER,
    ENGINES,
    INPUTS_HEADER,
    with_resolution_digest,
    OPTION_LINE,
    LockedPackage,
    LockError,
    LockUnavailable,
    entry_text,
    parse_entries,
    parse_requirements,
)
from .expect import derived_expect
from .inputs import LockInputs, base_kept, lock_inputs
from .overrides import named_indexes, overridden_edges, overrides_file, page_pins, with_page_hashes
from .slicing import Assignment, Unit, assign_slices, reached, slice_text, units
from .swap import recover_swap, write_dir


# ------------------------------------------------------------------ making


@dataclass(frozen=True)
class LockResult:
    variant: str
    engine: str
    dir: Path
    inputs_digest: str
    packages: int
    slices: dict[str, list[str]]  # file -> package names
    compile_seconds: float
    total_seconds: float
    warnings: tuple[str, ...] = ()



class _ForTarget:
    """The Plan's metadata source, asked for the target's python and platform; answers remembered."""

    def __init__(self, source: RoutedSource, plan: Plan):
        self.source = source
        self.plan = plan
        self.python = plan.target.python
        self.platforms = [plan.target.platform]
        self.environment = plan.target.marker_environment()
        self._meta: dict[tuple[str, str], object] = {}
        self.named = frozenset(p.name for p in plan.packages() if getattr(p, "index", None) is not None)

    def metadata(self, name: str, version: str):
        key = (name, version)
        if key not in self._meta:
            try:
                self._meta[key] = self.source.metadata(name, version, self.python, self.platforms)
            except IndexClientError as exc:
                raise LockError(f"metadata of {name}=={version} for the target: {exc}") from None
        return self._meta[key]

    def prefetch(self, pins: Mapping[str, str]) -> None:
        got = self.source.metadata_many(pins.items(), self.python, self.platforms)
        for (name, version), meta in got.items():
            if not isinstance(meta, IndexClientError):
                self._meta[(str(name), pins[str(name)])] = meta

    def requires(self, name: str, version: str, extras: frozenset) -> list[Requirement]:
        return self.metadata(name, version).requirements(extras, self.environment)

    def hashes(self, name: str, version: str) -> list[str]:
        """Every file of that version on every index pip sees: pip with --require-hashes may take any of them.
        For a variant that lists its platforms, only the files its target can install."""
        want = Version(version)
        found: set[str] = set()
        fits = for_target(self.plan) if per_platform(self.plan) else (lambda _f: True)
        routed = getattr(self.source, "routes", {}).get(name) if name in self.named else None
        for index in ([routed] if routed is not None and not isinstance(routed, str) else self.source.indexes):
            try:
                files = index.files(name)
            except IndexClientError:
                continue
            for f in files:
                if f.version == want and fits(f):
                    if not f.sha256:
                        raise LockError(f"{f.filename}: the index lists no sha256 for it, so it cannot be hash-pinned")
                    found.add(f"sha256:{f.sha256.lower()}")
        if not found:
            raise LockError(f"{name}=={version}: no files of that version on the index")
        return sorted(found)


def _postprocess_compile(
    text: str,
    no_deps_in_lock: Mapping[str, PlannedPackage],
    secrets: Sequence[str],
    from_base: frozenset[str] = frozenset(),
) -> list[str]:
    """The compile output without option lines, with a `# --no-deps: why` under such packages, and
    without the packages the base already holds (``from_base``)."""
    lines = [l.rstrip("\n") for l in text.splitlines() if not OPTION_LINE.match(l)]
    out = list(lines)
    for e in reversed(parse_entries(lines, LockFiles.REQUIREMENTS)):
        if e.package.name in from_base:
            del out[e.start:e.end]
            continue
        p = no_deps_in_lock.get(e.package.name)
        if p is not None:
            out.insert(e.end, f"    # --no-deps: {p.why}")
    joined = "\n".join(out)
    for s in secrets:
        if s and s in joined:
            raise LockError("the resolver wrote an index URL into the lock; refusing to write it")
    return out


def _installer_file(plan: Plan, indexes: "_ForTarget") -> str:
    """installer.txt: uv at the version that made the lock, every file of it hashed."""
    version = uv_version()
    hashes = indexes.hashes("uv", version)
    lines = [
        f"# pinwheel lock: the installer, uv {version} (no variant named: variants share its stage).",
        "# Installed in a stage of its own with: pip install --no-deps --require-hashes -r "
        f"{LockFiles.INSTALLER}; every install",
        "# step bind-mounts its binary from there, so uv is in no layer of the image.",
        entry_text("uv", version, hashes),
    ]
    return "\n".join(lines) + "\n"


def lock_variant(
    plan: Plan,
    root: Path | str,
    *,
    engine: str = DEFAULT_ENGINE,
    index_url: str | None = None,
    upgrade: bool = False,
    refresh: bool = False,
    source: RoutedSource | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> LockResult:
    """Resolve, hash, slice and write the lock of one variant under ``root``.

    Raises LockUnavailable when it cannot be made here (extra index variable
    unset, pip-compile on an interpreter other than the target's, no engine)
    and LockError when the resolver fails or the result is inconsistent.
    """
    started = time.monotonic()
    ws = Workspace(Path(root), plan.image)
    v = plan.variant
    plan, kept, extra_index, inputs, named = _lockable(plan, root, engine)
    index_url = index_url or default_index_url()
    digest = inputs.digest()
    out_dir = ws.plan_lock_dir(plan)
    recover_swap(ws.lock_dir(v.name), log)  # the variant's own directory holds the other platforms' ones
    recover_swap(out_dir, log)
    custom = f"python build.py lock --variant {v.name}" + (f" --engine {engine}" if engine != DEFAULT_ENGINE else "")

    # 1. resolve, in a scratch dir with relative names so annotations carry no paths
    run = compile_lock(plan, engine, inputs, index_url=index_url, extra_index=extra_index, upgrade=upgrade,
                       named=bool(named), kept=kept, previous=out_dir / LockFiles.REQUIREMENTS, custom=custom, log=log,
                       refresh=refresh)
    compiled, resolved, indexes = _read_compiled(plan, engine, run.text, source, kept, index_url, ws.index_cache)

    # 2. the --no-deps packages and fallbacks: pinned as given, hashes from the index listing
    roots = _Roots.of(plan)
    appended = _pinned_as_given(plan, engine, roots, resolved, kept, indexes)
    kept, from_base = _base_kept_as_is(resolved, kept)
    resolved = {n: p for n, p in resolved.items() if n not in from_base}

    # 3. slice along the locked dependency graph, read for the target, without the manifest's exclusions
    sliced = _slice(plan, engine, roots, compiled, resolved, appended, kept, indexes, log)

    # 4. requirements.txt: header, compile output, the --no-deps/fallback section
    full_text = _requirements_txt(plan, engine, custom, digest, roots, sliced, appended, kept, from_base,
                                  [index_url, extra_index or ""])

    # 5. expect.json
    expect = _expect(plan, sliced.by_unit, roots.fallbacks, roots.no_deps, indexes, sliced.excluded)
    for name, kept_by_base in expect.get("base_kept_excluded", {}).items():
        log(f"{v.name}: the base keeps {name} {kept_by_base['version']} (excluded on "
            f"{', '.join(kept_by_base['excluded_on'])}, but exclude removes nothing): a `remove` step drops it")

    # 6. write everything at once
    write_dir(out_dir, _lock_files(plan, inputs, run, full_text, expect, roots, sliced, indexes,
                                   (index_url, extra_index)))
    return LockResult(variant=v.name, engine=engine, dir=out_dir, inputs_digest=digest, packages=len(sliced.locked),
                      slices={u: [p.name for p in pkgs] for u, pkgs in sliced.by_unit.items()},
                      compile_seconds=run.seconds, total_seconds=time.monotonic() - started,
                      warnings=sliced.assignment.warnings)


def _base_kept_as_is(resolved: Mapping[str, LockedPackage],
                     kept: Mapping[str, str]) -> tuple[dict[str, str], frozenset[str]]:
    """The base packages that stay as the base has them, and those of them the resolve locked too (they go in
    no slice). A base package the resolve moved is not kept: it is sliced, and reported."""
    moved = {n for n, p in resolved.items() if n in kept and Version(kept[n]) != Version(p.version)}
    kept = {n: ver for n, ver in kept.items() if n not in moved}
    from_base = frozenset(n for n, p in resolved.items() if n in kept and Version(kept[n]) == Version(p.version))
    return kept, from_base


def _read_compiled(plan: Plan, engine: str, compiled: str, source: RoutedSource | None, kept: Mapping[str, str],
                   index_url: str, index_cache: Path):
    """The resolver's output (for a variant with platforms: only its own platform's files in the hashes),
    what it locked, and the metadata source (``source``, else the index's) asked for the target."""
    resolved = parse_requirements(compiled, f"{engine} output")
    from_pages = page_pins(plan)  # hashed below from the page's own links
    for name, p in resolved.items():
        if not p.hashes and name not in from_pages:
            raise LockError(f"variant {plan.variant.name}: {engine} wrote {p.pin} without hashes")
    if source is None:
        source = metadata_source(plan, IndexClient(index_url, cache_dir=index_cache))
    if kept:  # the base's own packages: their metadata is the inventory's
        source = InventorySource(source, base_distributions(plan))
    indexes = _ForTarget(source, plan)
    if any(not resolved[n].hashes for n in from_pages if n in resolved):
        compiled = with_page_hashes(compiled, from_pages, indexes.hashes, f"{engine} output")
        resolved = parse_requirements(compiled, f"{engine} output")
    if per_platform(plan):  # one lock per platform: only its own files in the hashes
        compiled = keep_target_hashes(compiled, plan, source.indexes)
        resolved = parse_requirements(compiled, f"{engine} output")
    return compiled, resolved, indexes


def _lockable(plan: Plan, root: Path | str, engine: str):
    """What a lock of ``plan`` by ``engine`` is made from, or LockUnavailable why it cannot be made here: the
    plan (with its base's inventory), the base packages that stay (constraints, in no slice), the extra index,
    the lock's inputs, and the packages that come from named indexes."""
    v = plan.variant
    if reads_base(plan) and plan.resolution.base_inventory is None:
        plan = with_inventory(plan, root)
    if reads_base(plan) and plan.resolution.base_inventory is None:
        raise LockUnavailable(f"variant {v.name} installs on its base's environment, and its base has no "
                              f"inventory: run `build.py base inventory --variant {v.name}` first")
    kept = base_kept(plan)  # base packages that stay: constraints, in no slice
    if engine not in ENGINES:
        raise LockUnavailable(f"unknown lock engine {engine!r} (engines: {', '.join(ENGINES)})")
    extra_index = None
    if v.torch_index_env:
        extra_index = v.torch_index_url()
        if not extra_index:
            raise LockUnavailable(f"{v.torch_index_unset()}: set it (the index URL) and run "
                                  f"`build.py lock --variant {v.name}` again")
    inputs = lock_inputs(plan, engine)
    named = named_indexes(plan)
    if engine == "pip-compile" and named:
        raise LockUnavailable(f"variant {v.name} takes {', '.join(sorted(named))} from named indexes only, and "
                              "pip-compile has no per-package index: lock it with `--engine uv`")
    if engine == "pip-compile" and inputs.overrides:
        raise LockUnavailable(f"variant {v.name} overrides {', '.join(inputs.overrides)} on purpose (override: "
                              "true), and pip-compile has no overrides: lock it with `--engine uv`")
    if engine == "pip-compile":
        check_host_for_pip_compile(plan)
    return plan, kept, extra_index, inputs, named


@dataclass(frozen=True)
class _Roots:
    """The lock's units (one per step that installs from the index, one per fallback), and the packages the
    manifest pins as given: the --no-deps ones, and the fallbacks (each with its unit)."""
    steps: list[Unit]
    fallbacks: list[Unit]
    no_deps: dict[str, PlannedPackage]
    fallback: dict[str, tuple[PlannedPackage, Unit]]

    @classmethod
    def of(cls, plan: Plan) -> _Roots:
        steps, fallbacks = units(plan)
        return cls(steps, fallbacks, {p.name: p for u in steps + fallbacks for p in u.roots if p.no_deps},
                   {p.name: (p, u) for u in fallbacks for p in u.roots})


def _pinned_as_given(plan: Plan, engine: str, roots: _Roots, resolved: Mapping[str, LockedPackage],
                     kept: Mapping[str, str], indexes: _ForTarget) -> dict[str, LockedPackage]:
    """The --no-deps packages and fallbacks the resolve did not lock (nor the base holds), hashed from the
    index listing; LockError where the resolve moved one off its pin."""
    appended: dict[str, LockedPackage] = {}
    for name, p in list(roots.no_deps.items()) + [(n, pu[0]) for n, pu in roots.fallback.items()]:
        version = p.version
        if version is None:
            raise LockError(f"{p.requirement}: --no-deps packages and fallbacks must be exact pins")
        if name in kept and Version(kept[name]) == Version(version):
            continue  # the base already holds it
        if name in resolved:
            if Version(resolved[name].version) != Version(version):
                raise LockError(f"variant {plan.variant.name}: {engine} resolved {resolved[name].pin}, but "
                                f"{p.requirement} is installed later: the constraint did not hold")
            continue
        if name in appended:
            continue
        hashes = indexes.hashes(name, version)
        appended[name] = LockedPackage(name, version, tuple(hashes), entry_text(name, version, hashes))
    return appended


@dataclass(frozen=True)
class _Sliced:
    """The lock after the manifest's exclusions: the resolver's output and what it resolved, every locked
    package, and which unit's slice installs each one."""
    compiled: str
    resolved: dict[str, LockedPackage]
    locked: dict[str, LockedPackage]
    excluded: Mapping[str, Mapping[str, str]]
    assignment: Assignment
    by_unit: dict[str, list[LockedPackage]]


def _slice(plan: Plan, engine: str, roots: _Roots, compiled: str, resolved: dict[str, LockedPackage],
           appended: dict[str, LockedPackage], kept: Mapping[str, str], indexes: _ForTarget,
           log: Callable[[str], None]) -> _Sliced:
    """Every locked package in exactly one slice, along the locked dependency graph read for the target,
    without the edges the manifest excludes (and the packages only they reach)."""
    v = plan.variant
    locked = {**resolved, **appended}
    versions = {n: p.version for n, p in locked.items()}
    log(f"{v.name}: reading metadata of {len(versions)} packages for the target")
    indexes.prefetch({n: ver for n, ver in versions.items() if n not in roots.no_deps})
    excluded = exclusions(plan)
    requires = indexes.requires
    if excluded:
        requires = _without(indexes.requires, excluded)
        left_out = _left_out(plan, versions, indexes.requires, requires, excluded)
        if left_out:
            log(f"{v.name}: left out on purpose: {', '.join(sorted(left_out))}")
            compiled = _drop_entries(compiled, left_out, f"{engine} output")
            resolved = {n: p for n, p in resolved.items() if n not in left_out}
            locked = {**resolved, **appended}
            versions = {n: p.version for n, p in locked.items()}
    assignment = assign_slices(plan, versions, requires, provided=kept)
    by_unit: dict[str, list[LockedPackage]] = {u.file: [] for u in roots.steps + roots.fallbacks}
    order = sorted(resolved) + list(appended)  # by name: the same slices whichever engine resolved
    for name in order:
        by_unit[assignment.unit_of[name]].append(locked[name])
    counted = sorted(n for pkgs in by_unit.values() for n in (p.name for p in pkgs))
    assert counted == sorted(locked), "every locked package must be in exactly one slice"
    return _Sliced(compiled, resolved, locked, excluded, assignment, by_unit)


def _requirements_txt(plan: Plan, engine: str, custom: str, digest: str, roots: _Roots, sliced: _Sliced,
                      appended: Mapping[str, LockedPackage], kept: Mapping[str, str], from_base: frozenset[str],
                      secrets: Sequence[str]) -> str:
    """requirements.txt: its header, the resolver's output, and the --no-deps/fallback section."""
    v = plan.variant
    no_deps_in_resolve = {n: p for n, p in roots.no_deps.items() if n in sliced.resolved}
    body = _postprocess_compile(sliced.compiled, no_deps_in_resolve, secrets, from_base)
    head = [
        f"# pinwheel lock of variant {v.name} (image {plan.image}): Python {v.python}, {v.platform}, CUDA {v.cuda}.",
        f"# Generated by `{custom}` from {plan.manifest_path}; do not edit.",
        f"{INPUTS_HEADER}{digest}",
        f"{ENGINE_HEADER}{engine}",
    ]
    if kept:
        head += [f"# On the base's environment ({plan.resolution.base_inventory.image if plan.resolution.base_inventory else v.base}): "
                 f"{len(kept)} of its packages are constraints and installed by no slice (expect.json base_unchanged)."]
    tail: list[str] = []
    if appended:
        tail += ["", "# ---- installed with --no-deps (or as a fallback): pinned by the manifest, not resolved;",
                 "# their hashes are every file of that version on the index."]
        for name, pkg in appended.items():
            tail.append(pkg.text)
            p = roots.no_deps.get(name) or roots.fallback[name][0]
            if name in roots.fallback:
                u = roots.fallback[name][1]
                tail.append(f"    # fallback for {u.fallback_for}: installed when its local wheel is missing")
            if p.no_deps:
                tail.append(f"    # --no-deps: {p.why}")
    full_text = with_resolution_digest("\n".join(head + body + tail).rstrip("\n") + "\n")
    if parse_requirements(full_text).keys() != sliced.locked.keys():
        raise LockError("internal: requirements.txt does not hold exactly the locked packages")
    return full_text


def _lock_files(plan: Plan, inputs: LockInputs, run: Compiled, full_text: str, expect: dict, roots: _Roots,
                sliced: _Sliced, indexes: _ForTarget, secrets: Sequence[str | None]) -> dict[str, str]:
    """Every file of the lock directory, by name; LockError where one would hold an index URL (``secrets``)."""
    files: dict[str, str] = {
        LockFiles.REQUIREMENTS_IN: run.requirements_in,
        LockFiles.CONSTRAINTS: run.constraints,
        LockFiles.REQUIREMENTS: full_text,
        LockFiles.EXPECT: json.dumps(expect, indent=2, sort_keys=True) + "\n",
        **({LockFiles.OVERRIDES: overrides_file(plan, inputs)} if inputs.overrides else {}),
    }
    for u in roots.steps + roots.fallbacks:
        files[u.file] = slice_text(plan, u, sliced.by_unit[u.file], sliced.assignment.reason)
    if plan.installer == "uv":
        files[LockFiles.INSTALLER] = _installer_file(plan, indexes)
    for name, text in files.items():
        for s in secrets:
            if s and s in text:
                raise LockError(f"{name} would contain an index URL; refusing to write it")
    return files


def _without(requires: Callable, excluded: Mapping[str, Mapping[str, str]]) -> Callable:
    """requires(name, version, extras) without the edges the manifest excludes."""
    def filtered(name: str, version: str, extras: frozenset) -> list[Requirement]:
        drop = excluded.get(name, {})
        return [r for r in requires(name, version, extras) if canonicalize_name(r.name) not in drop]
    return filtered


def _left_out(plan: Plan, versions: Mapping[str, str], requires: Callable, without: Callable,
              excluded: Mapping[str, Mapping[str, str]]) -> set[str]:
    """The resolved packages that only the excluded edges reach: the excluded ones and what only they need.

    An exclusion must name a requirement its package has for the target, and nothing else in the image may
    need the excluded package: either is a LockError naming it.
    """
    extras = {p.name: frozenset(canonicalize_name(e) for e in Requirement(p.requirement).extras)
              for p in plan.packages()}
    for parent, names in sorted(excluded.items()):
        if parent not in versions:
            continue
        has = {canonicalize_name(r.name) for r in requires(parent, versions[parent], extras.get(parent, frozenset()))}
        for name in sorted(set(names) - has):
            raise LockError(f"{parent} {versions[parent]} does not require {name} for this target, so its "
                            f"exclude entry has nothing to leave out: remove it from the manifest")
    left_out = reached(plan, versions, requires) - reached(plan, versions, without)
    for parent, names in sorted(excluded.items()):
        for name in sorted(names):
            if name in versions and name not in left_out:
                raise LockError(f"{name} is excluded on {parent}, but another package in the image requires it "
                                f"too: exclude it there as well, or drop the exclusion")
    return left_out


def _drop_entries(text: str, names: set[str], where: str) -> str:
    """The resolver's output without these packages' entries and without `# via` lines naming them."""
    lines = text.splitlines()
    for e in reversed(parse_entries(lines, where)):
        if e.package.name in names:
            del lines[e.start:e.end]
    via = re.compile(r"^\s*#\s+(?:via\s+)?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*$")
    kept = [l for l in lines if not ((m := via.match(l)) and canonicalize_name(m["name"]) in names)]
    return "\n".join(kept) + "\n"


def _expect(plan: Plan, by_unit: Mapping[str, list[LockedPackage]], fallbacks: Sequence[Unit],
            no_deps_roots: Mapping[str, PlannedPackage], indexes: _ForTarget,
            excluded: Mapping[str, Mapping[str, str]] | None = None) -> dict:
    """expect.json: what the build's invariant checks after the last step.

    Always: ``pins`` (every package a slice installs, at its locked version),
    ``suppressed`` (each --no-deps package's Requires-Dist) and ``fallbacks``.

    ``dropped``: ``{name: {"requires": [req], "allow_missing": {name: why}}}``, for
    each --no-deps package with base requirements (no extra, or an extra it
    requests; marker true for the target; written without the marker): the
    build fails on any one the image leaves unmet (absent, or at a version
    outside its specifier) unless the manifest allows it. Absent when no
    --no-deps package has one.

    ``import_skip``: ``{name: why}``, the packages the manifest marks ``needs:
    driver``: the build's CPU import check skips their modules with that
    reason. Absent when none is marked.

    ``verify``: ``{name: {import: [module], python: snippet|null, needs:
    cpu|driver|gpu}}``, each package's own check from the manifest: cpu ones
    run in the build's invariant, driver and gpu ones in the smoke; ``check``
    (only when set) names a check the payload provides. Absent when no
    package declares one.

    On a base that already holds a Python environment, also (only then, so a
    venv variant's file is unchanged):

    - ``base_unchanged``: ``{name: version}``, every base package the manifest
      did not change, at its inventory version;
    - ``removed``: ``[name]``, every package a remove step takes out that no
      later slice installs again: the build checks it is gone;
    - ``baseline_broken``: ``["<parent> <requirement>"]``, the requirements
      already broken in the base alone (``base-broken`` in the report), the
      findings ``pip check`` may report without the image being at fault;
    - ``base_kept_excluded``: ``{name: {version, excluded_on}}``, packages an
      ``exclude:`` leaves out that the base already holds: kept (exclude
      removes nothing; a remove step does), and named. Absent when none;
    - ``overridden``: ``[name]``, packages the manifest installs with
      ``override: true``, and ``overridden_edges``: ``["<parent>
      <requirement>"]``, each locked requirement their pins contradict on
      purpose: the build's pip check accepts exactly those findings on them.
    """
    fallback_files = {u.file for u in fallbacks}
    pins: dict[str, str] = {}
    conditional: dict[str, str] = {}
    for file, pkgs in by_unit.items():
        target = conditional if file in fallback_files else pins
        for p in pkgs:
            target[p.name] = p.version
    suppressed, dropped = _suppressed(plan, no_deps_roots, indexes)
    excluded_out = _suppressed_by_exclusion(plan, pins, excluded or {}, indexes, suppressed)
    out = derived_expect(plan, pins, conditional)
    assert out.get("excluded", {}) == excluded_out
    out["suppressed"] = suppressed
    if dropped:
        out["dropped"] = dropped
    if out.get("overridden"):  # the edges each override contradicts: read from the index's metadata
        out["overridden_edges"] = overridden_edges(plan, pins, indexes)
    return out


def _suppressed(plan: Plan, no_deps_roots: Mapping[str, PlannedPackage],
                indexes: _ForTarget) -> tuple[dict[str, list[str]], dict[str, dict]]:
    """expect.json's ``suppressed`` (each --no-deps package's Requires-Dist) and ``dropped`` (its base
    requirements for the target, with the manifest's allow_missing)."""
    suppressed: dict[str, list[str]] = {}
    dropped: dict[str, dict] = {}
    env = plan.target.marker_environment()
    for name, p in sorted(no_deps_roots.items()):
        assert p.version is not None
        meta = indexes.metadata(name, p.version)
        suppressed[name] = [str(r) for r in meta.requires_dist] + list(meta.invalid_requires)
        base = [requirement_text(a.requirement)
                for a in classify_requirements(meta, env, Requirement(p.requirement).extras)
                if a.active and not a.marker_excluded]
        if base:
            dropped[name] = {"requires": base, "allow_missing": {a.name: a.why for a in p.allow_missing}}
    return suppressed, dropped


def _suppressed_by_exclusion(plan: Plan, pins: Mapping[str, str], excluded: Mapping[str, Mapping[str, str]],
                             indexes: _ForTarget, suppressed: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """An excluded requirement is suppressed on purpose: pip check may report it, nothing else. Adds each to
    ``suppressed``; returns the exclusions of the packages a slice installs (expect.json's ``excluded``)."""
    excluded_out: dict[str, dict[str, str]] = {}
    for name, names in sorted(excluded.items()):
        version = pins.get(name)
        if version is None:
            continue
        p = next(q for q in plan.packages() if q.name == name)
        for r in indexes.requires(name, version, frozenset(Requirement(p.requirement).extras)):
            if canonicalize_name(r.name) in names:
                suppressed.setdefault(name, []).append(requirement_text(r))
        excluded_out[name] = dict(sorted(names.items()))
    return excluded_out
