"""Load and validate wheels_manifest.yaml into a typed Manifest.

Every error names the file, the line and the dotted key, so a bad manifest is
fixed in one look. Nothing here touches the network or the engine.

- load: the top level, load() and parse();
- the values it reads with and produces (the file's nodes, the Reader, the Manifest and its parts) live in
  pinwheel/model, below the step kinds, which read with them too.

Each step's model and checks live with its kind, in pinwheel/steps.
"""
from __future__ import annotations

import os  # noqa: F401  (manifest.os: the module the file checks call, as the tests reach it)

from .load import load, parse
from ..model.manifest import GATE_VARIABLES, MANIFEST_VERSION, TAG_FIELDS, Gate, ImageSpec, Manifest, SharedPin, StepSpec, \
    Variant, pinned_version
from ..model.source import MAX_DEPTH, MAX_FILE_BYTES, MAX_STRING_CHARS, ManifestError

__all__ = [
    "GATE_VARIABLES", "MANIFEST_VERSION", "MAX_DEPTH", "MAX_FILE_BYTES", "MAX_STRING_CHARS", "TAG_FIELDS", "Gate",
    "ImageSpec", "Manifest", "ManifestError", "SharedPin", "StepSpec", "Variant", "load", "parse", "pinned_version",
]
