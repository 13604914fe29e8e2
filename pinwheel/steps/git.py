"""git steps: one distribution built from a git repository at a full commit id.

The building block of kind `git`:
- manifest: a GitStep: `package` (the exact pin the commit builds,
  name[extras]==version), `url` (https, http, git or ssh), `rev` (a full
  40-hex commit id: a branch or tag moves, so it is refused at its line with
  how to pin it), and optionally `subdirectory` (where the project sits in the
  checkout), `isolation` (false: build with `--no-build-isolation`, against
  what the build environment holds), `env` (variables the build sees, such as
  MAX_JOBS or TORCH_CUDA_ARCH_LIST), `builder` (the image the builder stage
  starts from, when the base has no git; default: the variant's base) and
  `editable` with `checkout` (the source tree stays in the image at that path,
  installed `-e`), `needs` (with isolation false: the installed packages the
  build compiles against, each installed by an earlier step), `build_env`
  (overrides of `env` per architecture and CUDA line: build_env.py), `submodules`
  (true: the commit's submodules are fetched too, recursively), `config_settings`
  (name -> value, passed to the build backend as `--config-settings`) and
  `patches: [{file, strip, why}]` (applied to the checkout before the build,
  with paths relative to the source tree; each file is read with the manifest,
  staged in the context's git-patches/<step>/ and checked again there, and
  its sha256 joins the image's identity), `prebuilt: {glob, why}` (a wheel
  in wheels/ that the image installs instead of building the commit when the
  build context holds it: prebuilt.py). A distribution is built by one git
  step in the manifest;
- plan: it names no index distribution (Step.packages is empty);
- effect: it installs its package --no-deps (Effect.direct, source `git`).
  When the resolver asks, the host fetches the commit and reads its static
  requirements (source_meta.py); dynamic ones are unchecked, never clean;
- lock: no slice and no lock entry: the commit is in the manifest, which the
  image's identity hashes, and is never resolved again at build time;
- partial: templates/steps/git.j2. A builder stage `git-<step>` fetches exactly
  that commit (`git init`, `git fetch --depth 1 <url> <rev>`, `git checkout
  FETCH_HEAD`), fails naming the expected and found commit unless `git
  rev-parse HEAD` is the rev, and builds a wheel (`pip wheel --no-deps`); the
  image installs that wheel `--no-deps` from a bind mount of the stage. With
  `needs` the stage only fetches; a stage `build-<step>` builds the wheel
  from the image as it is after the last step installing them (render cuts
  the image stage there), so its cache key is that layer, the commit and the
  settings. An editable step copies the checkout to its path and installs it
  `-e`;
- invariant: after the last step, the package is installed at its version, or
  the build fails naming the package, the commit, the expected and the found
  version.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from packaging.utils import canonicalize_name

from ..fsutil import sha256_file
from ..model.manifest import StepSpec, pinned_version
from ..model.reader import Reader, StepReading
from ..model.source import show
from .base import ADOPT_GIT_SOURCE, DirectInstall, Effect, KindView, SbomPart, Staging, StepKind
from .patch import read_patch_file, read_strip, stage_patch_file
from .build_env import BuildEnvOverride, build_env_identity, env_cases, read_build_env
from .prebuilt import (
    Prebuilt, SourceBuildView, prebuilt_identity, read_prebuilt, read_source_allow_missing, source_allowances,
    stage_prebuilt,
)
from .source_meta import git_metadata, read_or_reason

if TYPE_CHECKING:
    from ..plan import Plan, Step

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_URL = re.compile(r"^(https?|git|ssh)://[A-Za-z0-9][A-Za-z0-9._~:@%+/-]*$")
_SUBDIRECTORY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")
_ABS_PATH = re.compile(r"^/[A-Za-z0-9_][A-Za-z0-9_./-]{0,200}$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
# Where the builder stage keeps the checkout and the wheel; the stage's layers never reach the image.
SOURCE_DIR = "/tmp/pinwheel-git/src"
WHEEL_DIR = "/tmp/pinwheel-git/wheel"


@dataclass(frozen=True)
class GitStep:
    kind: ClassVar[str] = "git"

    name: str
    why: str
    gate: str | None
    package: str  # canonical name
    version: str
    extras: tuple[str, ...]
    url: str
    rev: str
    subdirectory: str | None
    isolation: bool
    builder: str | None
    editable: bool
    checkout: str | None
    line: int
    env: tuple[tuple[str, str], ...] = ()  # build settings exported for the build (MAX_JOBS, TORCH_CUDA_ARCH_LIST)
    needs: tuple[str, ...] = ()  # installed packages the build compiles against: it starts from their layer
    submodules: bool = False  # fetch the commit's submodules too, recursively
    config_settings: tuple[tuple[str, str], ...] = ()  # the build backend's --config-settings
    patches: tuple["SourcePatch", ...] = ()  # applied to the checkout before the build
    prebuilt: Prebuilt | None = None  # the wheel in wheels/ installed instead of the build when it is there
    build_env: tuple[BuildEnvOverride, ...] = ()  # `env` overrides per architecture and CUDA line
    env_cases: tuple = ()  # (case pattern, environment) per variant and architecture; empty without overrides
    allow_missing: tuple = ()  # (model.packages.AllowMissing): requirements it may leave unmet, each with a why


@dataclass(frozen=True)
class SourcePatch:
    """A patch to the checkout, its paths relative to the source tree (after `strip`)."""

    file: str  # relative to the manifest's directory
    sha256: str  # of its bytes when the manifest was read
    strip: int
    why: str
    line: int


PATCH_MOUNT = "/tmp/pinwheel-git/patches"
_SETTING = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$")  # apex: --build-option


def patches_dir(step_name: str) -> str:
    """Where the build context holds a git step's patches."""
    return f"git-patches/{step_name}"


