"""asset steps: one wheel downloaded from a URL (a release asset), pinned by its sha256, per architecture if need be.

The building block of kind `asset`:
- manifest: an AssetStep: `package` (the exact pin the wheel is, name==version)
  and `url`, either one `{url, sha256}` or one per container architecture
  (`{amd64: {url, sha256}, arm64: {url, sha256}}`). The URL's file name must be
  a wheel of that package at that version; every variant the step is active in
  needs an asset for its architecture. `build.py asset add URL` prints an entry
  with the digest filled in;
- plan: it names no index distribution (Step.packages is empty);
- effect: it installs its package --no-deps (Effect.direct, source `asset`).
  The host reads no metadata before the download, so its requirements are
  unchecked, never clean;
- lock: no slice: the digest is in the manifest, which the image's identity
  (the immutable tag) hashes; the digest is also an image label;
- host: `build` downloads each asset into the content-addressed cache
  (Workspace.asset_cache) and verifies it before use; a mismatch fails naming
  the expected and the found digest (``stage``, with steps/downloads.py). The wheel is
  bind-mounted into the build from the context's assets/<step>/, like local
  wheels, and never written into a layer;
- partial: templates/steps/asset.j2, one RUN that checks the mounted file's
  sha256 again (a plain `docker build` of the committed file verifies it too)
  and installs it --no-deps;
- invariant: after the last step, the package is installed at its version;
- identity: each active step's url and sha256 (section `assets`); its SBOM
  component is the package with that digest and url; the label
  `io.pinwheel.assets` names them by step.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..model.manifest import StepSpec, pinned_version
from ..model.reader import Reader, StepReading
from ..model.source import Node, show
from .base import ADOPT_WHEEL_DOWNLOAD, DirectInstall, Effect, KindView, SbomPart, Staging, StepKind
from .downloads import DownloadError, download, stage_file

AssetError = DownloadError  # an asset could not be downloaded, or is not the pinned one

if TYPE_CHECKING:
    from ..plan import Plan, Step

ARCHES = ("amd64", "arm64")  # container architectures, as BuildKit's TARGETARCH names them
_URL = re.compile(r"^https?://[A-Za-z0-9][A-Za-z0-9._~:@%+/=-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[A-Za-z0-9_.+!]+)(-\d[A-Za-z0-9_.]*)?"
                    r"-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl$")
# Where the build mounts the context's assets/<step>/ for the install.
MOUNT = "/tmp/pinwheel-assets"


@dataclass(frozen=True)
class Asset:
    url: str
    sha256: str
    arch: str | None  # None: one asset for every architecture
    line: int

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[1]


@dataclass(frozen=True)
class AssetStep:
    kind: ClassVar[str] = "asset"

    name: str
    why: str
    gate: str | None
    package: str  # canonical name
    version: str
    assets: tuple[Asset, ...]
    line: int

    def asset_for(self, arch: str) -> Asset | None:
        """The asset a build for this container architecture installs."""
        return next((a for a in self.assets if a.arch in (None, arch)), None)


def context_dir(step_name: str) -> str:
    """Where the build context holds a step's wheel (relative to the context)."""
    return f"assets/{step_name}"


def wheel_problem(filename: str, package: str, version: str) -> str | None:
    """Why a file name is not a wheel of package==version, or None."""
    m = _WHEEL.fullmatch(filename)
    if not m:
        return f"{show(filename)} is not a wheel file name (name-version-python-abi-platform.whl)"
    if canonicalize_name(m["name"]) != package:
        return f"{show(filename)} is a wheel of {canonicalize_name(m['name'])}, not {package}"
    try:
        same = Version(m["version"]) == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        return f"{show(filename)} is version {m['version']}, not {version}"
    return None


def url_problem(url: str) -> str | None:
    """Why url is not one an asset step downloads, or None (what the manifest refuses, `asset add` refuses first)."""
    if not _URL.fullmatch(url) or url.endswith("/"):
        return (f"{show(url)} is not a URL of a file this kind downloads "
                "(https:// or http://, no spaces, quotes or query)")
    return None


def _asset(r: Reader, node: Any, key: str, arch: str | None, package: str, version: str) -> Asset:
    m = r.mapping(node, key, {"url", "sha256"}, {"url", "sha256"}).value
    url = r.string(m["url"], f"{key}.url")
    problem = url_problem(url)
    if problem:
        raise r.fail(m["url"].line, f"{key}.url", problem)
    problem = wheel_problem(url.rsplit("/", 1)[1], package, version)
    if problem:
        raise r.fail(m["url"].line, f"{key}.url", problem)
    sha256 = r.string(m["sha256"], f"{key}.sha256")
    if not _SHA256.fullmatch(sha256):
        raise r.fail(m["sha256"].line, f"{key}.sha256", f"{show(sha256)} is not a sha256 (64 lowercase hex digits); "
                                                        "`build.py asset add URL` prints it")
    return Asset(url, sha256, arch, node.line)


