"""The step kinds, one line each: the module pinwheel/steps/<name>.py, whose KIND is its building block.

The order is the order kinds are listed in messages and checked in.
"""
from __future__ import annotations

from importlib import import_module

from .base import StepKind

_MODULES = (
    "wheels",  # index, local and fallback packages
    "apt",  # Debian packages, pinned
    "remove",  # distributions taken out of the base's environment
    "git",  # one distribution built from a git repository at a full commit id
    "asset",  # one wheel downloaded from a URL, pinned by sha256 (per architecture if need be)
    "patch",  # patches applied to an installed package at an exact version, every hunk
    "sdist",  # one index sdist, pinned by sha256, built into a wheel in a builder stage
)


def _kind(module: str) -> StepKind:
    kind = import_module(f"{__package__}.{module}").KIND
    assert kind.name == module, f"pinwheel.steps.{module} holds kind {kind.name!r}"
    return kind


KINDS: dict[str, StepKind] = {m: _kind(m) for m in _MODULES}


def kind_of(step) -> StepKind:
    """The kind of a Plan step (or of a manifest entry)."""
    return KINDS[step.kind]
