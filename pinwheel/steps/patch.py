"""patch steps: patches applied to an installed package, each aimed at an exact version, every hunk applied.

The building block of kind `patch`:
- manifest: a PatchStep of Patches (file, applies_to, strip, why). `file` is a
  path relative to the manifest's directory, read when the manifest is read
  (its sha256 is part of the step); `applies_to` is the exact pin the patch is
  written against (name==version); `strip` is patch's -p (default 1);
- plan: it names no distribution it installs (Step.packages is empty);
- effect: none on the versions the resolver judges; each patch is named for
  the report (Effect.outside);
- lock: no slice; each patch's sha256 joins the lock's inputs (lock_part), so
  a changed patch makes the lock stale, and so the image's immutable tag moves;
  the image's `io.pinwheel.patches` label names every patch with its digest;
- host: `build` copies each patch into the context's patches/<step>/ and
  checks its digest against the manifest's reading (``stage``); each active
  patch's bytes join the image's identity (section `patches`) and its SBOM (a
  file component);
- partial: templates/steps/patch.j2, one RUN per step. For each patch: the
  installed version of its package must be applies_to's, or the build fails
  naming both; then `patch --forward --batch --fuzz=0` applies it in the directory the
  distribution is installed in (site-packages: the patch's paths, after
  strip, start with the package's top-level directory). A hunk that does not
  apply, or a patch already applied, fails the build naming the patch; no
  reject or backup file is left;
- invariant: none after the last step (a later step that reinstalls the
  package would undo the patch: the version check cannot see that).
"""
from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from packaging.utils import canonicalize_name

from ..model.manifest import pinned_version
from ..fsutil import sha256_file
from ..model.reader import Reader, StepReading
from ..model.source import Scalar, show
from ..workspace import OutsideProject, inside_project
from .base import Effect, KindView, SbomPart, Staging, StagingError, StepKind

if TYPE_CHECKING:
    from ..plan import Plan, Step

_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*$")
MAX_BYTES = 4 << 20
MOUNT = "/tmp/pinwheel-patches"


