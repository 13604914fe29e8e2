"""Hashed, fully pinned locks per variant, sliced per install step.

For one variant, the lock is one resolve of every package the image installs
from the index, made by pip-compile (pip-tools) or ``uv pip compile``, and then
cut into one slice per wheel set so that each Dockerfile step installs exactly
its own packages with ``pip install --no-deps --require-hashes``::

    images/<image>/lock/<variant>/
        requirements.in                      the resolver's inputs (generated, for review)
        constraints.txt                      shared pins + --no-deps and fallback pins
        requirements.txt                     the whole lock (compile output + --no-deps section)
        NN-<set>.txt                         one slice per step that installs from the index
        NN-<set>.fallback-<pkg>.txt          what a missing local wheel falls back to
        expect.json                          pins and suppressed requirements for the smoke

Why one resolve and constraints: every ``--no-deps`` pin and every shared pin
is a constraint of the resolve, so no step can move what an earlier one set
(flashinfer's ``nvidia-cudnn-frontend>=1.13.0`` resolves to the 1.26.0 that the
``--no-deps`` step installs, not to the newest).

Slicing: a package the manifest lists goes to its own step; any other to the
earliest step whose roots reach it through the locked versions' Requires-Dist
(read for the target python and platform, following requested extras, never
through a ``--no-deps`` package). Every locked package lands in exactly one
slice (or one fallback file), and that is checked.

Staleness: ``requirements.txt`` starts with ``# pinwheel-inputs: <sha256>``, the
digest of everything the lock was made from (:func:`lock_inputs_digest`);
``check_lock`` recomputes it from the manifest alone, without the network.

The resolver runs with pip's and uv's own configuration files and ``PIP_*``
index variables switched off: a lock is made from the index
(``default_index_url()``) only, never from a machine's find-links directory or
extra indexes, and no index URL or machine path lands in the files.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform as host_platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .plan import Plan, PlannedPackage, Step

__all__ = [
    "ENGINES",
    "LOCK_FORMAT",
    "Assignment",
    "Lock",
    "LockCheck",
    "LockError",
    "LockInputs",
    "LockResult",
    "LockSlice",
    "LockUnavailable",
    "LockedPackage",
    "assign_slices",
    "check_lock",
    "lock_dir",
    "lock_inputs",
    "lock_inputs_digest",
    "lock_sha256",
    "lock_variant",
    "parse_requirements",
    "read_lock",
]

# Bump when the lock's layout or the slicing rules change: every lock goes stale.
LOCK_FORMAT = 1
ENGINES = ("pip-compile", "uv")
DEFAULT_ENGINE = "pip-compile"

REQUIREMENTS_IN = "requirements.in"
CONSTRAINTS = "constraints.txt"
REQUIREMENTS = "requirements.txt"
EXPECT = "expect.json"
EXPECT_SCHEMA = 1

INPUTS_HEADER = "# pinwheel-inputs: "
ENGINE_HEADER = "# pinwheel-engine: "

# Environment variables the resolvers may keep (caches, timeouts, TLS); every
# other PIP_*/UV_* variable (index URLs, find-links, constraints) is dropped.
_KEEP_ENV = frozenset({
    "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR", "PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT", "PIP_RETRIES",
    "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_TRUSTED_HOST", "PIP_TOOLS_CACHE_DIR",
    "UV_CACHE_DIR", "UV_NO_CACHE", "UV_HTTP_TIMEOUT", "UV_NATIVE_TLS", "UV_INSECURE_HOST",
    "UV_CONCURRENT_DOWNLOADS",
})


class LockError(Exception):
    """The lock could not be made or read: a resolver failure, an inconsistency."""


class LockUnavailable(LockError):
    """The lock cannot be made here (missing extra index, wrong interpreter, no engine)."""


# ------------------------------------------------------------------- inputs


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
    }


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
    layout = tuple(
        {
            "index": s.index,
            "name": s.name,
            "gate": s.gate,
            "active": s.active,
            "packages": [_package_layout(p) for p in s.packages],
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
    )


def lock_inputs_digest(plan: Plan, engine: str = DEFAULT_ENGINE) -> str:
    """sha256 of the lock's inputs for this Plan and engine (no network)."""
    return lock_inputs(plan, engine).digest()