def _source_patch(r: Reader, node: Any, key: str) -> SourcePatch:
    m = r.mapping(node, key, {"file", "strip", "why"}, {"file", "why"}).value
    file, sha256 = read_patch_file(r, m["file"], f"{key}.file")
    return SourcePatch(file, sha256, read_strip(r, m, key), r.string(m["why"], f"{key}.why"), node.line)


def _config_settings(r: Reader, node: Any, key: str) -> tuple[tuple[str, str], ...]:
    m = r.mapping(node, key, set(node.value) if isinstance(getattr(node, "value", None), dict) else set()).value
    out = []
    for name, value in m.items():
        if not isinstance(name, str) or not _SETTING.match(name):
            raise r.fail(node.lines[name], f"{key}.{name}", f"{show(str(name))} is not a config setting name "
                                                            "(letters, digits, '_', '.', '-')")
        out.append((name, r.string(value, f"{key}.{name}")))
    return tuple(out)


def rev_problem(rev: str) -> str | None:
    """Why a rev is not a full commit id, or None when it is one."""
    if _COMMIT.fullmatch(rev):
        return None
    if re.fullmatch(r"[0-9a-fA-F]{40}", rev):
        return "a commit id is written in lowercase hex"
    if re.fullmatch(r"[0-9a-f]{4,39}", rev):
        return "an abbreviated commit id can become ambiguous; write all 40 hex digits"
    return ("it names a branch or tag, which moves: a build would fetch whatever it points to then. "
            "Pin the commit it points to now (`git ls-remote <url> <rev>` prints it)")


def read_env(r, node: Any, key: str) -> tuple[tuple[str, str], ...]:
    """The build's environment variables, in the manifest's order: NAME: "value" (values are strings)."""
    m = r.mapping(node, key, set(node.value) if isinstance(getattr(node, "value", None), dict) else set())
    out = []
    for name, value in m.value.items():
        if not _ENV_NAME.fullmatch(name):
            raise r.fail(m.lines[name], f"{key}.{name}", "environment variable names are UPPER_CASE letters, digits "
                                                         "and '_'")
        out.append((name, r.string(value, f"{key}.{name}")))
    return tuple(out)


