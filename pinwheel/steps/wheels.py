"""Wheel sets: install steps of index, local and fallback packages.

The building block of kind `wheels`:
- manifest: WheelSet, its Packages, each maybe a LocalWheel (a wheel in wheels/,
  under a policy for when it is missing) with its Provenance, read and checked
  here (the values themselves are pinwheel.model.packages'). A package may
  be an `override: true` (with a why): a deliberate replacement that contradicts
  another package's requirement, which the resolver judges `overridden`;
- plan: every package becomes a PlannedPackage (Step.packages);
- effect: it installs its active packages; the resolver reads their metadata
  from the index, or from the local wheel where there is one;
- lock: its index packages form its slice, NN-<step>.txt, and each local
  wheel's fallback its own file;
- partial: templates/steps/wheels.j2, one RUN that installs the slice with
  --no-deps --require-hashes and guards each local wheel, bind-mounting the
  context's wheels/<step>/, which holds only this set's local wheels; with
  parent-free layers that RUN is in a stage of its own ("apart", from the
  venv's skeleton: it installs apart, installs_apart) and the image joins the
  files it added with COPY --link ("join");
- invariant: none of its own; every pin is checked with the whole Python
  environment after the last step (expect.json, Dockerfile.j2).
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from packaging.utils import canonicalize_name

from ..model.manifest import Gate, StepSpec, pinned_version
from ..model.reader import Reader, StepReading
from ..model.packages import AllowMissing, Exclude, LocalWheel, Package, PlannedPackage, Provenance, Verify
from ..model.source import show
from ..smoke import NAMED_CHECKS
from ..workspace import InContext, LockFiles
from .base import ADOPT_PIP_INSTALL, Effect, KindView, StepKind

if TYPE_CHECKING:
    from ..plan import Step

POLICIES = ("fail", "skip", "fallback")
VERIFY_NEEDS = ("cpu", "driver", "gpu")  # where a package's own check runs: the build's invariant, or the smoke
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
NEEDS = ("driver",)  # what a package's modules need to import; without it they import on the CPU at build time
_PROJECT = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$")
_GLOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+*?-]{0,127}\.whl$")
_ARCH = re.compile(r"^\d+\.\d+a?$")


# ---------------------------------------------------------------- manifest


@dataclass(frozen=True)
class WheelSet:
    kind: ClassVar[str] = "wheels"
    # the spec's own answer to "is this a set of index packages?": the manifest asks it, never the kind's name
    is_wheel_set: ClassVar[bool] = True

    name: str
    why: str
    gate: str | None
    packages: tuple[Package, ...]
    line: int



def _package(r: Reader, node: Any, key: str, gates: dict[str, Gate], allow_local: bool,
             indexes: dict | None = None) -> Package:
    allowed = {"requirement", "no_deps", "override", "why", "gate", "allow_missing", "needs", "needs_why",
               "verify", "exclude", "index"} | \
        ({"local", "fallback"} if allow_local else set())
    m = r.mapping(node, key, allowed, {"requirement"}).value
    req = r.requirement(m["requirement"], f"{key}.requirement")
    no_deps = r.boolean(m["no_deps"], f"{key}.no_deps") if "no_deps" in m else False
    override = r.boolean(m["override"], f"{key}.override") if "override" in m else False
    why = r.string(m["why"], f"{key}.why") if "why" in m else None
    if no_deps and not why:
        raise r.fail(node.line, f"{key}.why", "every no_deps install must say why")
    if override and not why:
        raise r.fail(node.line, f"{key}.why", "every override must say why (whose requirement it contradicts, "
                                              "and why that is intended)")
    allow_missing = read_allow_missing(r, m["allow_missing"], f"{key}.allow_missing") if "allow_missing" in m else ()
    if allow_missing and not no_deps and "local" not in m:  # a local wheel is installed --no-deps too
        raise r.fail(m["allow_missing"].key_line, f"{key}.allow_missing",
                     "allow_missing applies to a package installed without its requirements only: no_deps: true, "
                     "or a local wheel (installed --no-deps, its requirements checked as dropped); without either, "
                     "pip installs what is required")
    needs = r.string(m["needs"], f"{key}.needs") if "needs" in m else None
    if needs is not None and needs not in NEEDS:
        raise r.fail(m["needs"].line, f"{key}.needs", f"{needs!r} is not one of: {', '.join(NEEDS)}")
    needs_why = r.string(m["needs_why"], f"{key}.needs_why") if "needs_why" in m else None
    if needs and not needs_why:
        raise r.fail(m["needs"].line, f"{key}.needs_why", "say why its modules cannot import without a driver "
                                                          "(the build skips them with this reason)")
    if needs_why and not needs:
        raise r.fail(m["needs_why"].line, f"{key}.needs_why", "needs_why goes with needs")
    verify = _verify(r, m["verify"], f"{key}.verify") if "verify" in m else None
    exclude = _named_whys(r, m["exclude"], f"{key}.exclude", Exclude, "excluded") if "exclude" in m else ()
    if exclude and (no_deps or "local" in m):
        raise r.fail(m["exclude"].key_line, f"{key}.exclude",
                     "exclude applies to a package whose requirements are resolved (a no_deps or local install "
                     "already drops them all)")
    for i, x in enumerate(exclude):
        if x.name == canonicalize_name(req.name):
            raise r.fail(x.line, f"{key}.exclude[{i}].name", f"{req.name} cannot exclude itself")
    local = _local(r, m["local"], f"{key}.local") if "local" in m else None
    if local and not why:
        raise r.fail(node.line, f"{key}.why", "every local wheel must say why")
    fallback = None
    if "fallback" in m:
        if not local:
            raise r.fail(m["fallback"].key_line, f"{key}.fallback", "a fallback needs a local wheel to fall back from")
        fallback = _package(r, m["fallback"], f"{key}.fallback", gates, allow_local=False, indexes=indexes)
        if fallback.gate:
            raise r.fail(m["fallback"].value["gate"].line, f"{key}.fallback.gate", "a fallback follows its package's gate")
    if local and local.if_missing == "fallback" and not fallback:
        raise r.fail(m["local"].value["if_missing"].line, f"{key}.local.if_missing",
                     "policy 'fallback' needs a 'fallback' package")
    if local and local.if_missing != "fallback" and fallback:
        raise r.fail(m["fallback"].key_line, f"{key}.fallback", f"policy {local.if_missing!r} never uses the fallback")
    if local and not _glob_matches_name(local.glob, req.name):
        raise r.fail(m["local"].value["glob"].line, f"{key}.local.glob",
                     f"{local.glob!r} cannot match wheels of {req.name} (wheel names start with the normalized name)")
    index = None
    if "index" in m:
        named = r.string(m["index"], f"{key}.index")
        if named not in (indexes or {}):
            known = ", ".join(sorted(indexes or {})) or "none: declare it under the top-level `indexes:`"
            raise r.fail(m["index"].line, f"{key}.index", f"no index named {show(named)} (indexes: {known})")
        if local:
            raise r.fail(m["index"].line, f"{key}.index", "a local wheel comes from wheels/, not an index")
        index = (indexes or {})[named]
    return Package(req, no_deps, why, r.gate(m.get("gate"), f"{key}.gate", gates), local, fallback, node.line,
                   override, allow_missing, needs, needs_why, verify, exclude, index)


def _verify(r: Reader, node: Any, key: str) -> Verify:
    m = r.mapping(node, key, {"import", "python", "check", "needs"}).value
    imports = tuple(r.string(x, f"{key}.import[{i}]", _MODULE, "module name (dotted)")
                    for i, x in enumerate(r.sequence(m["import"], f"{key}.import", 1))) if "import" in m else ()
    python = None
    if "python" in m:
        value = m["python"].value
        if not isinstance(value, str) or not value.strip():
            raise r.fail(m["python"].line, f"{key}.python", "must be a non-empty string of Python")
        if len(value) > 4000:
            raise r.fail(m["python"].line, f"{key}.python", "keep the snippet short (at most 4000 characters)")
        try:
            compile(value, f"{key}.python", "exec")
        except SyntaxError as exc:
            raise r.fail(m["python"].line, f"{key}.python", f"not valid Python: {exc.msg} (line {exc.lineno})") from None
        except (RecursionError, MemoryError):  # deeply nested text (thousands of unary minuses) breaks the compiler
            raise r.fail(m["python"].line, f"{key}.python", "nested too deeply for Python to compile") from None
        python = value
    check = None
    if "check" in m:
        check = r.string(m["check"], f"{key}.check")
        if check not in NAMED_CHECKS:
            raise r.fail(m["check"].line, f"{key}.check", f"{check!r} is not a check the smoke payload provides "
                                                          f"(one of: {', '.join(sorted(NAMED_CHECKS))})")
        if imports or python is not None:
            raise r.fail(m["check"].line, f"{key}.check", "a named check stands alone: its own imports are part "
                                                          "of it (drop import and python here)")
    if not imports and python is None and check is None:
        raise r.fail(node.line, key, "say what to check: import (a list of modules) and/or python (a snippet), "
                                     "or check (a check the smoke payload provides)")
    default = NAMED_CHECKS[check]["needs"] if check else "cpu"
    needs = r.string(m["needs"], f"{key}.needs") if "needs" in m else default
    if needs not in VERIFY_NEEDS:
        raise r.fail(m["needs"].line, f"{key}.needs", f"{needs!r} is not one of: {', '.join(VERIFY_NEEDS)}")
    if check and needs != default:
        raise r.fail(m["needs"].line, f"{key}.needs", f"check {check} needs {default}, not {needs}")
    return Verify(imports, python, needs, node.line, check)


def read_allow_missing(r: Reader, node: Any, key: str) -> tuple[AllowMissing, ...]:
    return _named_whys(r, node, key, AllowMissing, "allowed")


def _named_whys(r: Reader, node: Any, key: str, cls, verb: str):
    """A list of {name, why} entries (allow_missing, exclude), each name once."""
    out: list = []
    seen: dict[str, int] = {}
    for i, item in enumerate(r.sequence(node, key, 1)):
        m = r.mapping(item, f"{key}[{i}]", {"name", "why"}, {"name", "why"}).value
        name = canonicalize_name(r.string(m["name"], f"{key}[{i}].name", _PROJECT, "project name"))
        why = r.string(m["why"], f"{key}[{i}].why")
        if name in seen:
            raise r.fail(m["name"].line, f"{key}[{i}].name", f"{name} is {verb} twice (first on line {seen[name]})")
        seen[name] = m["name"].line
        out.append(cls(name, why, item.line))
    return tuple(out)


def _glob_matches_name(glob: str, name: str) -> bool:
    wheel_name = re.sub(r"[-_.]+", "_", name).lower()
    return fnmatch.fnmatchcase(f"{wheel_name}-1.0-py3-none-any.whl", glob.lower()) or \
        glob.lower().startswith(f"{wheel_name}-")


def read_wheel_glob(r: Reader, node: Any, key: str, package: str | None = None) -> str:
    """A glob of wheels in wheels/: one safe file name; with ``package``, one that can match its wheels."""
    glob = r.string(node, key)
    if "/" in glob or ".." in glob or not _GLOB.match(glob):
        raise r.fail(node.line, key,
                     f"{glob!r} is not a safe wheel glob: a file name in wheels/ ending in .whl, "
                     "made of letters, digits, '_', '.', '+', '-', '*', '?'")
    if package is not None and not _glob_matches_name(glob, package):
        raise r.fail(node.line, key, f"{glob!r} cannot match wheels of {package} (wheel names start with the "
                                     "normalized name)")
    return glob


def _local(r: Reader, node: Any, key: str) -> LocalWheel:
    m = r.mapping(node, key, {"glob", "built_against", "if_missing", "how_to_provide"}, {"glob", "if_missing"}).value
    glob = read_wheel_glob(r, m["glob"], f"{key}.glob")
    policy = r.string(m["if_missing"], f"{key}.if_missing")
    if policy not in POLICIES:
        raise r.fail(m["if_missing"].line, f"{key}.if_missing", f"{policy!r} is not one of: {', '.join(POLICIES)}")
    prov = Provenance(None, None, ())
    if "built_against" in m:
        b = r.mapping(m["built_against"], f"{key}.built_against", {"torch", "cuda", "arch_list"}).value
        arch = ()
        if "arch_list" in b:
            arch = tuple(r.string(a, f"{key}.built_against.arch_list[{i}]", _ARCH, "CUDA arch like '9.0'")
                         for i, a in enumerate(r.sequence(b["arch_list"], f"{key}.built_against.arch_list", 1)))
        prov = Provenance(
            torch=r.version(b["torch"], f"{key}.built_against.torch") if "torch" in b else None,
            cuda=r.version(b["cuda"], f"{key}.built_against.cuda") if "cuda" in b else None,
            arch_list=arch,
        )
    how = r.string(m["how_to_provide"], f"{key}.how_to_provide") if "how_to_provide" in m else \
        f"copy a wheel matching {glob} into wheels/"
    return LocalWheel(glob, prov, policy, how, node.line)


# -------------------------------------------------------------------- plan


def _planned(p: Package, active: bool) -> PlannedPackage:
    return PlannedPackage(name=p.name, requirement=str(p.requirement), version=pinned_version(p.requirement),
                          no_deps=p.no_deps, why=p.why, fallback=_planned(p.fallback, active) if p.fallback else None,
                          active=active, package=p)


# ------------------------------------------------------------------ render


@dataclass(frozen=True)
class LocalView:
    package: PlannedPackage
    fallback_lock_file: str | None
    multiple_message: str
    missing_message: str

    def __getattr__(self, name: str):  # the template reads package fields directly
        return getattr(self.package, name)


@dataclass(frozen=True)
class StepView(KindView):
    """A wheel set as its partial reads it: the step's fields, and its local wheels with their messages."""

    spec: WheelSet
    packages: tuple[PlannedPackage | LocalView, ...]  # the step's, each local wheel as its LocalView
    locals: tuple[LocalView, ...]

    @property
    def index_packages(self) -> tuple[PlannedPackage, ...]:
        return self.kind.slice_packages(self.step)

    @property
    def apart_stage(self) -> str:
        """Its stage with parent-free layers: the venv's skeleton and this set's install, nothing else."""
        return f"wheel-set-{self.step.name}"

    @property
    def replaced_message(self) -> str:
        return (f"pinwheel: ERROR: wheel set {self.step.name} removed or replaced files of the venv's skeleton "
                "(it installs pip?); a layer joined with COPY --link cannot remove them: "
                "use image.layers: chained")

    @property
    def wheels_dir(self) -> str:
        """The build context's directory of this set's own local wheels, which its RUN bind-mounts instead of
        all of wheels/: BuildKit keys the mount by that directory's bytes, so another set's changed wheel
        leaves this set's layer cached."""
        return InContext.wheel_set(self.step.name)


