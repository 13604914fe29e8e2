"""Patches on the host: copied into the build context (patches/<step>/NN.patch), each checked against the digest
the manifest was read with, and named in the image's labels."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..fsutil import sha256_file
from ..plan import Plan
from ..workspace import OutsideProject, inside_project
from ..steps.patch import KIND as PATCH, context_dir, context_name, plan_patches
from .labels import PREFIX

PATCHES_LABEL = f"{PREFIX}.patches"


class PatchError(Exception):
    """A patch file changed since the manifest was read, or is gone."""


def stage_patches(plan: Plan, root: Path, context: Path) -> None:
    """Every patch step's files into the context; each step gets its directory, active or not."""
    for step in plan.steps:
        if step.kind == PATCH.name:
            (context / context_dir(step.name)).mkdir(parents=True, exist_ok=True)
    for step, i, patch in plan_patches(plan):
        try:
            source = inside_project(root, patch.file, "patch")
        except OutsideProject as exc:
            raise PatchError(str(exc)) from None
        dest = context / context_dir(step.name) / context_name(i)
        try:
            shutil.copyfile(source, dest)
        except OSError as exc:
            raise PatchError(f"patch {patch.file} of step {step.name} cannot be read: {exc}") from None
        found = sha256_file(dest)
        if found != patch.sha256:
            raise PatchError(f"patch {patch.file} of step {step.name} changed while building: expected sha256 "
                             f"{patch.sha256}, found {found}")


def patch_labels(plan: Plan) -> dict[str, str]:
    """The label naming every patch an active step applies: file -> applies_to, sha256."""
    found = {p.file: {"applies_to": p.applies_to, "sha256": p.sha256} for s, _, p in plan_patches(plan) if s.active}
    return {PATCHES_LABEL: json.dumps(found, sort_keys=True, separators=(",", ":"))} if found else {}