def lock_dir(root: Path | str, plan: Plan) -> Path:
    """``<root>/images/<image>/lock/<variant>``; root is the manifest's directory."""
    return Path(root) / "images" / plan.image / "lock" / plan.variant.name


# ------------------------------------------------------- requirements files

_REQ_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:\[[^\]]*\])?\s*===?\s*"
    r"(?P<version>[^\s;\\]+)[^\\]*?(?P<cont>\\)?\s*$"
)
_HASH_LINE = re.compile(r"^\s+--hash=(?P<hash>[a-z0-9]+:[0-9a-fA-F]+)\s*(?P<cont>\\)?\s*$")
_OPTION_LINE = re.compile(r"^\s*(-i\s|--index-url|--extra-index-url|-f\s|--find-links|--trusted-host|--no-index)")


@dataclass(frozen=True)
class LockedPackage:
    """One pinned distribution and its hashes, as written in the lock."""

    name: str
    version: str
    hashes: tuple[str, ...]  # "sha256:<hex>", in file order
    text: str  # the requirement line and its --hash lines, exactly as in the files

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class _Entry:
    package: LockedPackage
    start: int  # line index of the requirement line
    end: int  # one past the last line of the block (hash and annotation lines)


def _parse_entries(lines: Sequence[str], where: str) -> list[_Entry]:
    entries: list[_Entry] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _REQ_LINE.match(line)
        if not m or line[:1].isspace():
            i += 1
            continue
        start = i
        block = [line.rstrip()]
        hashes: list[str] = []
        cont = bool(m["cont"])
        i += 1
        while i < len(lines) and lines[i][:1].isspace() and lines[i].strip():
            h = _HASH_LINE.match(lines[i])
            if h and cont:
                hashes.append(h["hash"].lower())
                block.append(lines[i].rstrip())
                cont = bool(h["cont"])
            elif h:
                raise LockError(f"{where}:{i + 1}: --hash line after a line without a continuation")
            i += 1
        name = canonicalize_name(m["name"])
        entries.append(_Entry(LockedPackage(name, m["version"], tuple(hashes), "\n".join(block)), start, i))
    return entries


def parse_requirements(text: str, where: str = "requirements") -> dict[str, LockedPackage]:
    """``name==version`` entries with their hashes from a pip-compile/uv style file."""
    out: dict[str, LockedPackage] = {}
    for e in _parse_entries(text.splitlines(), where):
        if e.package.name in out:
            raise LockError(f"{where}: {e.package.name} appears twice")
        out[e.package.name] = e.package
    return out


