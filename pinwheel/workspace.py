"""Where every file lives: in the repository that holds the manifest, in the cache, and in the image.

No other module spells a path or a file name of these; they ask a Workspace
(repository and cache) or read InImage (paths the template and the smoke share).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from .index.target import CONTAINER_MACHINES

# Environment variable that moves the one cache root (default: <root>/.cache).
CACHE_ENV = "PINWHEEL_CACHE_DIR"
# The manifest's file name: its directory is the project's root.
MANIFEST_FILE = "wheels_manifest.yaml"


def find_manifest(start: Path) -> Path | None:
    """The manifest in ``start`` or the nearest directory above it that has one (as git and uv look for
    their project), or None. One in ``start`` itself stays relative, so messages name it as before."""
    start = Path(start)
    if (start / MANIFEST_FILE).is_file():
        return Path(MANIFEST_FILE) if start == Path.cwd() else start / MANIFEST_FILE
    for directory in start.resolve().parents:
        if (directory / MANIFEST_FILE).is_file():
            return directory / MANIFEST_FILE
    return None


class OutsideProject(ValueError):
    """A file the manifest names (a patch, a local wheel) whose whole path, symlinked directories included,
    resolves outside the project; str() is one line naming it."""


def inside_project(root: Path, path: Path | str, what: str = "file") -> Path:
    """``path`` (relative to ``root``, or under it) with every symlink resolved, refused (OutsideProject) when
    that leaves the project: a patch named `linkdir/passwd` with `linkdir -> /etc` reads nothing. The one
    check every step kind's files go through."""
    base = Path(root).resolve()
    full = Path(path) if Path(path).is_absolute() else Path(root) / path
    resolved = full.resolve()
    if resolved != base and base not in resolved.parents:
        shown = Path(path).as_posix() if not Path(path).is_absolute() else str(path)
        raise OutsideProject(f"{what} {shown} resolves to {resolved}, outside the project ({base}); "
                             "only files inside the project are read")
    return resolved


class LockFiles:
    """File names inside a variant's lock directory."""

    REQUIREMENTS_IN = "requirements.in"  # the resolver's inputs (generated, for review)
    CONSTRAINTS = "constraints.txt"  # shared pins + --no-deps and fallback pins
    OVERRIDES = "overrides.txt"  # the packages marked `override: true`, at their pins (uv's --override)
    REQUIREMENTS = "requirements.txt"  # the whole lock, hashed
    EXPECT = "expect.json"  # pins and suppressed requirements, for the smoke
    INSTALLER = "installer.txt"  # uv, hashed: what installs the slices (image.installer: uv)

    @staticmethod
    def of_platform(directory: Path) -> list[Path]:
        """Every file of one platform's lock, sorted. The variant's own lock directory also holds the
        other platforms' (lock/cu130/arm64/); those are theirs, so an arm64 re-lock leaves the amd64
        image's lock digest and build context as they were."""
        others = {c.split("/", 1)[1] for c in CONTAINER_MACHINES}
        return sorted(p for p in Path(directory).rglob("*") if p.is_file()
                      and p.relative_to(directory).parts[0] not in others)

    @staticmethod
    def step(index: int, name: str) -> str:
        """One install step's slice: NN-<step>.txt."""
        return f"{index:02d}-{name}.txt"

    @staticmethod
    def fallback(index: int, step: str, package: str) -> str:
        """The lock of one local wheel's index fallback: NN-<step>.fallback-<package>.txt."""
        return f"{index:02d}-{step}.fallback-{package}.txt"


class InContext:
    """Paths inside the build context pinwheel assembles (image.build.assemble_context), as the Dockerfile
    names them."""

    WHEELS = "wheels"  # the local wheels the Plan's globs match, for this platform, one directory per wheel set
    SMOKE_PAYLOAD = "smoke_payload.pyz"  # the smoke payload, one zipapp (image.payload)

    @staticmethod
    def wheel_set(step_name: str) -> str:
        """wheels/<step>/: one wheel set's own local wheels, all its RUN mounts."""
        return f"{InContext.WHEELS}/{step_name}"


class InImage:
    """Paths inside the build and the image that the template, the build context and the smoke share."""

    TOOL_DIR = "/opt/pinwheel"
    SMOKE_PAYLOAD = "/opt/pinwheel/smoke_payload.pyz"
    EXPECT = "/opt/pinwheel/expect.json"
    WHEELS_MOUNT = "/tmp/wheels"
    LOCK_DIR = "/tmp/pinwheel/lock"
    PREFLIGHT_MARK = "/tmp/pinwheel/preflight"
    SMOKE_JSON = "/tmp/smoke.json"
    INSTALLER_DIR = "/opt/pinwheel/uv"  # in the installer stage only: uv installed from installer.txt
    UV = "/tmp/pinwheel/bin/uv"  # where each install step bind-mounts uv from that stage
    UV_CACHE = "/tmp/pinwheel/uv-cache"  # uv's cache within one install step's layer, removed by that step
    INVARIANT_CACHE = "/var/cache/pinwheel"  # the invariant's passing results: a BuildKit cache mount, in no layer
    INVARIANT_CACHE_ID = "pinwheel-invariant"  # that cache mount's id, shared by every build on the engine
    FRESH_CHECKS_ARG = "PINWHEEL_FRESH_CHECKS"  # the build arg (and the payload's variable) that reuses nothing
    # parent-free layers: the files one wheel set's stage added to the venv, moved here (their paths kept)
    # for the image's COPY --link; the venv's listing before the install lies beside it
    WHEEL_SET_ROOT = "/tmp/pinwheel/wheel-set"
    VENV_BEFORE = "/tmp/pinwheel/venv-before"
    VENV_AFTER = "/tmp/pinwheel/venv-after"
    VENV_STAGE = "venv"  # the stage of the venv's skeleton that each wheel set's stage and the image start from


