"""sdist steps: one index source distribution, pinned by its sha256, built into a wheel in a builder stage.

The building block of kind `sdist` (fast-hadamard-transform and causal-conv1d
ship only sdists):
- manifest: an SdistStep: `package` (name==version), `sha256` (the sdist's,
  as the index lists it), and how it is built: `isolation` (false: with
  `--no-build-isolation`, against what the image holds), `needs` (with
  isolation false: the installed packages it compiles against, each installed
  by an earlier step) and `env` (MAX_JOBS, TORCH_CUDA_ARCH_LIST), and
  `build_env` (overrides of `env` per architecture and CUDA line:
  build_env.py) and `prebuilt: {glob, why}` (a wheel in wheels/ the image installs instead of
  building the sdist when the build context holds it: prebuilt.py). A package
  comes from one source: an sdist step's is in no wheel set, shared pin or other
  step;
- plan: it names no index distribution (Step.packages is empty);
- effect: it installs its package --no-deps (Effect.direct, source `sdist`).
  The host downloads the sdist (checked against its sha256) and reads its
  PKG-INFO or pyproject.toml; static requirements are judged like any other
  package's, dynamic ones are unchecked and left to the build's `pip check`;
- lock: no slice; its sha256 and build settings join the lock's inputs
  (lock_part), so changing them makes the lock stale;
- partial: templates/steps/sdist.j2. A builder stage `sdist-<step>` downloads
  exactly that sdist (`pip download --no-deps --no-binary :all:`), fails
  naming the expected and the found digest unless its sha256 matches, and
  builds it (`pip wheel --no-deps`). With `needs` the stage starts from the
  image as it is after the last step that installs them, so its cache key is
  that layer, the sdist and the build settings: a later step never rebuilds
  it. Without, it starts from the base. The image installs the wheel --no-deps
  from a bind mount of the stage;
- invariant: after the last step, the package is installed at its version.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from packaging.utils import canonicalize_name, parse_sdist_filename, InvalidSdistFilename
from packaging.version import Version

from ..model.manifest import StepSpec, pinned_version
from ..model.reader import StepReading
from .base import ADOPT_SDIST_BUILD, DirectInstall, Effect, KindView, Staging, StepKind
from .git import read_env, read_needs
from .build_env import BuildEnvOverride, build_env_identity, env_cases, read_build_env
from .prebuilt import (
    Prebuilt, SourceBuildView, prebuilt_identity, read_prebuilt, read_source_allow_missing, source_allowances,
    stage_prebuilt,
)
from .source_meta import Unreadable, read_or_reason, sdist_metadata, temporary_download

if TYPE_CHECKING:
    from pathlib import Path

    from ..plan import Plan, Step

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# Where the builder stage keeps the downloaded sdist and the wheel; the stage's layers never reach the image.
SDIST_DIR = "/tmp/pinwheel-sdist/src"
WHEEL_DIR = "/tmp/pinwheel-sdist/wheel"


@dataclass(frozen=True)
class SdistStep:
    kind: ClassVar[str] = "sdist"

    name: str
    why: str
    gate: str | None
    package: str  # canonical name
    version: str
    sha256: str
    isolation: bool
    env: tuple[tuple[str, str], ...]
    needs: tuple[str, ...]
    line: int
    prebuilt: Prebuilt | None = None  # the wheel in wheels/ installed instead of the build when it is there
    build_env: tuple[BuildEnvOverride, ...] = ()  # `env` overrides per architecture and CUDA line
    env_cases: tuple = ()  # (case pattern, environment) per variant and architecture; empty without overrides
    allow_missing: tuple = ()  # (model.packages.AllowMissing): requirements it may leave unmet, each with a why


@dataclass(frozen=True)
class SdistView(SourceBuildView, KindView):
    """An sdist step as its partial reads it."""

    spec: SdistStep

    @property
    def build_stage(self) -> str:
        return f"sdist-{self.step.name}"

    @property
    def stage(self) -> str:
        """Present only for a build that needs nothing installed: its stage starts from the base, before the image."""
        if self.spec.needs:
            raise AttributeError("stage")  # built from the image's own layer instead (part "build")
        return self.build_stage

    @property
    def pin(self) -> str:
        return f"{self.spec.package}=={self.spec.version}"

    @property
    def sdist_dir(self) -> str:
        return SDIST_DIR

    @property
    def wheel_dir(self) -> str:
        return WHEEL_DIR

    @property
    def build_flags(self) -> str:
        return "" if self.spec.isolation else " --no-build-isolation"

    wheel_dir = WHEEL_DIR

    @property
    def built_instead(self) -> str:
        return f"its sdist (sha256 {self.spec.sha256})"


    @property
    def count_message(self) -> str:
        return f"pinwheel: ERROR: sdist step {self.step.name}: not exactly one sdist of {self.pin} was downloaded:"

    @property
    def digest_prefix(self) -> str:
        return f"pinwheel: ERROR: sdist step {self.step.name}: {self.pin}: sha256 mismatch: expected"

    @property
    def wheel_count_message(self) -> str:
        return f"pinwheel: ERROR: sdist step {self.step.name}: the build of {self.pin} made not one wheel:"

    @property
    def version_mismatch_prefix(self) -> str:
        return f"pinwheel: ERROR: sdist step {self.step.name}: {self.spec.package}: expected {self.spec.version}, found"


class Sdist(StepKind):
    name = "sdist"
    noun = "sdist step"
    adopts = ADOPT_SDIST_BUILD
    named_by_package = True
    builds_in_image = True

    def read(self, node: Any, key: str, reading: StepReading) -> SdistStep:
        r = reading.reader
        own = {"name", "why", "gate", "package", "sha256", "isolation", "env", "needs", "prebuilt", "build_env",
               "allow_missing"}
        m = r.mapping(node, key, own | reading.common_keys, {"name", "why", "package", "sha256"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        req = r.requirement(m["package"], f"{key}.package")
        version = pinned_version(req)
        if not version or req.extras:
            raise r.fail(m["package"].line, f"{key}.package", "an sdist step builds one exact version: name==version, "
                                                              "no extras")
        package = canonicalize_name(req.name)
        sha256 = r.string(m["sha256"], f"{key}.sha256", _SHA256, "sha256 (64 lowercase hex digits, as the index "
                                                                  "lists the sdist)")
        isolation = r.boolean(m["isolation"], f"{key}.isolation") if "isolation" in m else True
        env = read_env(r, m["env"], f"{key}.env") if "env" in m else ()
        needs = read_needs(reading, m, key, isolation) if "needs" in m else ()
        for kind, what in (("wheels", "in a wheel set"), ("git", "built by a git step"),
                           ("asset", "installed by an asset step"), (self.name, "built by another sdist step")):
            seen = reading.claims.get(kind, {})
            if package in seen:
                line = seen[package][1] if isinstance(seen[package], tuple) else seen[package]
                raise r.fail(m["package"].line, f"{key}.package", f"{package} is {what} (line {line}) and built from "
                                                                  "its sdist here; keep one source")
        reading.claimed(self.name)[package] = node.line
        prebuilt = read_prebuilt(r, m["prebuilt"], f"{key}.prebuilt", package) if "prebuilt" in m else None
        build_env = read_build_env(reading, m["build_env"], f"{key}.build_env", read_env) if "build_env" in m else ()
        return SdistStep(name, r.string(m["why"], f"{key}.why"), gate, package, version, sha256, isolation, env, needs,
                         node.line, prebuilt, build_env, env_cases(env, build_env, reading.variants),
                         read_source_allow_missing(r, m, key))

    def check(self, entries: Sequence[tuple[str, StepSpec]], reading: StepReading) -> None:
        """A package built from its sdist is no shared pin; a later wheel set or step taking it is refused."""
        pins = {p.name: p.line for p in reading.shared_pins}
        later = {n: (v[1] if isinstance(v, tuple) else v) for kind in ("wheels", "git", "asset")
                 for n, v in reading.claims.get(kind, {}).items()}
        for key, spec in entries:
            assert isinstance(spec, SdistStep)
            for what, seen in (("a shared pin", pins), ("installed by another step", later)):
                if spec.package in seen and seen[spec.package] != spec.line:
                    raise reading.reader.fail(spec.line, f"{key}.package", f"{spec.package} is {what} (line "
                                                                           f"{seen[spec.package]}) and built from "
                                                                           "its sdist here; keep one source")

    def provides(self, step: Step) -> tuple[str, ...]:
        assert isinstance(step.spec, SdistStep)
        return (step.spec.package,)

    def effect(self, step: Step) -> Effect:
        """Its package, --no-deps; requirements from the sdist's PKG-INFO or pyproject.toml where static."""
        spec = step.spec
        assert isinstance(spec, SdistStep)
        if not step.active:
            return Effect()

        def read(source):
            meta, why = read_or_reason(lambda: _read_sdist(source, spec))
            return meta, f"built from its sdist (sha256 {spec.sha256[:12]}) in the build: {why}"
        return Effect(direct=(DirectInstall(spec.package, spec.version, "sdist", (), step.why, read=read,
                                            local=spec.prebuilt),))

    def lock_part(self, step: Step) -> dict:
        spec = step.spec
        assert isinstance(spec, SdistStep)
        return {"sdist": {"package": spec.package, "version": spec.version, "sha256": spec.sha256,
                          "isolation": spec.isolation, "env": [list(e) for e in spec.env], "needs": list(spec.needs),
                          **({"prebuilt": spec.prebuilt.glob} if spec.prebuilt else {}),
                          **({"build_env": [[o.arch, o.cuda, [list(e) for e in o.env]] for o in spec.build_env]}
                             if spec.build_env else {})}}

    def allowances(self, step: Step) -> dict[str, dict[str, str]]:
        return source_allowances(step)

    def invariant(self, step: Step) -> tuple[SdistStep, ...]:
        assert isinstance(step.spec, SdistStep)
        return (step.spec,)

    def view(self, step: Step) -> SdistView:
        assert isinstance(step.spec, SdistStep)
        return SdistView(step, step.spec, self)

    identity_section = "sources"

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        """Only a step with a prebuilt wheel or build_env overrides adds an entry (the sdist's sha256 is in the
        lock's inputs): which of the two the build takes, and the environment this Plan's build sees."""
        spec = step.spec
        assert isinstance(spec, SdistStep)
        if not step.active or (spec.prebuilt is None and not spec.build_env):
            return ()
        return ({"step": step.name, "sdist": spec.sha256,
                 **prebuilt_identity(step, plan, root, f"its sdist (sha256 {spec.sha256})"),
                 **build_env_identity(spec, plan)},)

    def stage(self, step: Step, staging: Staging) -> None:
        """Its prebuilt wheel, if wheels/ holds it, into the context's wheels/<step>/."""
        stage_prebuilt(step, staging, self.noun)


def _read_sdist(source, spec: SdistStep):
    """Find the sdist on the index by its sha256, download it (checked) and read its static requirements."""
    try:
        files = source.files(spec.package)
    except Exception as exc:  # an index that cannot be read leaves the requirements unchecked, with the reason
        raise Unreadable(f"the index cannot list {spec.package}: {exc}") from None
    for f in files:
        try:
            name, version = parse_sdist_filename(f.filename)
        except InvalidSdistFilename:
            continue
        if name == spec.package and version == Version(spec.version):
            if (f.sha256 or "").lower() != spec.sha256:
                raise Unreadable(f"the index lists {f.filename} with sha256 {f.sha256 or 'none'}, not the manifest's "
                                 f"{spec.sha256}")
            try:
                client = source.source_for(spec.package) if hasattr(source, "source_for") else source
                data = temporary_download(client, f)
            except Exception as exc:
                raise Unreadable(f"cannot download {f.filename}: {exc}") from None
            return sdist_metadata(data, spec.package, spec.version)
    raise Unreadable(f"the index lists no sdist of {spec.package} {spec.version}")


KIND = Sdist()