def _entry_text(name: str, version: str, hashes: Sequence[str]) -> str:
    if not hashes:
        return f"{name}=={version}"
    lines = [f"{name}=={version} \\"]
    for i, h in enumerate(hashes):
        lines.append(f"    --hash={h}" + (" \\" if i < len(hashes) - 1 else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------- slicing


@dataclass(frozen=True)
class _Unit:
    """A file the Dockerfile installs with --no-deps: a step's slice or a fallback file."""

    file: str
    step: Step
    roots: tuple[PlannedPackage, ...]  # the manifest packages installed from this file
    fallback_for: str | None = None


@dataclass(frozen=True)
class Assignment:
    """Which file installs each locked package, and why it is there."""

    unit_of: dict[str, str]  # package -> file
    reason: dict[str, str]  # package -> "manifest" | "via <root>"
    warnings: tuple[str, ...] = ()


def _units(plan: Plan) -> tuple[list[_Unit], list[_Unit]]:
    from .render import fallback_lock_file

    steps: list[_Unit] = []
    fallbacks: list[_Unit] = []
    for s in plan.steps:
        index_pkgs = [p for p in s.packages if not p.local]
        if index_pkgs:
            steps.append(_Unit(s.lock_file, s, tuple(p for p in index_pkgs if p.active)))
        for p in s.packages:
            if p.local is not None and p.fallback is not None:
                roots = (p.fallback,) if p.active else ()
                fallbacks.append(_Unit(fallback_lock_file(s, p), s, roots, fallback_for=p.name))
    return steps, fallbacks


RequiresFn = Callable[[str, str, frozenset], Iterable[Requirement]]


def _reach(
    roots: Sequence[PlannedPackage],
    versions: Mapping[str, str],
    requires: RequiresFn,
    no_deps: set[str],
    missing: dict[tuple[str, str], str],
) -> dict[str, str]:
    """Every locked package the roots reach -> the root that reached it first (BFS)."""
    reached: dict[str, str] = {}
    walked: dict[str, set[str]] = {}
    queue: deque[tuple[str, frozenset, str]] = deque()
    for r in roots:
        queue.append((r.name, frozenset(canonicalize_name(e) for e in Requirement(r.requirement).extras), r.name))
    while queue:
        name, extras, root = queue.popleft()
        if name not in versions:
            continue
        reached.setdefault(name, root)
        if name in no_deps:
            continue
        done = walked.setdefault(name, set())
        todo = ({""} | set(extras)) - done
        if not todo:
            continue
        done |= todo
        for req in requires(name, versions[name], frozenset(extras)):
            dep = canonicalize_name(req.name)
            if dep not in versions:
                missing.setdefault((name, dep), str(req))
                continue
            queue.append((dep, frozenset(canonicalize_name(e) for e in req.extras), root))
    return reached


def assign_slices(plan: Plan, versions: Mapping[str, str], requires: RequiresFn) -> Assignment:
    """Assign every locked package to exactly one slice or fallback file.

    ``versions`` is the lock (name -> version); ``requires(name, version, extras)``
    gives the requirements that apply on the target for those extras.  A package
    the manifest lists goes to its own step; any other to the earliest step whose
    roots reach it, else to the first fallback file that reaches it.
    """
    versions = {canonicalize_name(k): v for k, v in versions.items()}
    steps, fallbacks = _units(plan)
    no_deps = {p.name for u in steps + fallbacks for p in u.roots if p.no_deps}
    unit_of: dict[str, str] = {}
    reason: dict[str, str] = {}
    for u in steps + fallbacks:
        for p in u.roots:
            if p.name in versions:
                if p.name in unit_of and unit_of[p.name] != u.file:
                    raise LockError(f"{p.name} is listed in both {unit_of[p.name]} and {u.file}")
                unit_of[p.name] = u.file
                reason[p.name] = "manifest"
    missing: dict[tuple[str, str], str] = {}
    for u in steps + fallbacks:
        for name, root in _reach(u.roots, versions, requires, no_deps, missing).items():
            if name not in unit_of:
                unit_of[name] = u.file
                reason[name] = f"via {root}"
    unreached = sorted(set(versions) - set(unit_of))
    if unreached:
        raise LockError(
            f"variant {plan.variant.name}: the lock holds {', '.join(unreached)}, which no step reaches "
            "through the locked dependency graph (a requirement the resolver saw and the target does not?)"
        )
    warnings = tuple(
        f"{parent} requires {req}, which is not in the lock (excluded by a marker for the target?)"
        for (parent, _dep), req in sorted(missing.items())
    )
    return Assignment(unit_of, reason, warnings)


# ------------------------------------------------------------------- engines


def _engine_env(custom_command: str) -> dict[str, str]:
    from .index import ca_bundle

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_")) or k in _KEEP_ENV}
    env.update({
        "PIP_CONFIG_FILE": os.devnull,  # no pip.conf: no find-links, extra indexes, constraints
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONSAFEPATH": "1",  # `python -m piptools` must not import from the cwd
        "CUSTOM_COMPILE_COMMAND": custom_command,
        "UV_CUSTOM_COMPILE_COMMAND": custom_command,
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
    })
    ca = ca_bundle()
    if ca:
        env["PIP_CERT"] = ca
        env["SSL_CERT_FILE"] = ca
    return env


def _uv_bin() -> str:
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if not found:
        raise LockUnavailable("uv is not installed (pip install uv), so --engine uv cannot run")
    return found


def uv_python_platform(platform: str) -> str:
    """uv's --python-platform for a wheel platform tag: manylinux_2_36_x86_64 -> x86_64-manylinux_2_36."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(x86_64|aarch64)", platform)
    if m:
        return f"{m[3]}-manylinux_{m[1]}_{m[2]}"
    m = re.fullmatch(r"musllinux_\d+_\d+_(x86_64|aarch64)", platform)
    if m:
        return f"{m[1]}-unknown-linux-musl"
    raise LockUnavailable(f"uv cannot resolve for platform {platform!r}")


def _check_host_for_pip_compile(plan: Plan) -> None:
    v = plan.variant
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    if host != v.python:
        raise LockUnavailable(
            f"variant {v.name} targets Python {v.python}, but pip-compile resolves for the interpreter it runs "
            f"on (Python {host}). Use `--engine uv`, which resolves for the target's Python and platform, "
            f"or run pinwheel with a Python {v.python} interpreter."
        )
    arch = v.platform.rsplit("_", 1)[-1] if not v.platform.endswith("x86_64") else "x86_64"
    machine = host_platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    if not sys.platform.startswith("linux") or machine != arch:
        raise LockUnavailable(
            f"variant {v.name} targets Linux {arch}, but pip-compile resolves for this host "
            f"({sys.platform} {machine}). Use `--engine uv`, which resolves for the target platform."
        )


def _compile_command(plan: Plan, engine: str, index_url: str, extra_index: str | None, upgrade: bool) -> list[str]:
    v = plan.variant
    if engine == "pip-compile":
        cmd = [
            sys.executable, "-m", "piptools", "compile", "--quiet",
            "--generate-hashes", "--allow-unsafe", "--strip-extras",
            "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host", "--no-emit-options",
            "--no-config", "--newline", "lf",
            "--index-url", index_url,
        ]
    else:
        cmd = [
            _uv_bin(), "pip", "compile", "--quiet", "--no-config", "--no-progress",
            "--generate-hashes",
            "--python-version", v.python, "--python-platform", uv_python_platform(v.platform),
            "--index-url", index_url,
        ]
    if extra_index:
        cmd += ["--extra-index-url", extra_index]
    if upgrade:
        cmd += ["--upgrade"]
    cmd += ["--constraint", CONSTRAINTS, "--output-file", REQUIREMENTS, REQUIREMENTS_IN]
    return cmd


def _redact(text: str, secrets: Iterable[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "<index>")
    return text


# --------------------------------------------------------------- the lock


@dataclass(frozen=True)
class LockSlice:
    """One file the Dockerfile installs with --no-deps --require-hashes."""

    file: str
    step: str
    index: int
    active: bool
    fallback_for: str | None
    packages: tuple[LockedPackage, ...]

    @property
    def versions(self) -> dict[str, str]:
        return {p.name: p.version for p in self.packages}

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.packages]


@dataclass(frozen=True)
class Lock:
    """A variant's lock as committed: read it with :func:`read_lock`."""

    dir: Path
    variant: str
    engine: str
    inputs_digest: str
    packages: dict[str, LockedPackage]  # everything in requirements.txt
    slices: tuple[LockSlice, ...]  # one per step that installs from the index, in step order
    fallbacks: tuple[LockSlice, ...]  # installed only when their local wheel is missing
    expect: dict

    @property
    def versions(self) -> dict[str, str]:
        """name -> version of every package in the lock, fallbacks included."""
        return {n: p.version for n, p in self.packages.items()}

    @property
    def image_versions(self) -> dict[str, str]:
        """name -> version of what the image installs from the index when every local wheel is present."""
        return {p.name: p.version for s in self.slices for p in s.packages}

    def slice_of(self, name: str) -> LockSlice | None:
        name = canonicalize_name(name)
        for s in self.slices + self.fallbacks:
            if name in s.versions:
                return s
        return None

    def sha256(self) -> str:
        return lock_sha256(self.dir)


def lock_sha256(directory: Path | str) -> str:
    """Digest over every file of a variant's lock dir, in sorted order (names and contents)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise LockError(f"{directory} is not a lock directory")
    # Images are labelled with it (io.pinwheel.lock.sha256).
    h = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        h.update(path.relative_to(directory).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


_SLICE_FILE = re.compile(r"^(?P<index>\d{2,})-(?P<step>[a-z0-9][a-z0-9-]*)\.txt$")
_FALLBACK_FILE = re.compile(r"^(?P<index>\d{2,})-(?P<step>[a-z0-9][a-z0-9-]*)\.fallback-(?P<pkg>[a-z0-9][a-z0-9._-]*)\.txt$")


def _header_value(text: str, prefix: str) -> str | None:
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return None


def read_lock(directory: Path | str) -> Lock:
    """Read a variant's committed lock dir into a typed Lock (no network)."""
    directory = Path(directory)
    full = directory / REQUIREMENTS
    try:
        text = full.read_text()
    except OSError as exc:
        raise LockError(f"{full}: cannot read the lock ({exc.strerror})") from None
    digest = _header_value(text, INPUTS_HEADER)
    engine = _header_value(text, ENGINE_HEADER) or DEFAULT_ENGINE
    if not digest:
        raise LockError(f"{full}: no '{INPUTS_HEADER.strip()}' header; regenerate it with `build.py lock`")
    packages = parse_requirements(text, str(full))
    slices: list[LockSlice] = []
    fallbacks: list[LockSlice] = []
    for path in sorted(directory.glob("*.txt")):
        fb = _FALLBACK_FILE.match(path.name)
        sm = _SLICE_FILE.match(path.name)
        if not fb and not sm:
            continue
        m = fb or sm
        assert m is not None
        body = path.read_text()
        pkgs = parse_requirements(body, str(path))
        for name, p in pkgs.items():
            whole = packages.get(name)
            if whole is None or whole.version != p.version or whole.hashes != p.hashes:
                raise LockError(f"{path}: {p.pin} does not match {REQUIREMENTS}")
        active = "# gated off" not in body.lower()
        item = LockSlice(path.name, m["step"], int(m["index"]), active, fb["pkg"] if fb else None, tuple(pkgs.values()))
        (fallbacks if fb else slices).append(item)
    try:
        expect = json.loads((directory / EXPECT).read_text())
    except (OSError, ValueError) as exc:
        raise LockError(f"{directory / EXPECT}: cannot read ({exc})") from None
    variant = expect.get("variant") if isinstance(expect, dict) else None
    return Lock(
        dir=directory,
        variant=variant or directory.name,
        engine=engine,
        inputs_digest=digest,
        packages=packages,
        slices=tuple(slices),
        fallbacks=tuple(fallbacks),
        expect=expect,
    )


def _expected_files(plan: Plan) -> list[str]:
    steps, fallbacks = _units(plan)
    return [REQUIREMENTS, EXPECT] + [u.file for u in steps + fallbacks]


@dataclass(frozen=True)
class LockCheck:
    variant: str
    status: str  # "ok" | "stale" | "missing"
    detail: str
    needs_env: str | None = None  # the extra index variable a missing lock needs


def check_lock(plan: Plan, root: Path | str, engine: str | None = None) -> LockCheck:
    """Is the committed lock of this Plan made from its current inputs? No network."""
    d = lock_dir(root, plan)
    name = plan.variant.name
    full = d / REQUIREMENTS
    if not full.exists():
        return LockCheck(name, "missing", f"no lock at {full.relative_to(Path(root)).as_posix()}",
                         plan.variant.torch_index_env)
    text = full.read_text()
    recorded = _header_value(text, INPUTS_HEADER)
    used = engine or _header_value(text, ENGINE_HEADER) or DEFAULT_ENGINE
    if used not in ENGINES:
        return LockCheck(name, "stale", f"made with unknown engine {used!r}")
    want = lock_inputs_digest(plan, used)
    if recorded is None:
        return LockCheck(name, "stale", f"{full.name} has no pinwheel-inputs header (not made by `build.py lock`)")
    if recorded != want:
        return LockCheck(name, "stale", f"inputs changed (lock {str(recorded)[:12]}, manifest {want[:12]}, {used})")
    absent = [f for f in _expected_files(plan) if not (d / f).exists()]
    if absent:
        return LockCheck(name, "stale", f"missing {', '.join(absent)}")
    return LockCheck(name, "ok", f"up to date ({used}, inputs {want[:12]})")


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


class _Indexes:
    """The default index, then the variant's extra index: metadata and file listings for the target."""

    def __init__(self, clients: Sequence, plan: Plan):
        self.clients = list(clients)
        self.python = plan.target.python
        self.platforms = [plan.target.platform]
        self.environment = plan.target.marker_environment()
        self._meta: dict[tuple[str, str], object] = {}

    def metadata(self, name: str, version: str):
        from .index import IndexClientError

        key = (name, version)
        if key not in self._meta:
            errors = []
            for c in self.clients:
                try:
                    self._meta[key] = c.metadata(name, version, self.python, self.platforms)
                    break
                except IndexClientError as exc:
                    errors.append(str(exc))
            else:
                raise LockError(f"metadata of {name}=={version} for the target: " + "; ".join(errors))
        return self._meta[key]

    def prefetch(self, pins: Mapping[str, str]) -> None:
        from .index import IndexClientError

        if not self.clients:
            return
        got = self.clients[0].metadata_many(pins.items(), self.python, self.platforms)
        for (name, version), meta in got.items():
            if not isinstance(meta, IndexClientError):
                self._meta[(str(name), pins[str(name)])] = meta

    def requires(self, name: str, version: str, extras: frozenset) -> list[Requirement]:
        return self.metadata(name, version).requirements(extras, self.environment)

    def hashes(self, name: str, version: str) -> list[str]:
        from .index import IndexClientError

        want = Version(version)
        found: set[str] = set()
        for c in self.clients:
            try:
                files = c.files(name)
            except IndexClientError:
                continue
            for f in files:
                if f.version == want:
                    if not f.sha256:
                        raise LockError(f"{f.filename}: the index lists no sha256 for it, so it cannot be hash-pinned")
                    found.add(f"sha256:{f.sha256.lower()}")
        if not found:
            raise LockError(f"{name}=={version}: no files of that version on the index")
        return sorted(found)


def _slice_header(plan: Plan, unit: _Unit) -> list[str]:
    s = unit.step
    total = len(plan.steps)
    where = f"wheel set {s.index}/{total} ({s.name}) of variant {plan.variant.name}, image {plan.image}"
    if unit.fallback_for:
        lines = [f"# pinwheel lock: fallback for {unit.fallback_for} in {where}.",
                 f"# Installed only when its local wheel is missing, with: pip install --no-deps --require-hashes -r {unit.file}"]
    else:
        lines = [f"# pinwheel lock slice: {where}.",
                 f"# Installed with: pip install --no-deps --require-hashes -r {unit.file}"]
    lines.append("# Generated by `build.py lock` with requirements.txt; every locked package is in exactly one file.")
    if not s.active:
        lines.append(f"# Gated off for this variant ({s.gate}=0): this step installs nothing.")
    elif not unit.roots:
        what = f"{unit.fallback_for} is" if unit.fallback_for else "every package of this step is"
        lines.append(f"# Gated off for this variant: {what} gated off, so nothing is installed from here.")
    return lines


def _format_unit(plan: Plan, unit: _Unit, entries: Sequence[LockedPackage], reason: Mapping[str, str]) -> str:
    lines = _slice_header(plan, unit)
    no_deps = {p.name: p for p in unit.roots if p.no_deps}
    for e in entries:
        lines.append(e.text)
        r = reason.get(e.name, "")
        if e.name in no_deps:
            lines.append(f"    # --no-deps: {no_deps[e.name].why}")
        elif r.startswith("via "):
            lines.append(f"    # reached from {r[4:]}")
    return "\n".join(lines) + "\n"


def _postprocess_compile(
    text: str,
    no_deps_in_lock: Mapping[str, PlannedPackage],
    secrets: Sequence[str],
) -> list[str]:
    """The compile output without option lines, with a `# --no-deps: why` under such packages."""
    lines = [l.rstrip("\n") for l in text.splitlines() if not _OPTION_LINE.match(l)]
    out = list(lines)
    for e in reversed(_parse_entries(lines, REQUIREMENTS)):
        p = no_deps_in_lock.get(e.package.name)
        if p is not None:
            out.insert(e.end, f"    # --no-deps: {p.why}")
    joined = "\n".join(out)
    for s in secrets:
        if s and s in joined:
            raise LockError("the resolver wrote an index URL into the lock; refusing to write it")
    return out


def lock_variant(
    plan: Plan,
    root: Path | str,
    *,
    engine: str = DEFAULT_ENGINE,
    index_url: str | None = None,
    upgrade: bool = False,
    clients: Sequence | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> LockResult:
    """Resolve, hash, slice and write the lock of one variant under ``root``.

    Raises LockUnavailable when it cannot be made here (extra index variable
    unset, pip-compile on an interpreter other than the target's, no engine)
    and LockError when the resolver fails or the result is inconsistent.
    """
    from .index import IndexClient, default_index_url

    started = time.monotonic()
    root = Path(root)
    v = plan.variant
    if engine not in ENGINES:
        raise LockUnavailable(f"unknown lock engine {engine!r} (engines: {', '.join(ENGINES)})")
    extra_index = None
    if v.torch_index_env:
        extra_index = v.torch_index_url()
        if not extra_index:
            raise LockUnavailable(f"{v.torch_index_unset()}: set it (the index URL) and run "
                                  f"`build.py lock --variant {v.name}` again")
    if engine == "pip-compile":
        _check_host_for_pip_compile(plan)
    index_url = index_url or default_index_url()
    inputs = lock_inputs(plan, engine)
    digest = inputs.digest()
    out_dir = lock_dir(root, plan)
    custom = f"python build.py lock --variant {v.name}" + (f" --engine {engine}" if engine != DEFAULT_ENGINE else "")

    # 1. resolve, in a scratch dir with relative names so annotations carry no paths
    with tempfile.TemporaryDirectory(prefix="pinwheel-lock-") as tmp:
        work = Path(tmp)
        (work / REQUIREMENTS_IN).write_text(_inputs_file(plan, inputs))
        (work / CONSTRAINTS).write_text(_constraints_file(plan, inputs))
        previous = out_dir / REQUIREMENTS
        if previous.exists() and not upgrade:
            shutil.copyfile(previous, work / REQUIREMENTS)  # keep earlier pins where they still fit
        cmd = _compile_command(plan, engine, index_url, extra_index, upgrade)
        log(f"{v.name}: resolving with {engine}")
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, env=_engine_env(custom), capture_output=True, text=True)
        compile_seconds = time.monotonic() - t0
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-40:])
            raise LockError(f"variant {v.name}: {engine} failed (exit {proc.returncode}):\n"
                            + _redact(tail, [index_url, extra_index or ""]))
        compiled = (work / REQUIREMENTS).read_text()
        requirements_in = (work / REQUIREMENTS_IN).read_text()
        constraints_txt = (work / CONSTRAINTS).read_text()

    resolved = parse_requirements(compiled, f"{engine} output")
    for name, p in resolved.items():
        if not p.hashes:
            raise LockError(f"variant {v.name}: {engine} wrote {p.pin} without hashes")

    # 2. the --no-deps packages and fallbacks: pinned as given, hashes from the index listing
    if clients is None:
        clients = [IndexClient(index_url)] + ([IndexClient(extra_index)] if extra_index else [])
    indexes = _Indexes(clients, plan)
    steps, fallbacks = _units(plan)
    no_deps_roots = {p.name: p for u in steps + fallbacks for p in u.roots if p.no_deps}
    fallback_roots = {p.name: (p, u) for u in fallbacks for p in u.roots}
    appended: dict[str, LockedPackage] = {}
    for name, p in list(no_deps_roots.items()) + [(n, pu[0]) for n, pu in fallback_roots.items()]:
        version = p.version
        if version is None:
            raise LockError(f"{p.requirement}: --no-deps packages and fallbacks must be exact pins")
        if name in resolved:
            if Version(resolved[name].version) != Version(version):
                raise LockError(f"variant {v.name}: {engine} resolved {resolved[name].pin}, but {p.requirement} "
                                "is installed later: the constraint did not hold")
            continue
        if name in appended:
            continue
        hashes = indexes.hashes(name, version)
        appended[name] = LockedPackage(name, version, tuple(hashes), _entry_text(name, version, hashes))
    locked = {**resolved, **appended}
    versions = {n: p.version for n, p in locked.items()}

    # 3. slice along the locked dependency graph, read for the target
    log(f"{v.name}: reading metadata of {len(versions)} packages for the target")
    indexes.prefetch({n: ver for n, ver in versions.items() if n not in no_deps_roots})
    assignment = assign_slices(plan, versions, indexes.requires)
    by_unit: dict[str, list[LockedPackage]] = {u.file: [] for u in steps + fallbacks}
    order = list(resolved) + list(appended)
    for name in order:
        by_unit[assignment.unit_of[name]].append(locked[name])
    counted = sorted(n for pkgs in by_unit.values() for n in (p.name for p in pkgs))
    assert counted == sorted(locked), "every locked package must be in exactly one slice"

    # 4. requirements.txt: header, compile output, the --no-deps/fallback section
    no_deps_in_resolve = {n: p for n, p in no_deps_roots.items() if n in resolved}
    body = _postprocess_compile(compiled, no_deps_in_resolve, [index_url, extra_index or ""])
    head = [
        f"# pinwheel lock of variant {v.name} (image {plan.image}): Python {v.python}, {v.platform}, CUDA {v.cuda}.",
        f"# Generated by `{custom}` from {plan.manifest_path}; do not edit.",
        f"{INPUTS_HEADER}{digest}",
        f"{ENGINE_HEADER}{engine}",
    ]
    tail: list[str] = []
    if appended:
        tail += ["", "# ---- installed with --no-deps (or as a fallback): pinned by the manifest, not resolved;",
                 "# their hashes are every file of that version on the index."]
        for name, pkg in appended.items():
            tail.append(pkg.text)
            p = no_deps_roots.get(name) or fallback_roots[name][0]
            if name in fallback_roots:
                u = fallback_roots[name][1]
                tail.append(f"    # fallback for {u.fallback_for}: installed when its local wheel is missing")
            if p.no_deps:
                tail.append(f"    # --no-deps: {p.why}")
    full_text = "\n".join(head + body + tail).rstrip("\n") + "\n"
    if parse_requirements(full_text).keys() != locked.keys():
        raise LockError("internal: requirements.txt does not hold exactly the locked packages")

    # 5. expect.json
    expect = _expect(plan, by_unit, fallbacks, no_deps_roots, indexes)

    # 6. write everything at once
    files: dict[str, str] = {
        REQUIREMENTS_IN: requirements_in,
        CONSTRAINTS: constraints_txt,
        REQUIREMENTS: full_text,
        EXPECT: json.dumps(expect, indent=2, sort_keys=True) + "\n",
    }
    for u in steps + fallbacks:
        files[u.file] = _format_unit(plan, u, by_unit[u.file], assignment.reason)
    for name, text in files.items():
        for s in (index_url, extra_index):
            if s and s in text:
                raise LockError(f"{name} would contain an index URL; refusing to write it")
    _write_dir(out_dir, files)
    return LockResult(
        variant=v.name,
        engine=engine,
        dir=out_dir,
        inputs_digest=digest,
        packages=len(locked),
        slices={u: [p.name for p in pkgs] for u, pkgs in by_unit.items()},
        compile_seconds=compile_seconds,
        total_seconds=time.monotonic() - started,
        warnings=assignment.warnings,
    )