@dataclass(frozen=True)
class Workspace:
    """The repository root (the manifest's directory) and the image it builds."""

    root: Path
    image: str

    @classmethod
    def of(cls, manifest) -> "Workspace":
        return cls(Path(manifest.path).parent, manifest.image.name)

    # -------------------------------------------------------- committed

    @property
    def image_dir(self) -> Path:
        """images/<image>/ under the root; a manifest that lives in images/<image>/ itself (an example
        image beside the root's own) keeps its Dockerfile, lock and inventory next to it."""
        if self._is_example:
            return self.root
        return self.root / "images" / self.image

    @functools.cached_property
    def _is_example(self) -> bool:
        where = self.root.resolve()  # a manifest given as a bare name (root ".") is judged by where it lives
        return where.name == self.image and where.parent.name == "images"

    @property
    def repository_root(self) -> Path:
        """The repository that holds this manifest: the root, or for an example image's own manifest
        (images/<image>/wheels_manifest.yaml) the directory above images/."""
        return self.root.resolve().parent.parent if self._is_example else self.root

    def manifests(self) -> list[Path]:
        """Every manifest of the repository: the root's own, then each images/<name>/wheels_manifest.yaml."""
        top = self.repository_root
        found = [top / MANIFEST_FILE] if (top / MANIFEST_FILE).is_file() else []
        return found + sorted(top.glob(f"images/*/{MANIFEST_FILE}"))

    @property
    def dockerfile(self) -> Path:
        return self.image_dir / "Dockerfile"

    def lock_dir(self, variant: str, arch: str | None = None) -> Path:
        """lock/<variant>/, or lock/<variant>/<arch>/ for a platform other than the variant's own
        (Plan.platform_arch): the variant's own lock keeps its place when platforms are added."""
        d = self.image_dir / "lock" / variant
        return d / arch if arch else d

    def plan_lock_dir(self, plan) -> Path:
        """The lock directory of one Plan: its variant's, for its platform."""
        return self.lock_dir(plan.variant.name, plan.platform_arch)

    def lock_file(self, variant: str, name: str, arch: str | None = None) -> Path:
        return self.lock_dir(variant, arch) / name

    def inventory_file(self, variant: str) -> Path:
        """The committed inventory of a variant's base image."""
        return self.image_dir / "inventory" / f"{variant}.json"

    def project_file(self, path: Path | str, what: str = "file") -> Path:
        """A file the manifest names, resolved whole and inside the project (inside_project)."""
        return inside_project(self.root, path, what)

    def relative(self, path: Path) -> str:
        """A path as the user sees it: relative to the repository's root where it lies under it."""
        try:
            return Path(path).resolve().relative_to(self.repository_root.resolve()).as_posix()
        except ValueError:
            return str(path)

    # -------------------------------------------------------- inputs

    @property
    def wheels_dir(self) -> Path:
        return self.root / "wheels"

    # -------------------------------------------------------- not committed

    @property
    def cache_root(self) -> Path:
        env = os.environ.get(CACHE_ENV)  # one cache for the repository: its example images share the index
        return Path(env) if env else self.repository_root / ".cache"

    @property
    def index_cache(self) -> Path:
        """Index pages and metadata, shared by report, lock and bump; memos live under it."""
        return self.cache_root / "index"

    @property
    def abi_cache(self) -> Path:
        """ELF classification results, by wheel sha256."""
        return self.cache_root / "abi"

    @property
    def wheel_cache(self) -> Path:
        """Wheels downloaded to classify their ABI."""
        return self.cache_root / "wheels"

    @property
    def asset_cache(self) -> Path:
        """Release assets, content-addressed: sha256/<digest>/<file name>."""
        return self.cache_root / "assets"

    @property
    def base_cache(self) -> Path:
        """Root filesystem tarballs of bootstrap bases."""
        return self.cache_root / "base"

    @property
    def inventory_checks(self) -> Path:
        """Base image ids found to hold what a committed inventory says (one empty file per pair)."""
        return self.cache_root / "inventory-checks"

    def sbom_file(self, immutable_tag: str) -> Path:
        """The CycloneDX SBOM of the image tagged repository:<variant>-<hash>, written when it is built
        (publish pushes it beside the image)."""
        return self.root / ".pinwheel" / "sbom" / f"{immutable_tag.rsplit(':', 1)[-1]}.cdx.json"

    def pylock_file(self, variant: str, arch: str | None = None) -> Path:
        """The PEP 751 lock `lock` writes beside the committed one. It names the index's file URLs, so
        it is not committed (the committed lock names no index)."""
        return self.root / ".pinwheel" / "pylock" / f"pylock.{variant}{'-' + arch if arch else ''}.toml"

    @property
    def smoke_results(self) -> Path:
        """The smoke verdict recorded per image id, where publish looks for it."""
        return self.root / ".pinwheel" / "smoke"
