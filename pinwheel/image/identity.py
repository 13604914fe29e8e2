"""What decides an image, as one value: the immutable tag and the labels hash all of it.

The inputs are the manifest and the lock, the base's digest, the bytes of every
local wheel the build mounts (or, for one that is missing, what stood in for
it: its fallback pin, or nothing), and what each step's kind says of it
(StepKind.identity: a release asset's sha256, a git source's commit, a patch's
bytes), one section per kind. Two builds with equal inputs get the same tag; a
replaced local wheel, a moved base or an edited patch gets another.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..fsutil import sha256_file
from ..lock import lock_sha256
from ..plan import Plan
from ..steps import KINDS, kind_of
from ..workspace import Workspace
from . import labels

FORMAT = "pinwheel.inputs/1"
# Sections every identity document holds, even empty, so that the digests made before kinds named their own
# sections still hold; any other section is there only when a step fills it.
ALWAYS = ("assets", "sources", "patches")


@dataclass(frozen=True)
class LocalWheelInput:
    package: str
    glob: str
    wheel: str | None  # the file the build mounts; None when it is missing
    sha256: str | None
    stand_in: str | None  # for a missing wheel: "fallback pkg==1.0" | "skipped"

    def to_json(self) -> dict:
        if self.wheel is not None:
            return {"package": self.package, "glob": self.glob, "wheel": self.wheel, "sha256": self.sha256}
        return {"package": self.package, "glob": self.glob, "missing": self.stand_in}


@dataclass(frozen=True)
class ContentInputs:
    """Everything that decides one Plan's image; ``digest`` names it."""

    manifest_sha256: str
    lock_sha256: str
    base: str  # the reference FROM is given
    base_digest: str | None  # what it named when built (digest or image id); None: not resolvable here
    local_wheels: tuple[LocalWheelInput, ...]
    # (section, its entries) from the steps' kinds, in ALWAYS then registry order: each entry names its step
    sections: tuple[tuple[str, tuple[dict, ...]], ...]
    platform: str

    def section(self, name: str) -> tuple[dict, ...]:
        return next((entries for key, entries in self.sections if key == name), ())

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "manifest": self.manifest_sha256,
            "lock": self.lock_sha256,
            "platform": self.platform,
            "base": {"name": self.base, "digest": self.base_digest},
            "local_wheels": [w.to_json() for w in self.local_wheels],
            **{key: list(entries) for key, entries in self.sections},
        }

    @property
    def digest(self) -> str:
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def labels(self) -> dict[str, str]:
        return {
            labels.INPUTS: json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")),
            labels.INPUTS_SHA256: self.digest,
        }


def base_digest(engine, base: str) -> str | None:
    """What the base reference names: the digest it pins, else the local image's registry digest or id."""
    if "@sha256:" in base:
        return base.rsplit("@", 1)[1]
    if engine is None or not engine.image_exists(base):
        return None
    return engine.repo_digest(base) or engine.image_id(base)


def local_wheel_inputs(plan: Plan, wheels_dir: Path) -> tuple[LocalWheelInput, ...]:
    out = []
    for pkg in plan.packages():
        if not pkg.local:
            continue
        found = [w for w in plan.local_wheels(wheels_dir, pkg.local.glob) if w.is_file()]
        if found:  # more than one match is refused before any build; each is hashed all the same
            out.extend(LocalWheelInput(pkg.name, pkg.local.glob, w.name, sha256_file(w), None) for w in found)
            continue
        if pkg.local.if_missing == "fallback" and pkg.fallback:
            stand_in = f"fallback {pkg.fallback.pinned}" + (" --no-deps" if pkg.fallback.no_deps else "")
        else:
            stand_in = "skipped" if pkg.local.if_missing == "skip" else "missing"
        out.append(LocalWheelInput(pkg.name, pkg.local.glob, None, None, stand_in))
    return tuple(out)


def step_sections(plan: Plan, root: Path) -> tuple[tuple[str, tuple[dict, ...]], ...]:
    """What each step's kind adds to the identity, by section: ALWAYS first, then in registry order."""
    found: dict[str, list[dict]] = {key: [] for key in ALWAYS}
    for key in (KINDS[name].identity_section for name in KINDS):
        if key:
            found.setdefault(key, [])
    for step in plan.steps:
        kind = kind_of(step)
        if kind.identity_section:
            found[kind.identity_section].extend(kind.identity(step, plan, root))
    return tuple((key, tuple(entries)) for key, entries in found.items() if entries or key in ALWAYS)


def content_inputs(plan: Plan, root: Path, base: str, base_id: str | None) -> ContentInputs:
    """The inputs of ``plan``'s image built FROM ``base`` (which named ``base_id``)."""
    ws = Workspace(Path(root), plan.image)
    return ContentInputs(
        manifest_sha256=plan.manifest_sha256,
        lock_sha256=lock_sha256(ws.plan_lock_dir(plan)),
        base=base,
        base_digest=base_id,
        local_wheels=local_wheel_inputs(plan, ws.wheels_dir),
        sections=step_sections(plan, Path(root)),
        platform=plan.container_platform,
    )
