"""The step kinds, one line each: the module pinwheel/steps/<name>.py (a '-' in the name is '_' in the module's),
whose KIND is its building block.

The order is the order kinds are listed in messages and checked in. A kind's module is imported when the
kind is first asked for, so a command pays only for the kinds its manifest uses.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from .base import ADOPTS, StepKind

if TYPE_CHECKING:
    from ..plan import Step

_MODULES = (
    "wheels",  # index, local and fallback packages
    "apt",  # Debian packages, pinned
    "remove",  # distributions taken out of the base's environment
    "git",  # one distribution built from a git repository at a full commit id
    "asset",  # one wheel downloaded from a URL, pinned by sha256 (per architecture if need be)
    "patch",  # patches applied to an installed package at an exact version, every hunk
    "sdist",  # one index sdist, pinned by sha256, built into a wheel in a builder stage
    "env",  # environment variables of the image (ENV), each with a why, for every variant or per variant
    "run",  # a shell script the resolver does not judge, its downloads checked, maybe in a builder stage
    "uv-project",  # a project installed from its pyproject.toml and uv.lock (uv sync --frozen), a fixed set
)
# The manifest's older top-level lists, each of one kind's entries only: `wheel_sets:` is `steps:` of wheel sets.
_OLDER_LISTS = {"wheel_sets": "wheels"}


def _kind(name: str) -> StepKind:
    module = name.replace("-", "_")  # `kind: uv-project` lives in uv_project.py
    kind = import_module(f"{__package__}.{module}").KIND
    assert kind.name == name, f"pinwheel.steps.{module} holds kind {kind.name!r}"
    return kind


class _Kinds(Mapping[str, StepKind]):
    """The kinds by name, in _MODULES order; each module imported on the first lookup of its kind."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        self._names = modules
        self._loaded: dict[str, StepKind] = {}

    def __getitem__(self, name: str) -> StepKind:
        if name not in self._loaded:
            if name not in self._names:
                raise KeyError(name)
            self._loaded[name] = _kind(name)
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


KINDS: Mapping[str, StepKind] = _Kinds(_MODULES)


def kind_of(step) -> StepKind:
    """The kind of a Plan step (or of a manifest entry)."""
    return KINDS[step.kind]


def kind_listed_as(key: str) -> StepKind | None:
    """The kind every entry of the manifest's older top-level list `key` is (wheel_sets); None for `steps`."""
    return KINDS[_OLDER_LISTS[key]] if key in _OLDER_LISTS else None


def kind_adopting(what: str) -> StepKind:
    """The kind whose steps express `what` (one of ADOPTS) of a hand-written Dockerfile, for import."""
    assert what in ADOPTS, what
    found = [KINDS[name] for name in KINDS if KINDS[name].adopts == what]
    assert len(found) == 1, f"{len(found)} kinds adopt {what!r}"
    return found[0]


def built_in_image(source: str) -> bool:
    """Whether a distribution of this source (Installed.source) is built inside the image: a direct install's
    source is its kind's name."""
    return source in KINDS and KINDS[source].builds_in_image


def build_point(step: Step, steps: Sequence[Step]) -> Step | None:
    """The last earlier step that installs a package the step's build needs (its spec's ``needs``): its builder
    stage starts from the image as it is after that step. None: the build needs nothing installed."""
    needs = set(getattr(step.spec, "needs", ()) or ())
    if not needs:
        return None
    providers = [s for s in steps if s.index < step.index and needs & set(kind_of(s).provides(s))]
    return providers[-1] if providers else None


def step_allowances(plan) -> dict[str, dict[str, str]]:
    """package -> {requirement name: why}: what the packages the Plan's steps build or fetch themselves (not
    a wheel set's, which carry theirs) may leave unmet, by their steps' `allow_missing`."""
    out: dict[str, dict[str, str]] = {}
    for s in plan.steps:
        for package, allowed in kind_of(s).allowances(s).items():
            out.setdefault(package, {}).update(allowed)
    return out