def _inputs_file(plan: Plan, inputs: LockInputs) -> str:
    lines = [f"# pinwheel: what variant {plan.variant.name} installs from the index with its dependencies",
             "# (generated from the manifest by `build.py lock`; do not edit)."]
    return "\n".join(lines + list(inputs.requirements)) + "\n"


def _constraints_file(plan: Plan, inputs: LockInputs) -> str:
    lines = [f"# pinwheel: constraints of variant {plan.variant.name}: the shared pins, and what later steps",
             "# install with --no-deps or as fallbacks, so that no step moves an earlier one's pin.",
             "# (generated from the manifest by `build.py lock`; extras stripped: constraints carry none)."]
    return "\n".join(lines + list(inputs.constraints)) + "\n"


def _expect(plan: Plan, by_unit: Mapping[str, list[LockedPackage]], fallbacks: Sequence[_Unit],
            no_deps_roots: Mapping[str, PlannedPackage], indexes: _Indexes) -> dict:
    fallback_files = {u.file for u in fallbacks}
    pins: dict[str, str] = {}
    conditional: dict[str, str] = {}
    for file, pkgs in by_unit.items():
        target = conditional if file in fallback_files else pins
        for p in pkgs:
            target[p.name] = p.version
    suppressed: dict[str, list[str]] = {}
    for name, p in sorted(no_deps_roots.items()):
        assert p.version is not None
        meta = indexes.metadata(name, p.version)
        suppressed[name] = [str(r) for r in meta.requires_dist] + list(meta.invalid_requires)
    return {
        "schema": EXPECT_SCHEMA,
        "variant": plan.variant.name,
        "pins": dict(sorted(pins.items())),
        "suppressed": suppressed,
        # installed only when the local wheel they stand in for is missing: not checked as pins
        "fallbacks": dict(sorted(conditional.items())),
    }


def _write_dir(out_dir: Path, files: Mapping[str, str]) -> None:
    """Replace the lock dir with exactly these files (no stale slices survive)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.new-"))
    try:
        for name, text in files.items():
            (stage / name).write_text(text)
            os.chmod(stage / name, 0o644)
        os.chmod(stage, 0o755)
        old = None
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old-"))
            os.rmdir(old)
            os.replace(out_dir, old)
        os.replace(stage, out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