def read_needs(reading: StepReading, m: dict, key: str, isolation: bool) -> tuple[str, ...]:
    """`needs`: the installed packages a build without isolation compiles against (torch), each installed by
    an earlier step; the builder stage starts from the image as it is after the last of those steps."""
    r = reading.reader
    if isolation:
        raise r.fail(m["needs"].line, f"{key}.needs", "only with isolation: false (an isolated build sees none of "
                                                     "the image's packages)")
    # Python distributions earlier steps install (apt's claims are Debian packages, remove's are taken out)
    earlier = {name for kind in ("wheels", "git", "asset", "sdist") for name in reading.claims.get(kind, {})}
    out = []
    for j, item in enumerate(r.sequence(m["needs"], f"{key}.needs", 1)):
        name = canonicalize_name(r.string(item, f"{key}.needs[{j}]"))
        if name not in earlier:
            raise r.fail(item.line, f"{key}.needs[{j}]", f"{name} is installed by no earlier step; a build that "
                                                         "needs it must come after the step that installs it")
        if name in out:
            raise r.fail(item.line, f"{key}.needs[{j}]", f"{name} is listed twice")
        out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class GitView(SourceBuildView, KindView):
    """A git step as its partial reads it."""

    spec: GitStep

    @property
    def stage(self) -> str:
        """The builder stage's name."""
        return f"git-{self.step.name}"

    @property
    def stage_from(self) -> str:
        return self.spec.builder or "${BASE}"

    @property
    def build_stage(self) -> str:
        """The stage that builds the wheel against the image's own packages (a step with `needs`)."""
        return f"build-{self.step.name}"

    @property
    def built_from(self) -> str:
        """Where the image takes the wheel from: the build stage, else the fetching stage."""
        return self.build_stage if self.spec.needs else self.stage

    @property
    def source_dir(self) -> str:
        return SOURCE_DIR

    @property
    def wheel_dir(self) -> str:
        return WHEEL_DIR

    @property
    def project_dir(self) -> str:
        """The project inside the builder's checkout."""
        return f"{SOURCE_DIR}/{self.spec.subdirectory}" if self.spec.subdirectory else SOURCE_DIR

    @property
    def editable_dir(self) -> str:
        """The project inside the image's checkout (editable steps)."""
        assert self.spec.checkout is not None
        return f"{self.spec.checkout}/{self.spec.subdirectory}" if self.spec.subdirectory else self.spec.checkout

    @property
    def pin(self) -> str:
        return f"{self.spec.package}=={self.spec.version}"

    @property
    def build_flags(self) -> str:
        flags = "" if self.spec.isolation else " --no-build-isolation"
        return flags + "".join(f" --config-settings {shlex.quote(f'{k}={v}')}" for k, v in self.spec.config_settings)

    @property
    def patches_context(self) -> str:
        return patches_dir(self.step.name)

    @property
    def patch_mount(self) -> str:
        return PATCH_MOUNT

    @property
    def source_patches(self) -> tuple[dict, ...]:
        return tuple({
            "patch": p, "path": f"{PATCH_MOUNT}/{i:02d}.patch",
            "mismatch": f"pinwheel: ERROR: git step {self.step.name}: {p.file}: sha256 mismatch: expected {p.sha256}, "
                        "found",
            "failed": f"pinwheel: ERROR: git step {self.step.name}: {p.file} does not apply to commit {self.spec.rev} "
                      "(every hunk must apply)",
        } for i, p in enumerate(self.spec.patches))

    wheel_dir = WHEEL_DIR

    @property
    def built_instead(self) -> str:
        return f"commit {self.spec.rev}"


    @property
    def submodules_failed_message(self) -> str:
        return f"pinwheel: ERROR: git step {self.step.name}: cannot fetch the submodules of commit {self.spec.rev}"

    @property
    def fetch_failed_message(self) -> str:
        return f"pinwheel: ERROR: git step {self.step.name}: cannot fetch commit {self.spec.rev} from {self.spec.url}"

    @property
    def commit_mismatch_prefix(self) -> str:
        return f"pinwheel: ERROR: git step {self.step.name}: {self.spec.url}: expected commit {self.spec.rev}, found"

    @property
    def wheel_count_message(self) -> str:
        return f"pinwheel: ERROR: git step {self.step.name}: the build of commit {self.spec.rev} made not one wheel:"

    @property
    def version_mismatch_prefix(self) -> str:
        return (f"pinwheel: ERROR: git step {self.step.name}: {self.spec.package} from commit {self.spec.rev}: "
                f"expected {self.spec.version}, found")



