"""Step kinds: each kind of install step as one building block.

- base: what a kind provides (StepKind) and what a step does to the Python environment (Effect);
- registry: the kinds, one line each;
- one module per kind, named as the manifest's `kind:` names it (wheels.py: `kind: wheels`).
"""
from __future__ import annotations

from .base import Effect, StepKind
from .registry import KINDS, kind_of

__all__ = ["KINDS", "Effect", "StepKind", "kind_of"]
