"""Where this payload runs from, and what it is: the zipapp archive the build ships, by its bytes.

The package runs from its archive (`python smoke_payload.pyz ...`); its child processes run that archive
again (see children). Imported from a source tree (pinwheel reads NAMED_CHECKS and level_status), there
is no archive, and nothing here starts a child.
"""
from __future__ import annotations

import hashlib
import os
import zipimport


def archive() -> str | None:
    """The absolute path of the zipapp this package was loaded from; None when it was not."""
    loader = __spec__.loader if __spec__ is not None else None
    if isinstance(loader, zipimport.zipimporter):
        return os.path.abspath(loader.archive)
    return None


def digest() -> str:
    """sha256 of the payload itself: a result stored by another version of these checks is not this one's.

    The archive's bytes; from a source tree, every module of the package (its path and bytes)."""
    h = hashlib.sha256()
    path = archive()
    if path is not None:
        with open(path, "rb") as fh:
            h.update(fh.read())
        return h.hexdigest()
    root = os.path.dirname(os.path.abspath(__file__))
    for folder, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, name), "rb") as fh:
                h.update(os.path.relpath(os.path.join(folder, name), root).encode() + b"\0" + fh.read())
    return h.hexdigest()