class Git(StepKind):
    name = "git"
    noun = "git step"
    adopts = ADOPT_GIT_SOURCE
    named_by_package = True
    builds_in_image = True

    def read(self, node: Any, key: str, reading: StepReading) -> GitStep:
        r = reading.reader
        own = {"name", "why", "gate", "package", "url", "rev", "subdirectory", "isolation", "builder", "editable",
               "checkout", "env", "needs", "submodules", "config_settings", "patches", "prebuilt",
               "build_env", "allow_missing"}
        m = r.mapping(node, key, own | reading.common_keys, {"name", "why", "package", "url", "rev"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        req = r.requirement(m["package"], f"{key}.package")
        package = canonicalize_name(req.name)
        url = r.string(m["url"], f"{key}.url")
        if not _URL.fullmatch(url):
            raise r.fail(m["url"].line, f"{key}.url", f"{show(url)} is not a git URL this kind fetches "
                                                      "(https://, http://, git:// or ssh://, no spaces or quotes)")
        rev = r.string(m["rev"], f"{key}.rev")
        problem = rev_problem(rev)
        if problem:
            raise r.fail(m["rev"].line, f"{key}.rev", f"{show(rev)} is not a full commit id (40 hex digits): {problem}")
        subdirectory = None
        if "subdirectory" in m:
            subdirectory = r.string(m["subdirectory"], f"{key}.subdirectory")
            if not _SUBDIRECTORY.fullmatch(subdirectory) or ".." in subdirectory.split("/"):
                raise r.fail(m["subdirectory"].line, f"{key}.subdirectory",
                             f"{show(subdirectory)} is not a relative path inside the checkout")
        isolation = r.boolean(m["isolation"], f"{key}.isolation") if "isolation" in m else True
        builder = r.image_ref(m["builder"], f"{key}.builder") if "builder" in m else None
        editable = r.boolean(m["editable"], f"{key}.editable") if "editable" in m else False
        checkout = None
        if "checkout" in m:
            checkout = r.string(m["checkout"], f"{key}.checkout", _ABS_PATH, "absolute path")
            if not editable:
                raise r.fail(m["checkout"].line, f"{key}.checkout", "only with editable: true (a wheel install "
                                                                    "keeps no checkout)")
        if editable and checkout is None:
            raise r.fail(node.line, f"{key}.checkout", "an editable install needs the path its checkout lives at")
        env = read_env(r, m["env"], f"{key}.env") if "env" in m else ()
        needs = read_needs(reading, m, key, isolation) if "needs" in m else ()
        if needs and editable:
            raise r.fail(m["needs"].line, f"{key}.needs", "an editable install builds in the image itself, which "
                                                         "already holds every earlier step")
        claimed: dict[str, int] = reading.claimed(self.name)  # package -> the line that builds it
        if package in claimed:
            raise r.fail(m["package"].line, f"{key}.package",
                         f"{package} is built by another git step (line {claimed[package]})")
        claimed[package] = node.line
        submodules = r.boolean(m["submodules"], f"{key}.submodules") if "submodules" in m else False
        settings = _config_settings(r, m["config_settings"], f"{key}.config_settings") \
            if "config_settings" in m else ()
        patches = tuple(_source_patch(r, item, f"{key}.patches[{j}]")
                        for j, item in enumerate(r.sequence(m["patches"], f"{key}.patches", 1))) \
            if "patches" in m else ()
        prebuilt = read_prebuilt(r, m["prebuilt"], f"{key}.prebuilt", package) if "prebuilt" in m else None
        if prebuilt and editable:
            raise r.fail(m["prebuilt"].line, f"{key}.prebuilt", "an editable install keeps the checkout; a prebuilt "
                                                               "wheel has none to keep")
        build_env = read_build_env(reading, m["build_env"], f"{key}.build_env", read_env) if "build_env" in m else ()
        return GitStep(name, r.string(m["why"], f"{key}.why"), gate, package, pinned_version(req) or "",
                       tuple(sorted(req.extras)), url, rev, subdirectory, isolation, builder, editable, checkout,
                       node.line, env, needs, submodules, settings, patches, prebuilt, build_env,
                       env_cases(env, build_env, reading.variants), read_source_allow_missing(r, m, key))

    def check(self, entries: Sequence[tuple[str, StepSpec]], reading: StepReading) -> None:
        """A package built from git is neither a shared pin nor in a wheel set: the index would offer another build."""
        pins = {p.name: p for p in reading.shared_pins}
        wheels: dict[str, tuple[str, int]] = reading.claims.get("wheels", {})  # package -> (its pin, its line)
        for key, spec in entries:
            assert isinstance(spec, GitStep)
            if spec.package in wheels:
                raise reading.reader.fail(spec.line, f"{key}.package",
                                          f"{spec.package} is in a wheel set (line {wheels[spec.package][1]}) and "
                                          "built from git here; keep one source")
            if spec.package in pins:
                raise reading.reader.fail(spec.line, f"{key}.package",
                                          f"{spec.package} is a shared pin (line {pins[spec.package].line}) and built "
                                          "from git here; keep one source")

    def provides(self, step: Step) -> tuple[str, ...]:
        assert isinstance(step.spec, GitStep)
        return (step.spec.package,)

    def effect(self, step: Step) -> Effect:
        """Its package, --no-deps; its requirements read on the host from the commit's PKG-INFO or
        pyproject.toml where they are static, else unchecked (the build's `pip check` judges the wheel)."""
        spec = step.spec
        assert isinstance(spec, GitStep)
        if not step.active:
            return Effect()

        def read(source):
            meta, why = read_or_reason(lambda: git_metadata(spec.url, spec.rev, spec.subdirectory, spec.package,
                                                            spec.version))
            return meta, (f"built from commit {spec.rev} of {spec.url} in the build; its requirements are not "
                          f"read on the host: {why}")
        return Effect(direct=(DirectInstall(spec.package, spec.version, "git", spec.extras, step.why, read=read,
                                            local=spec.prebuilt),))

    def allowances(self, step: Step) -> dict[str, dict[str, str]]:
        return source_allowances(step)

    def invariant(self, step: Step) -> tuple[GitStep, ...]:
        """After the last step, its package must be installed at its version."""
        assert isinstance(step.spec, GitStep)
        return (step.spec,)

    def view(self, step: Step) -> GitView:
        assert isinstance(step.spec, GitStep)
        return GitView(step, step.spec, self)

    identity_section = "sources"

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        """An active step's repository and commit, and the bytes of the patches it applies (as they are now:
        staging refuses a file that no longer matches the manifest)."""
        spec = step.spec
        assert isinstance(spec, GitStep)
        if not step.active:
            return ()
        patches = [{"file": p.file, "sha256": sha256_file(root / p.file) if (root / p.file).is_file() else "missing"}
                   for p in spec.patches]
        return ({"step": step.name, "url": spec.url, "commit": spec.rev, **({"patches": patches} if patches else {}),
                 **prebuilt_identity(step, plan, root, f"commit {spec.rev}"), **build_env_identity(spec, plan)},)

    def stage(self, step: Step, staging: Staging) -> None:
        """Its patches into the context's git-patches/<step>/, checked against the manifest's reading; its
        prebuilt wheel, if wheels/ holds it, into wheels/<step>/."""
        spec = step.spec
        assert isinstance(spec, GitStep)
        stage_prebuilt(step, staging, self.noun)
        if not spec.patches:
            return
        directory = staging.context / patches_dir(step.name)
        directory.mkdir(parents=True, exist_ok=True)
        for i, patch in enumerate(spec.patches):
            stage_patch_file(staging, patch.file, patch.sha256, directory / f"{i:02d}.patch", f"git step {step.name}")

    def sbom(self, step: Step, entry: dict) -> tuple[SbomPart, ...]:
        assert isinstance(step.spec, GitStep)
        commit = entry["commit"]
        return (SbomPart("library", step.spec.package, f"git:{step.name}", step.spec.version,
                         (("sha1", commit),) if len(commit) == 40 else (),
                         (("source", "git"), ("step", step.name), ("commit", commit)), ("vcs", entry["url"])),)


KIND = Git()