def fallback_lock_file(step: Step, package: PlannedPackage) -> str:
    return LockFiles.fallback(step.index, step.name, package.name)


def _local_view(step: Step, p: PlannedPackage) -> LocalView:
    level, missing = p.missing_wheel()
    return LocalView(
        package=p,
        fallback_lock_file=fallback_lock_file(step, p) if p.fallback else None,
        multiple_message=f"pinwheel: ERROR: {p.multiple_wheels()}",
        missing_message=f"pinwheel: {level}: {missing}",
    )


# -------------------------------------------------------------------- kind


class WheelSets(StepKind):
    name = "wheels"
    noun = "wheel set"
    # The lock puts each distribution in exactly one slice, installed --no-deps: no set reads another's files.
    installs_apart = True
    adopts = ADOPT_PIP_INSTALL
    named_by_package = True

    def read(self, node: Any, key: str, reading: StepReading) -> WheelSet:
        r = reading.reader
        m = r.mapping(node, key, {"name", "why", "gate", "packages"} | reading.common_keys,
                      {"name", "why", "packages"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        claimed: dict[str, tuple[str, int]] = reading.claimed(self.name)  # package -> (its pin, its line)
        pkgs = []
        for j, p in enumerate(r.sequence(m["packages"], f"{key}.packages", 1)):
            pkg = _package(r, p, f"{key}.packages[{j}]", reading.gates, allow_local=True, indexes=reading.indexes)
            for candidate in (pkg, pkg.fallback):
                if candidate is None:
                    continue
                first = claimed.get(candidate.name)
                if first and first[0] != str(candidate.requirement.specifier):
                    raise r.fail(candidate.line, f"{key}.packages[{j}].requirement",
                                 f"{candidate.name} is pinned twice with different versions "
                                 f"({first[0]} on line {first[1]}, {candidate.requirement.specifier} here)")
                if first:
                    raise r.fail(candidate.line, f"{key}.packages[{j}].requirement",
                                 f"{candidate.name} is listed twice (first on line {first[1]})")
                claimed[candidate.name] = (str(candidate.requirement.specifier), candidate.line)
            pkgs.append(pkg)
        return WheelSet(name, r.string(m["why"], f"{key}.why"), gate, tuple(pkgs), node.line)

    def check(self, entries: Sequence[tuple[str, StepSpec]], reading: StepReading) -> None:
        """A package that is also a shared pin must carry the shared pin's version."""
        by_name = {p.name: p for p in reading.shared_pins}
        for key, ws in entries:
            assert isinstance(ws, WheelSet)
            for j, pkg in enumerate(ws.packages):
                pin = by_name.get(pkg.name)
                if pin and pin.version != pkg.version:
                    raise reading.reader.fail(pkg.line, f"{key}.packages[{j}].requirement",
                                              f"pins {pkg.name}=={pkg.version} but the shared pin "
                                              f"(line {pin.line}) is =={pin.version}")
        # An excluded requirement the manifest itself installs or pins would be left out and put in at once.
        listed = {q.name: q.line for _key, ws in entries for p in ws.packages  # type: ignore[attr-defined]
                  for q in (p, p.fallback) if q is not None}
        listed.update({p.name: p.line for p in reading.shared_pins if p.name not in listed})
        for key, ws in entries:
            for j, pkg in enumerate(ws.packages):  # type: ignore[attr-defined]
                for i, x in enumerate(pkg.exclude):
                    if x.name in listed:
                        raise reading.reader.fail(x.line, f"{key}.packages[{j}].exclude[{i}].name",
                                                  f"{x.name} is excluded here, but the manifest installs or pins "
                                                  f"it (line {listed[x.name]})")

    def packages(self, spec: StepSpec, gate_on: Mapping[str, bool], active: bool) -> tuple[PlannedPackage, ...]:
        assert isinstance(spec, WheelSet)
        return tuple(_planned(p, active and (gate_on[p.gate] if p.gate else True)) for p in spec.packages)

    def effect(self, step: Step) -> Effect:
        """Its active packages. Resolver.step_packages applies their local-wheel policies (the wheel
        when present, else the fallback, else nothing) and reads each one's metadata."""
        return Effect(installs=tuple(p for p in step.packages if p.active))

    def slice_packages(self, step: Step) -> tuple[PlannedPackage, ...]:
        """Its index packages: the ones its lock slice installs. Local wheels are installed from wheels/."""
        return tuple(p for p in step.packages if not p.local)

    def view(self, step: Step) -> StepView:
        locals_ = tuple(_local_view(step, p) for p in step.packages if p.local)
        by_name = {lv.package.name: lv for lv in locals_}
        return StepView(step, step.spec, self, tuple(by_name.get(p.name, p) for p in step.packages), locals_)


KIND = WheelSets()
