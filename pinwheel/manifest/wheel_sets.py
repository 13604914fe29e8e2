"""Wheel sets: the manifest's install steps of index, local and fallback packages."""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .model import Gate, SharedPin, pinned_version
from .reader import STEP_NAME, Reader

POLICIES = ("fail", "skip", "fallback")
_GLOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+*?-]{0,127}\.whl$")
_ARCH = re.compile(r"^\d+\.\d+a?$")


@dataclass(frozen=True)
class Provenance:
    torch: str | None
    cuda: str | None
    arch_list: tuple[str, ...]


@dataclass(frozen=True)
class LocalWheel:
    glob: str
    built_against: Provenance
    if_missing: str
    how_to_provide: str
    line: int


@dataclass(frozen=True)
class Package:
    requirement: Requirement
    no_deps: bool
    why: str | None
    gate: str | None
    local: LocalWheel | None
    fallback: "Package | None"
    line: int

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str | None:
        return pinned_version(self.requirement)


@dataclass(frozen=True)
class WheelSet:
    name: str
    why: str
    gate: str | None
    packages: tuple[Package, ...]
    line: int


def read_wheel_sets(r: Reader, node: Any, gates: dict[str, Gate]) -> tuple[WheelSet, ...]:
    sets: list[WheelSet] = []
    names: dict[str, int] = {}
    packages: dict[str, tuple[str, int]] = {}
    for i, item in enumerate(r.sequence(node, "wheel_sets", 1)):
        key = f"wheel_sets[{i}]"
        m = r.mapping(item, key, {"name", "why", "gate", "packages"}, {"name", "why", "packages"}).value
        name = r.string(m["name"], f"{key}.name", STEP_NAME, "step name (lowercase letters, digits, '-')")
        if name in names:
            raise r.fail(m["name"].line, f"{key}.name", f"duplicate wheel set name (first on line {names[name]})")
        names[name] = m["name"].line
        gate = r.gate(m.get("gate"), f"{key}.gate", gates)
        pkgs = []
        for j, p in enumerate(r.sequence(m["packages"], f"{key}.packages", 1)):
            pkg = _package(r, p, f"{key}.packages[{j}]", gates, allow_local=True)
            for candidate in (pkg, pkg.fallback):
                if candidate is None:
                    continue
                first = packages.get(candidate.name)
                if first and first[0] != str(candidate.requirement.specifier):
                    raise r.fail(candidate.line, f"{key}.packages[{j}].requirement",
                                 f"{candidate.name} is pinned twice with different versions "
                                 f"({first[0]} on line {first[1]}, {candidate.requirement.specifier} here)")
                if first:
                    raise r.fail(candidate.line, f"{key}.packages[{j}].requirement",
                                 f"{candidate.name} is listed twice (first on line {first[1]})")
                packages[candidate.name] = (str(candidate.requirement.specifier), candidate.line)
            pkgs.append(pkg)
        sets.append(WheelSet(name, r.string(m["why"], f"{key}.why"), gate, tuple(pkgs), item.line))
    return tuple(sets)


def _package(r: Reader, node: Any, key: str, gates: dict[str, Gate], allow_local: bool) -> Package:
    allowed = {"requirement", "no_deps", "why", "gate"} | ({"local", "fallback"} if allow_local else set())
    m = r.mapping(node, key, allowed, {"requirement"}).value
    req = r.requirement(m["requirement"], f"{key}.requirement")
    no_deps = r.boolean(m["no_deps"], f"{key}.no_deps") if "no_deps" in m else False
    why = r.string(m["why"], f"{key}.why") if "why" in m else None
    if no_deps and not why:
        raise r.fail(node.line, f"{key}.why", "every no_deps install must say why")
    local = _local(r, m["local"], f"{key}.local") if "local" in m else None
    if local and not why:
        raise r.fail(node.line, f"{key}.why", "every local wheel must say why")
    fallback = None
    if "fallback" in m:
        if not local:
            raise r.fail(m["fallback"].key_line, f"{key}.fallback", "a fallback needs a local wheel to fall back from")
        fallback = _package(r, m["fallback"], f"{key}.fallback", gates, allow_local=False)
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
    return Package(req, no_deps, why, r.gate(m.get("gate"), f"{key}.gate", gates), local, fallback, node.line)


def _glob_matches_name(glob: str, name: str) -> bool:
    wheel_name = re.sub(r"[-_.]+", "_", name).lower()
    return fnmatch.fnmatchcase(f"{wheel_name}-1.0-py3-none-any.whl", glob.lower()) or \
        glob.lower().startswith(f"{wheel_name}-")


def _local(r: Reader, node: Any, key: str) -> LocalWheel:
    m = r.mapping(node, key, {"glob", "built_against", "if_missing", "how_to_provide"}, {"glob", "if_missing"}).value
    glob = r.string(m["glob"], f"{key}.glob")
    if "/" in glob or ".." in glob or not _GLOB.match(glob):
        raise r.fail(m["glob"].line, f"{key}.glob",
                     f"{glob!r} is not a safe wheel glob: a file name in wheels/ ending in .whl, "
                     "made of letters, digits, '_', '.', '+', '-', '*', '?'")
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


def check_pins_agree(r: Reader, shared: tuple[SharedPin, ...], sets: tuple[WheelSet, ...]) -> None:
    """A package that is also a shared pin must carry the shared pin's version."""
    by_name = {p.name: p for p in shared}
    for i, ws in enumerate(sets):
        for j, pkg in enumerate(ws.packages):
            pin = by_name.get(pkg.name)
            if pin and pin.version != pkg.version:
                raise r.fail(pkg.line, f"wheel_sets[{i}].packages[{j}].requirement",
                             f"pins {pkg.name}=={pkg.version} but the shared pin (line {pin.line}) is =={pin.version}")
