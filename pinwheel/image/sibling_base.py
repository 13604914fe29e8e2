"""A base image that another manifest of the same repository builds: an example image built on a
stand-in base (images/sglang-base/) names that image's repository and literal tag as its `base`, and
`build` makes it first when the engine lacks it, as it makes a bootstrap base."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from ..workspace import Workspace


class SiblingBase(NamedTuple):
    manifest: Path
    variant: str


def sibling_base(ws: Workspace, base: str) -> SiblingBase | None:
    """The manifest and variant of this repository whose build tags ``base`` (its repository and a tag
    pattern without placeholders), other than the manifest at ``ws`` itself; None where none does."""
    from .. import manifest as manifest_mod
    name, colon, tag = base.partition("@")[0].rpartition(":")
    if not colon or "/" in tag:
        return None
    for path in ws.manifests():
        if path.parent.resolve() == ws.root.resolve():
            continue
        try:
            m = manifest_mod.load(path)
        except manifest_mod.ManifestError:
            continue  # a broken sibling is its own command's error, not this build's
        if m.image.repository != name:
            continue
        for v in m.variants.values():
            if v.tag == tag and "{" not in v.tag:
                return SiblingBase(path, v.name)
    return None
