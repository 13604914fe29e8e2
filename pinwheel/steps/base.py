"""What a step kind is: the parts of one building block, and the defaults most kinds keep.

A kind is one module of this package (its model, its reading and checks, its
effect, its lock part, its invariant and the view its partial reads), one
Jinja partial (pinwheel/templates/steps/<kind>.j2) and one line in the
registry. The pipeline asks the kind of each step, never the step's type:

- manifest.load reads an entry with ``read`` and, once all are read, calls ``check``;
- plan_variant asks ``packages`` for the Python distributions a step names, and
  ``build_args`` for the build arguments its partial reads, with the variant's values;
- the resolver asks ``effect`` what the step does to the Python environment;
- lock and render ask ``slice_packages`` whether (and with what) the step has a lock slice;
- render includes ``partial`` with ``view`` for each step, and again, after the
  last step, for each step with an ``invariant``;
- build asks ``stage`` to put the files the step's partial mounts into the build
  context, ``identity`` for what of the step joins the image's content identity
  (under the kind's ``identity_section``), ``sbom`` for the SBOM components of
  each such entry, and ``label_entries`` for what the image's label
  ``io.pinwheel.<label>`` says of the step;
- import (pinwheel.adopt) asks the kind that ``adopts`` what it found in a
  hand-written Dockerfile (one of ADOPTS) for an ``entry`` and its ``adopted_name``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Protocol, Sequence

from ..model.manifest import StepSpec
from ..model.reader import StepReading

if TYPE_CHECKING:
    from ..plan import Plan, Step
    from ..model.packages import PlannedPackage


@dataclass(frozen=True)
class DirectInstall:
    """A distribution a step installs from outside the index and the lock (a git commit, a release asset),
    --no-deps unless it is one of a fixed set (``no_deps``). Its requirements are judged from ``metadata`` where the host could read it; without
    it they are unchecked, never clean."""

    name: str  # canonical (PEP 503)
    version: str
    source: str  # what Installed.source says: "git", "asset"
    extras: tuple[str, ...] = ()
    why: str | None = None
    metadata: Any = None  # its METADATA (index.metadata.DistMetadata), or None
    unread: str = ""  # why there is no metadata: the unchecked verdict's detail
    # Reads the metadata on the host when the resolver asks (a source's PKG-INFO or pyproject.toml):
    # read(source) -> (DistMetadata or None, why not). None: ``metadata`` and ``unread`` are all there is.
    read: Any = field(default=None, compare=False)
    # False for a member of a fixed set installed with its dependencies from that set (a uv project's
    # uv.lock): its requirements are judged like an index package's, not as suppressed.
    no_deps: bool = True
    # A prebuilt wheel in wheels/ (steps/prebuilt.Prebuilt: its glob) that takes the build's place when the host
    # has it: the resolver judges that wheel's metadata, as the source `local`, and says which it judged.
    local: Any = None


@dataclass(frozen=True)
class Effect:
    """What one step does to the Python environment, as the resolver judges it."""

    installs: tuple[PlannedPackage, ...] = ()  # distributions it installs or replaces, with their flags and source
    removes: tuple[str, ...] = ()  # distributions it takes out
    outside: tuple[str, ...] = ()  # what it changes outside the Python environment, named for the report
    direct: tuple[DirectInstall, ...] = ()  # what it installs from outside the index and the lock, --no-deps

    @property
    def empty(self) -> bool:
        """True when the Python environment is the same after the step as before it."""
        return not (self.installs or self.removes or self.direct)


# What of a hand-written Dockerfile `import` writes as a manifest entry: each is the one kind's whose ``adopts``
# names it, so import asks for the kind by what it found, never by the kind's name.
ADOPT_PIP_INSTALL = "pip install"  # index requirements and local wheels; `python -c` checks attach to these
ADOPT_PIP_UNINSTALL = "pip uninstall"
ADOPT_APT_INSTALL = "apt-get install"
ADOPT_WHEEL_DOWNLOAD = "wheel download"  # a wheel fetched by URL, then pip-installed
ADOPT_GIT_SOURCE = "git source"  # a git URL, or a checkout the RUN cloned
ADOPT_ENV = "ENV"  # the image's environment variables
ADOPT_SHELL = "shell commands"  # commands no package kind expresses: a make build, a binary download, a symlink
ADOPT_UV_SYNC = "uv sync"  # a uv project installed from its own uv.lock
ADOPT_SDIST_BUILD = "sdist build"  # an index pin built from its sdist (--no-build-isolation)
ADOPTS = (ADOPT_PIP_INSTALL, ADOPT_PIP_UNINSTALL, ADOPT_APT_INSTALL, ADOPT_WHEEL_DOWNLOAD, ADOPT_GIT_SOURCE,
          ADOPT_ENV, ADOPT_SHELL, ADOPT_UV_SYNC, ADOPT_SDIST_BUILD)


class StagingError(Exception):
    """A file a step puts in the build context cannot be had, or is not the one the manifest pins."""


@dataclass(frozen=True)
class Staging:
    """Where a step's files go before a build: the project's root, the build context, the download cache."""

    plan: Plan
    root: Path  # the manifest's directory: a step's files are named relative to it
    context: Path  # the build context being assembled
    cache: Path  # the content-addressed download cache (Workspace.asset_cache)


@dataclass(frozen=True)
class SbomPart:
    """One SBOM component a step adds, in plain words; the SBOM writer makes the CycloneDX of it."""

    type: str  # "library" (a Python distribution: a pypi purl) | "file"
    name: str
    ref: str  # its bom-ref, unique in the document
    version: str | None = None
    hashes: tuple[tuple[str, str], ...] = ()  # (algorithm "sha256" | "sha1", hex digest)
    properties: tuple[tuple[str, str], ...] = ()  # pinwheel:<key> = value; empty values are left out
    link: tuple[str, str] | None = None  # ("distribution" | "vcs", url)


class PartialView(Protocol):
    """What Dockerfile.j2 reads of every step; the kind's partial reads the rest."""

    partial: str  # the template to include
    invariant: Sequence[Any]  # the kind's invariant of the step; empty: the partial is included once


