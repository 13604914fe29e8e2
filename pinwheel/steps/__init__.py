"""Step kinds: each kind of install step as one building block.

- base: what a kind provides (StepKind) and what a step does to the Python environment (Effect);
- registry: the kinds, one line each;
- one module per kind, named as the manifest's `kind:` names it (wheels.py: `kind: wheels`).
"""
from __future__ import annotations

from .base import ADOPT_APT_INSTALL, ADOPT_ENV, ADOPT_GIT_SOURCE, ADOPT_PIP_INSTALL, ADOPT_PIP_UNINSTALL, ADOPT_SDIST_BUILD, \
    ADOPT_SHELL, ADOPT_UV_SYNC, ADOPT_WHEEL_DOWNLOAD, Effect, StepKind
from .registry import KINDS, build_point, built_in_image, kind_adopting, kind_listed_as, kind_of

__all__ = ["ADOPT_APT_INSTALL", "ADOPT_ENV", "ADOPT_GIT_SOURCE", "ADOPT_SDIST_BUILD", "ADOPT_SHELL", "ADOPT_UV_SYNC", "ADOPT_PIP_INSTALL", "ADOPT_PIP_UNINSTALL", "ADOPT_WHEEL_DOWNLOAD",
           "KINDS", "Effect", "StepKind", "build_point", "built_in_image", "kind_adopting", "kind_listed_as",
           "kind_of"]