@dataclass(frozen=True)
class Patch:
    file: str  # relative to the manifest's directory
    sha256: str  # of its bytes when the manifest was read
    package: str  # canonical name
    version: str
    strip: int
    why: str
    line: int

    @property
    def applies_to(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class PatchStep:
    kind: ClassVar[str] = "patch"

    name: str
    why: str
    gate: str | None
    patches: tuple[Patch, ...]
    line: int


def context_dir(step_name: str) -> str:
    return f"patches/{step_name}"


def context_name(index: int) -> str:
    """A patch's file name in the context (by position: two patches may share a base name)."""
    return f"{index:02d}.patch"


def _strip(r: Reader, node: Any, key: str) -> int:
    if not isinstance(node, Scalar) or isinstance(node.value, bool) or not isinstance(node.value, int) \
            or not 0 <= node.value <= 9:
        raise r.fail(node.line, key, "must be an integer from 0 to 9 (patch's -p)")
    return node.value


def read_patch_file(r: Reader, node: Any, key: str) -> tuple[str, str]:
    """A patch file named relative to the manifest's directory, read now: (its name, the sha256 of its bytes).
    The git kind reads the patches it applies to a checkout with it too."""
    file = r.string(node, key)
    if not _FILE.fullmatch(file) or ".." in file.split("/"):
        raise r.fail(node.line, key, f"{show(file)} is not a relative path inside the manifest's directory")
    try:  # every directory on the way resolved: a symlinked one must not lead outside the project
        path = inside_project(Path(r.path).parent, file, "patch")
    except OutsideProject as exc:
        raise r.fail(node.line, key, str(exc)) from None
    try:  # a name the file system refuses (too long) is an OSError here, not a missing file
        if (Path(r.path).parent / file).is_symlink() or not path.is_file():
            raise r.fail(node.line, key, f"{file} is not a regular file next to the manifest")
        data = path.read_bytes()
    except OSError as exc:
        raise r.fail(node.line, key, f"{show(file)} cannot be read ({exc.strerror})") from None
    if len(data) > MAX_BYTES:
        raise r.fail(node.line, key, f"{file} is over {MAX_BYTES >> 20} MiB")
    return file, hashlib.sha256(data).hexdigest()


def read_strip(r: Reader, m: dict, key: str) -> int:
    """`strip` (patch's -p) of a patch entry; 1 when it is not given."""
    return _strip(r, m["strip"], f"{key}.strip") if "strip" in m else 1


def _patch(r: Reader, node: Any, key: str) -> Patch:
    m = r.mapping(node, key, {"file", "applies_to", "strip", "why"}, {"file", "applies_to", "why"}).value
    file, sha256 = read_patch_file(r, m["file"], f"{key}.file")
    req = r.requirement(m["applies_to"], f"{key}.applies_to")
    strip = read_strip(r, m, key)
    return Patch(file, sha256, canonicalize_name(req.name), pinned_version(req) or "",
                 strip, r.string(m["why"], f"{key}.why"), node.line)


@dataclass(frozen=True)
class PatchView(KindView):
    """A patch step as its partial reads it."""

    spec: PatchStep

    @property
    def context_dir(self) -> str:
        return context_dir(self.step.name)

    @property
    def mount(self) -> str:
        return f"{MOUNT}/{self.step.name}"

    @property
    def items(self) -> tuple[dict, ...]:
        return tuple({
            "patch": p,
            "path": f"{self.mount}/{context_name(i)}",
            "version_prefix": f"pinwheel: ERROR: patch step {self.step.name}: {p.file} applies to {p.applies_to}, "
                              "found",
            "failed_message": f"pinwheel: ERROR: patch step {self.step.name}: {p.file} does not apply to "
                              f"{p.applies_to} (every hunk must apply)",
            "applied_message": f"pinwheel: patch step {self.step.name}: {p.file} applied to {p.applies_to}",
        } for i, p in enumerate(self.spec.patches))



class Patches(StepKind):
    name = "patch"
    noun = "patch step"

    def read(self, node: Any, key: str, reading: StepReading) -> PatchStep:
        r = reading.reader
        m = r.mapping(node, key, {"name", "why", "gate", "patches"} | reading.common_keys,
                      {"name", "why", "patches"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        patches = tuple(_patch(r, item, f"{key}.patches[{j}]")
                        for j, item in enumerate(r.sequence(m["patches"], f"{key}.patches", 1)))
        return PatchStep(name, r.string(m["why"], f"{key}.why"), gate, patches, node.line)

    def effect(self, step: Step) -> Effect:
        """No version changes; each patch named for the report."""
        assert isinstance(step.spec, PatchStep)
        return Effect(outside=tuple(f"patch {p.file} (sha256 {p.sha256[:12]}) on {p.applies_to}"
                                    for p in step.spec.patches) if step.active else ())

    def lock_part(self, step: Step) -> dict:
        """Each patch's file, target and sha256: a changed patch makes the lock stale."""
        assert isinstance(step.spec, PatchStep)
        return {"patches": [{"file": p.file, "applies_to": p.applies_to, "strip": p.strip, "sha256": p.sha256}
                            for p in step.spec.patches]}

    def view(self, step: Step) -> PatchView:
        assert isinstance(step.spec, PatchStep)
        return PatchView(step, step.spec, self)

    identity_section = "patches"
    label = "patches"

    def stage(self, step: Step, staging: Staging) -> None:
        """Its files into the context's patches/<step>/, active or not (the Dockerfile mounts them all),
        each checked against the digest the manifest was read with."""
        assert isinstance(step.spec, PatchStep)
        (staging.context / context_dir(step.name)).mkdir(parents=True, exist_ok=True)
        for i, patch in enumerate(step.spec.patches):
            stage_patch_file(staging, patch.file, patch.sha256,
                             staging.context / context_dir(step.name) / context_name(i), f"step {step.name}")

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        """Each patch's bytes as they are now, of an active step (staging refuses a file that no longer
        matches the manifest)."""
        assert isinstance(step.spec, PatchStep)
        if not step.active:
            return ()
        return tuple({"step": step.name, "file": p.file,
                      "sha256": sha256_file(root / p.file) if (root / p.file).is_file() else "missing"}
                     for p in step.spec.patches)

    def sbom(self, step: Step, entry: dict) -> tuple[SbomPart, ...]:
        return (SbomPart("file", entry["file"], f"patch:{step.name}:{entry['file']}", None,
                         (("sha256", entry["sha256"]),), (("step", step.name),)),)

    def label_entries(self, step: Step, plan: Plan) -> dict:
        """file -> applies_to, sha256 of an active step's patches."""
        assert isinstance(step.spec, PatchStep)
        return {p.file: {"applies_to": p.applies_to, "sha256": p.sha256} for p in step.spec.patches} \
            if step.active else {}


class PatchError(StagingError):
    """A patch file changed since the manifest was read, or is gone."""


def stage_patch_file(staging: Staging, file: str, sha256: str, dest: Path, owner: str) -> None:
    """A patch file the manifest names, copied into the build context from inside the project and checked there
    against the digest the manifest was read with (the patch kind's and the git kind's patches)."""
    try:
        shutil.copyfile(inside_project(staging.root, file, "patch"), dest)
    except OutsideProject as exc:
        raise PatchError(str(exc)) from None
    except OSError as exc:
        raise PatchError(f"patch {file} of {owner} cannot be read: {exc}") from None
    found = sha256_file(dest)
    if found != sha256:
        raise PatchError(f"patch {file} of {owner} changed while building: expected sha256 {sha256}, found {found}")


def plan_patches(plan: Plan) -> list[tuple[Step, int, Patch]]:
    """(step, position, patch) of every patch step of a Plan, active or not (the Dockerfile mounts them all)."""
    return [(s, i, p) for s in plan.steps if s.kind == KIND.name and isinstance(s.spec, PatchStep)
            for i, p in enumerate(s.spec.patches)]


KIND = Patches()