@dataclass(frozen=True)
class KindView:
    """What a kind's partial reads of one step: the step (its fields read through), its manifest entry,
    its partial, its invariant and its gate-off message. Each kind's view adds its own values."""

    step: Step
    spec: Any
    kind: "StepKind"

    @property
    def partial(self) -> str:
        return self.kind.partial

    @property
    def invariant(self) -> tuple[Any, ...]:
        return self.kind.invariant(self.step)

    @property
    def gate_off_message(self) -> str:
        return f"pinwheel: {self.step.gate}=0: skipping {self.kind.noun} {self.step.name}"

    def __getattr__(self, name: str):
        return getattr(self.step, name)


def read_unique(reading: StepReading, node: Any, key: str, kind: str, parse, twice: str) -> list:
    """The step's `packages`, each read by parse(reader, item, key); a name taken by an earlier entry of any
    step of this kind is a located error (`twice`: "listed twice", "removed twice")."""
    r = reading.reader
    claimed: dict[str, int] = reading.claimed(kind)  # package -> the line that took it
    out = []
    for j, item in enumerate(r.sequence(node, f"{key}.packages", 1)):
        pkg = parse(r, item, f"{key}.packages[{j}]")
        if pkg.name in claimed:
            raise r.fail(pkg.line, f"{key}.packages[{j}].name",
                         f"{pkg.name} is {twice} (first on line {claimed[pkg.name]})")
        claimed[pkg.name] = pkg.line
        out.append(pkg)
    return out


