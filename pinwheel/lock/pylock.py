"""The variant's lock in the standard format (PEP 751): `pylock.<variant>.toml`, written by `lock`.

Every package of the committed lock, with every file its hashes allow (name, URL, size, sha256, as the
index lists them), the target's environment, and in `[packages.tool.pinwheel]` why it is pinned: the
install step (slice) it is in, the manifest's reason, `--no-deps` and what it was reached from. The
document is built as packaging's `Pylock` (which validates it against the specification) and written
with tomli-w. The file names the index's URLs, so it lives beside the build outputs
(Workspace.pylock_file), not in the committed lock, which names no index.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Mapping

import tomli_w
from packaging.pylock import Package, PackageSdist, PackageWheel, Pylock, PylockValidationError
from packaging.markers import Marker
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..index import IndexClientError
from ..plan import Plan
from ..workspace import Workspace
from .format import LockError, StaleLockHashes
from .read import Lock, read_lock

CREATED_BY = "pinwheel"
_ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(?P<version>\S+)")
_REASON = re.compile(r"^\s+# (?P<text>.+)$")


def slice_reasons(lock: Lock) -> dict[str, dict[str, str]]:
    """name -> {"step", "lock-file", "reason"}: where each package is installed, and the comment its
    slice gives for it (`--no-deps: ...`, `reached from ...`)."""
    out: dict[str, dict[str, str]] = {}
    for part in lock.slices + lock.fallbacks:
        current = None
        for line in (lock.dir / part.file).read_text().splitlines():
            entry = _ENTRY.match(line)
            if entry:
                current = canonicalize_name(entry["name"])
                out.setdefault(current, {"step": part.step, "lock-file": part.file})
                if part.fallback_for:
                    out[current]["fallback-for"] = part.fallback_for
                continue
            comment = _REASON.match(line)
            if current and comment and not comment["text"].startswith("pinwheel lock slice"):
                out[current]["reason"] = comment["text"]
    return out


def manifest_reasons(plan: Plan) -> dict[str, str]:
    """The manifest's `why` of every package it names (shared pins first, a wheel set's entry over it)."""
    reasons: dict[str, str] = {}
    for pkg in plan.packages():
        if pkg.why:
            reasons[pkg.name] = pkg.why
        if pkg.fallback and pkg.fallback.why:
            reasons[pkg.fallback.name] = pkg.fallback.why
    return reasons


def environment_marker(plan: Plan) -> Marker:
    env = plan.target.marker_environment()
    return Marker(f'sys_platform == "{env["sys_platform"]}" and platform_machine == "{env["platform_machine"]}" '
                  f'and python_version == "{env["python_version"]}"')


def make_pylock(plan: Plan, lock: Lock, files: Mapping[str, Iterable]) -> Pylock:
    """The Pylock of ``lock``: ``files`` maps each locked name to the index files listed for it
    (IndexFile: filename, url, sha256, size). Raises LockError when a locked hash has no file."""
    why = manifest_reasons(plan)
    where = slice_reasons(lock)
    packages = []
    for name in sorted(lock.packages):
        locked = lock.packages[name]
        want = {h.removeprefix("sha256:") for h in locked.hashes}
        version = Version(locked.version)
        wheels, sdist = [], None
        for f in files.get(name, ()):
            if f.version != version or not f.sha256 or f.sha256.lower() not in want:
                continue
            if f.is_wheel:
                wheels.append(PackageWheel(name=f.filename, url=f.url, size=f.size, hashes={"sha256": f.sha256.lower()}))
            else:
                sdist = PackageSdist(name=f.filename, url=f.url, size=f.size, hashes={"sha256": f.sha256.lower()})
        found = {w.hashes["sha256"] for w in wheels} | ({sdist.hashes["sha256"]} if sdist else set())
        if want - found:
            raise StaleLockHashes(f"{name}=={locked.version}: {len(want - found)} locked hash(es) match no file on the "
                                  f"index (e.g. sha256:{sorted(want - found)[0]}); run `build.py lock --refresh`")
        tool = {k: v for k, v in {**where.get(name, {}), "why": why.get(name, "")}.items() if v}
        packages.append(Package(name=canonicalize_name(name), version=version, sdist=sdist,
                                wheels=sorted(wheels, key=lambda w: w.name or "") or None,
                                tool={"pinwheel": tool} if tool else None))
    return Pylock(
        lock_version=Version("1.0"), created_by=CREATED_BY, environments=[environment_marker(plan)],
        requires_python=SpecifierSet(f"=={plan.target.python}.*"), packages=packages,
        tool={"pinwheel": {"image": plan.image, "variant": plan.variant.name, "platform": plan.container_platform,
                           "lock-inputs": lock.inputs_digest, "engine": lock.engine}},
    )


def render(pylock: Pylock) -> str:
    """TOML text, validated (packaging's own check against the specification) before it is written."""
    try:
        pylock.validate()
    except PylockValidationError as exc:
        raise LockError(f"the PEP 751 lock is not valid: {exc}") from None
    return tomli_w.dumps(pylock.to_dict())


def write_pylock(plan: Plan, root: Path, indexes: Iterable) -> Path:
    """`pylock.<variant>.toml` of ``plan``'s committed lock, its files read from ``indexes`` (IndexClients)."""
    ws = Workspace(Path(root), plan.image)
    lock = read_lock(ws.plan_lock_dir(plan))
    indexes = list(indexes)
    files: dict[str, list] = {}
    for name in lock.packages:
        for index in indexes:
            try:
                files.setdefault(name, []).extend(index.files(name))
            except IndexClientError:
                continue
    text = render(make_pylock(plan, lock, files))
    path = ws.pylock_file(plan.variant.name, plan.platform_arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
