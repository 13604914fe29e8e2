"""The torch-ABI classification of each wheel an image installs, cached by the wheel's sha256.

Results live in ``Workspace.abi_cache`` as ``<sha256>-<classifier>.json``: keyed
by the wheel's sha256 and a hash of the classifier's source (``elf.py``), so a
changed classifier never reads stale results. Index wheels are downloaded into
``Workspace.wheel_cache`` to be classified; pure-Python wheels never are. A warm
run opens no wheel. ``pinwheel report`` and ``pinwheel bump`` both read it.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from packaging.utils import canonicalize_name

from ..fsutil import atomic_write, sha256_file
from ..index import IndexClient, IndexClientError
from ..plan import Installed, Plan, PlannedPackage
from ..steps import built_in_image
from ..workspace import Workspace
from . import elf
from .elf import ElfAbi, WheelAbi, classify_wheel


def classifier_key() -> str:
    """A short hash of the classifier's source: cached results die with a classifier change."""
    try:
        return hashlib.sha256(Path(elf.__file__).read_bytes()).hexdigest()[:12]
    except OSError:
        return "unknown"


def _wheel_abi_from_dict(d: dict) -> WheelAbi:
    d = dict(d)
    d["elf_files"] = [ElfAbi(**e) for e in d.get("elf_files", [])]
    return WheelAbi(**d)




def built_on_torch(plan: Plan) -> frozenset[str]:
    """The packages the build compiles from source against the image's own torch (`needs: [torch]`)."""
    return frozenset(getattr(s.spec, "package") for s in plan.steps
                     if s.active and "torch" in (getattr(s.spec, "needs", ()) or ()))


def torch_tied(installed: dict[str, Installed], requirements, built: frozenset[str] = frozenset()) -> list[Installed]:
    """Installed packages whose ABI may be tied to torch: local wheels, fallbacks, those that require torch and
    those built from source against the image's torch (``built``)."""
    return [i for i in sorted(installed.values(), key=lambda i: i.name)
            if i.name != "torch" and (i.source in ("local", "fallback") or i.name in built
                                      or any(canonicalize_name(r.name) == "torch" for r in requirements(i)))]


def wheel_abi_of(inst: Installed, planned: PlannedPackage | None, plan: Plan, source, resolver, cache: "AbiCache",
                 notes: list[str]) -> tuple[WheelAbi | None, str | None, str, dict | None]:
    """(classification, wheel file name, how it was had, manifest-declared provenance) of one installed package."""
    built = None
    w = None
    filename = None
    how = "unavailable"
    # Built into a wheel inside the build: no wheel of it exists on the host, and the index's wheel of the same
    # name and version is another build, never classified in its place; its ELF is read from the built image.
    if built_in_image(inst.source):
        return None, None, "source-build", None
    try:
        if inst.source == "local" and planned is not None:
            path = resolver.local_wheel(planned)
            if path is not None:
                filename = path.name
                w, how = cache.classify_local(path)
                b = getattr(planned.local, "built_against", None)  # a source step's prebuilt wheel says none
                built = {"torch": b.torch, "cuda": b.cuda, "arch_list": list(b.arch_list)} if b else None
        else:
            f = source.best_wheel(inst.name, inst.version, plan.target.python, plan.target.platforms())
            if f is not None:
                filename = f.filename
                if all(t.platform == "any" and t.abi == "none" for t in f.tags):
                    how = "pure-python"
                else:
                    w, how = cache.classify_index(f)
    except (IndexClientError, OSError, ValueError) as exc:
        notes.append(f"ABI of {inst.name} {inst.version} not checked: {exc}")
    return w, filename, how, built


class AbiCache:
    """classify_wheel results by wheel sha256 in the workspace's ABI cache; index wheels in its wheel cache."""

    def __init__(self, workspace: Workspace, client: IndexClient, offline: bool):
        self.abi_dir = workspace.abi_cache
        self.wheel_dir = workspace.wheel_cache
        self.client = client
        self.offline = offline
        self.key = classifier_key()
        self.stats = {"hits": 0, "classified": 0, "downloads": 0, "download_bytes": 0}

    def _path(self, sha: str) -> Path:
        return self.abi_dir / f"{sha}-{self.key}.json"

    def _load(self, sha: str) -> WheelAbi | None:
        try:
            data = json.loads(self._path(sha).read_text())
            return _wheel_abi_from_dict(data["wheel"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, sha: str, w: WheelAbi) -> None:
        data = {"sha256": sha, "classifier": self.key, "wheel": w.to_dict()}
        atomic_write(self._path(sha), json.dumps(data).encode())

    def classify_local(self, path: Path) -> tuple[WheelAbi, str]:
        sha = sha256_file(path)
        cached = self._load(sha)
        if cached is not None:
            self.stats["hits"] += 1
            return cached, "hit"
        w = classify_wheel(path)
        self.stats["classified"] += 1
        self._store(sha, w)
        return w, "classified"

    def classify_index(self, f) -> tuple[WheelAbi | None, str]:
        """(classification, how) of an index file; None when it cannot be had (offline, no hash)."""
        if f.sha256:
            cached = self._load(f.sha256.lower())
            if cached is not None:
                self.stats["hits"] += 1
                return cached, "hit"
        path = self.wheel_dir / f.filename
        if path.exists() and (not f.sha256 or sha256_file(path) == f.sha256.lower()):
            pass
        elif self.offline:
            return None, "unavailable"
        else:
            self.stats["download_bytes"] += self.client.download(f, path)
            self.stats["downloads"] += 1
        w = classify_wheel(path)
        self.stats["classified"] += 1
        self._store((f.sha256 or sha256_file(path)).lower(), w)
        return w, "classified"