class StepKind:
    """One kind of install step. Subclasses set ``name`` and ``noun`` and override what they do."""

    name: ClassVar[str]  # the manifest's `kind:` value, the module's name and the partial's
    noun: ClassVar[str]  # how comments and messages call one step of this kind
    # Whether its install needs none of the earlier steps' files, only the venv's skeleton: then, with
    # parent-free layers, it installs in a stage of its own (its partial's "apart" part) and the image
    # joins that stage's files (its "join" part).
    installs_apart: ClassVar[bool] = False

    @property
    def partial(self) -> str:
        return f"steps/{self.name}.j2"

    def read(self, node: Any, key: str, reading: StepReading) -> StepSpec:
        """One manifest entry of this kind, validated; errors are located (file:line: key: message)."""
        raise NotImplementedError

    def check(self, entries: Sequence[tuple[str, StepSpec]], reading: StepReading) -> None:
        """Checks across every step of this kind (each with its manifest key), once all steps are read."""

    def packages(self, spec: StepSpec, gate_on: Mapping[str, bool], active: bool) -> tuple[PlannedPackage, ...]:
        """The Python distributions the step names in the Plan (Step.packages); none by default."""
        return ()

    def build_args(self, spec: StepSpec, variant: Any) -> dict[str, str]:
        """Build arguments the step's partial reads, with this variant's values (the Dockerfile serves every
        variant; `build` passes each its own); none by default."""
        return {}

    def provides(self, step: Step) -> tuple[str, ...]:
        """The distributions the step installs, active or not (a later build's `needs` finds its layer by
        them): the packages it names by default."""
        return tuple(p.name for p in step.packages)

    def effect(self, step: Step) -> Effect:
        """What the step installs, removes or replaces in the Python environment; nothing by default."""
        return Effect()

    def allowances(self, step: Step) -> dict[str, dict[str, str]]:
        """package -> {requirement name: why}: what the step's own --no-deps install may leave unmet by the
        manifest's `allow_missing` (a wheel set's packages carry theirs on the package); none by default."""
        return {}

    def slice_packages(self, step: Step) -> tuple[PlannedPackage, ...]:
        """The packages the step's lock slice installs, gated on or not. A step has a slice exactly when
        this is not empty; by default it has none."""
        return ()

    def scripts(self, step: Step) -> tuple[tuple[int, str], ...]:
        """(manifest line, script) of each shell script the active step runs as the manifest writes it, which
        the resolver does not judge: `report` runs the audit's RUN rules over each; none by default."""
        return ()

    def lock_part(self, step: Step) -> dict:
        """What of the step, besides its packages, the lock's inputs digest holds (a patch's sha256); none by
        default."""
        return {}

    def invariant(self, step: Step) -> tuple[Any, ...]:
        """What the build asserts about the step after the last step, one item per check its partial
        renders; none by default (the Python environment as a whole is checked against the lock)."""
        return ()

    def view(self, step: Step) -> PartialView:
        """What the partial reads for this step."""
        raise NotImplementedError

    # True where what it installs is built inside the image (no wheel of it exists on the host: the ABI check
    # reads its ELF from the built image). A direct install's ``source`` is its kind's name.
    builds_in_image: ClassVar[bool] = False

    # -- import: what of a hand-written Dockerfile it expresses

    adopts: ClassVar[str | None] = None  # one of ADOPTS: what import writes as a step of this kind
    named_by_package: ClassVar[bool] = False  # an imported step is named by its first package alone

    def entry(self, why: str, **fields: Any) -> dict:
        """A manifest entry of this kind as import writes it: its name is given once all steps are known."""
        return {"name": "", "kind": self.name, "why": why, **fields}

    def adopted_name(self, base: str) -> str:
        """An imported step's name, from its first package's (``base``): prefixed by the kind's, unless the
        kind is ``named_by_package``."""
        return base if self.named_by_package else f"{self.name}-{base}"[:40].strip("-")

    # -- the build: its context, its identity, its SBOM and labels

    identity_section: ClassVar[str | None] = None  # the key of the identity document its entries go under
    label: ClassVar[str | None] = None  # the image label io.pinwheel.<label> its label_entries go under

    def stage(self, step: Step, staging: Staging) -> None:
        """Put the files the step's partial mounts into the build context (StagingError when one cannot be
        had or is not the pinned one); nothing by default."""

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        """What of the step decides the image beyond the manifest and the lock (a download's digest, a commit,
        a file's bytes), as JSON entries under ``identity_section``; none by default."""
        return ()

    def sbom(self, step: Step, entry: dict) -> tuple[SbomPart, ...]:
        """The SBOM components of one of the step's identity entries; none by default."""
        return ()

    def label_entries(self, step: Step, plan: Plan) -> dict:
        """What the image's ``label`` says of this step, by key (merged over the Plan's steps); none by default."""
        return {}