@dataclass(frozen=True)
class AssetView(KindView):
    """An asset step as its partial reads it."""

    spec: AssetStep

    @property
    def context_dir(self) -> str:
        return context_dir(self.step.name)

    @property
    def mount(self) -> str:
        return f"{MOUNT}/{self.step.name}"

    @property
    def per_arch(self) -> bool:
        return any(a.arch for a in self.spec.assets)

    @property
    def pin(self) -> str:
        return f"{self.spec.package}=={self.spec.version}"

    @property
    def count_message(self) -> str:
        return f"pinwheel: ERROR: asset step {self.step.name}: not one wheel in {self.context_dir} of the build context:"

    @property
    def arch_message(self) -> str:
        return f"pinwheel: ERROR: asset step {self.step.name}: no asset for architecture"

    @property
    def digest_prefix(self) -> str:
        return f"pinwheel: ERROR: asset step {self.step.name}: sha256 mismatch: expected"

    @property
    def version_mismatch_prefix(self) -> str:
        return f"pinwheel: ERROR: asset step {self.step.name}: {self.spec.package}: expected {self.spec.version}, found"



class Assets(StepKind):
    name = "asset"
    noun = "asset step"
    adopts = ADOPT_WHEEL_DOWNLOAD
    named_by_package = True

    def read(self, node: Any, key: str, reading: StepReading) -> AssetStep:
        r = reading.reader
        m = r.mapping(node, key, {"name", "why", "gate", "package", "url"} | reading.common_keys,
                      {"name", "why", "package", "url"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        req = r.requirement(m["package"], f"{key}.package")
        if req.extras:
            raise r.fail(m["package"].line, f"{key}.package", "an asset is installed --no-deps: extras change nothing")
        package, version = canonicalize_name(req.name), pinned_version(req) or ""
        url = m["url"]
        if isinstance(url, Node) and isinstance(url.value, dict) and "url" not in url.value:
            r.mapping(url, f"{key}.url", set(ARCHES))
            if not url.value:
                raise r.fail(url.line, f"{key}.url", f"needs {{url, sha256}}, or one per architecture "
                                                     f"({', '.join(ARCHES)})")
            assets = tuple(_asset(r, v, f"{key}.url.{arch}", arch, package, version) for arch, v in url.value.items())
        else:
            assets = (_asset(r, url, f"{key}.url", None, package, version),)
        step = AssetStep(name, r.string(m["why"], f"{key}.why"), gate, package, version, assets, node.line)
        for variant in reading.builds(gate):
            if step.asset_for(variant.arch) is None:
                where = url.key_line if isinstance(url, Node) else url.line
                raise r.fail(where, f"{key}.url", f"variant {variant.name} is built for {variant.arch} "
                                                     f"({variant.default_platform}), which has no asset here")
        claimed: dict[str, int] = reading.claimed(self.name)
        if package in claimed:
            raise r.fail(m["package"].line, f"{key}.package",
                         f"{package} is installed by another asset step (line {claimed[package]})")
        claimed[package] = node.line
        return step

    def check(self, entries: Sequence[tuple[str, StepSpec]], reading: StepReading) -> None:
        """A package from an asset is neither a shared pin nor in a wheel set nor built from git: keep one source."""
        pins = {p.name: p.line for p in reading.shared_pins}
        wheels = {n: v[1] for n, v in reading.claims.get("wheels", {}).items()}
        gits = reading.claims.get("git", {})
        for key, spec in entries:
            assert isinstance(spec, AssetStep)
            for what, seen in (("a shared pin", pins), ("in a wheel set", wheels), ("built by a git step", gits)):
                if spec.package in seen:
                    raise reading.reader.fail(spec.line, f"{key}.package", f"{spec.package} is {what} "
                                                                           f"(line {seen[spec.package]}) and "
                                                                           "downloaded here; keep one source")

    def provides(self, step: Step) -> tuple[str, ...]:
        assert isinstance(step.spec, AssetStep)
        return (step.spec.package,)

    def effect(self, step: Step) -> Effect:
        """Its package, --no-deps, with requirements unchecked (read from the wheel only in the build)."""
        spec = step.spec
        assert isinstance(spec, AssetStep)
        if not step.active:
            return Effect()
        digests = ", ".join(a.sha256[:12] for a in spec.assets)
        return Effect(direct=(DirectInstall(
            spec.package, spec.version, "asset", (), step.why, None,
            f"a release asset (sha256 {digests}) installed --no-deps; its requirements are not read on the host"),))

    def invariant(self, step: Step) -> tuple[AssetStep, ...]:
        assert isinstance(step.spec, AssetStep)
        return (step.spec,)

    def view(self, step: Step) -> AssetView:
        assert isinstance(step.spec, AssetStep)
        return AssetView(step, step.spec, self)

    identity_section = "assets"
    label = "assets"

    def stage(self, step: Step, staging: Staging) -> None:
        """Its verified wheel in the context's assets/<step>/; the directory whatever the gates say (the
        Dockerfile mounts it in every variant)."""
        (staging.context / context_dir(step.name)).mkdir(parents=True, exist_ok=True)
        asset = _active_asset(step, staging.plan)
        if asset is not None:
            stage_file(asset.url, asset.sha256, staging.cache, staging.context / context_dir(step.name) / asset.filename)

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        asset = _active_asset(step, plan)
        return ({"step": step.name, "url": asset.url, "sha256": asset.sha256},) if asset else ()

    def sbom(self, step: Step, entry: dict) -> tuple[SbomPart, ...]:
        assert isinstance(step.spec, AssetStep)
        return (SbomPart("library", step.spec.package, f"asset:{step.name}", step.spec.version,
                         (("sha256", entry["sha256"]),), (("source", "asset"), ("step", step.name)),
                         ("distribution", entry["url"])),)

    def label_entries(self, step: Step, plan: Plan) -> dict:
        asset = _active_asset(step, plan)
        if asset is None:
            return {}
        assert isinstance(step.spec, AssetStep)
        return {step.name: {"package": f"{step.spec.package}=={step.spec.version}", "url": asset.url,
                            "sha256": asset.sha256}}


def _active_asset(step: Step, plan: Plan) -> Asset | None:
    """The asset an active step installs for the Plan's architecture; None when it is gated off."""
    if not step.active:
        return None
    assert isinstance(step.spec, AssetStep)
    return step.spec.asset_for(plan.variant.arch)


def plan_assets(plan: Plan) -> list[tuple[Step, Asset]]:
    """(step, asset) for every active asset step of a Plan, the asset its variant's architecture installs."""
    return [(step, asset) for step in plan.steps if step.kind == KIND.name
            for asset in (_active_asset(step, plan),) if asset is not None]


def manifest_entry(url: str, sha256: str, package: str, step: str) -> str:
    """A manifest entry for an asset, its digest filled in (what `build.py asset add` prints)."""
    return (f"  - name: {step}\n"
            f"    kind: asset\n"
            f'    why: "TODO: why this wheel comes from a release and not the index"\n'
            f'    package: "{package}"\n'
            f'    url: {{url: "{url}", sha256: "{sha256}"}}\n')


def add(url: str, cache: Path) -> str:
    """Download url, check that it is a wheel, and the manifest entry that pins it (`build.py asset add URL`).
    The URL is checked by the manifest's own rules first, so nothing is downloaded for an entry the manifest
    would refuse."""
    problem = url_problem(url)
    if problem:
        raise AssetError(f"asset add: {problem}")
    name = url.rsplit("/", 1)[-1]
    m = _WHEEL.fullmatch(name)
    if not m:
        raise AssetError(f"{name!r} is not a wheel file name (name-version-python-abi-platform.whl)")
    sha256, path = download(url, cache, expect_zip=True)
    problem = wheel_content_problem(path)
    if problem:
        path.unlink()
        raise AssetError(f"{url}: {problem}")
    package = f"{m['name'].replace('_', '-').lower()}=={m['version']}"
    step = m["name"].replace("_", "-").replace(".", "-").lower()
    return manifest_entry(url, sha256, package, step)


def wheel_content_problem(path: Path) -> str | None:
    """Why a downloaded file is not a wheel (a zip with a .dist-info holding METADATA and WHEEL), or None."""
    import zipfile  # noqa: PLC0415 - only `asset add` opens one

    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        return f"not a wheel: not a readable zip archive ({exc})"
    infos = {n.split("/", 1)[0] for n in names if n.count("/") == 1 and n.split("/", 1)[0].endswith(".dist-info")}
    if not any(f"{d}/METADATA" in names and f"{d}/WHEEL" in names for d in infos):
        return "not a wheel: the zip has no .dist-info directory with METADATA and WHEEL"
    return None


KIND = Assets()
