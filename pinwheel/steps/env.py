"""env steps: environment variables of the image (Dockerfile ENV), each with a why, for every variant or per variant.

The building block of kind `env`:
- manifest: an EnvStep of EnvVars (name, why, and either `value`, the same
  for every variant, or `variants: {variant: value}`, one for each variant).
  A name is a shell variable name; a variable is set by one env step only. A
  single value may refer to variables set before it (`$PATH`, `${CUDA_HOME}`);
  every other `$` stays a literal dollar. A per-variant value is taken as it
  is. An env step has no gate: ENV is not conditional in a Dockerfile;
- plan: it names no Python distributions; each per-variant variable is a build
  argument (PINWHEEL_ENV_<NAME>) with the variant's value (build_args);
- effect: none on the Python environment; each variable is named for the report;
- lock: no part (the values are in the manifest, which the lock's and the
  image's identity hash); identity: each variable with this variant's value
  (section `env`);
- partial: templates/steps/env.j2, one ENV instruction at the step's place in
  the step list, so later steps see it; values double-quoted with `\\`, `"` and
  stray `$` escaped; a per-variant variable reads its ARG, declared just
  before with the first variant's value as its default;
- invariant: none after the last step: only a later ENV line could change the
  value, and no other step renders one for a variable an env step sets.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..model.manifest import StepSpec
from ..model.reader import Reader, StepReading
from ..model.source import show
from .base import ADOPT_ENV, Effect, KindView, StepKind

if TYPE_CHECKING:
    from ..plan import Plan, Step

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_REFERENCE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
ARG_PREFIX = "PINWHEEL_ENV_"


@dataclass(frozen=True)
class EnvVar:
    name: str
    why: str
    value: str | None  # the same for every variant; None: per variant
    per_variant: tuple[tuple[str, str], ...]  # (variant, value), in the manifest's variant order
    line: int

    @property
    def arg(self) -> str:
        """The build argument a per-variant value arrives in."""
        return ARG_PREFIX + self.name

    def value_for(self, variant: str) -> str:
        return self.value if self.value is not None else dict(self.per_variant)[variant]


@dataclass(frozen=True)
class EnvStep:
    kind: ClassVar[str] = "env"

    name: str
    why: str
    gate: None
    vars: tuple[EnvVar, ...]
    line: int


def quoted(value: str, references: bool) -> str:
    """A Dockerfile ENV/ARG value in double quotes: `\\` and `"` escaped, and every `$` that is not a
    reference to a variable (or every `$`, without ``references``) escaped too."""
    out, i = ['"'], 0
    while i < len(value):
        m = _REFERENCE.match(value, i) if references else None
        if m:
            out.append(m.group(0))
            i = m.end()
            continue
        c = value[i]
        out.append("\\" + c if c in '\\"$' else c)
        i += 1
    out.append('"')
    return "".join(out)


def _var(r: Reader, node: Any, key: str, variants: list[str]) -> EnvVar:
    m = r.mapping(node, key, {"name", "why", "value", "variants"}, {"name", "why"}).value
    name = r.string(m["name"], f"{key}.name")
    if not _NAME.match(name) or name.startswith(ARG_PREFIX):
        raise r.fail(m["name"].line, f"{key}.name", f"{show(name)} is not an environment variable name this kind "
                                                    "sets (letters, digits, '_', not starting with a digit or "
                                                    f"{ARG_PREFIX})")
    why = r.string(m["why"], f"{key}.why")
    if ("value" in m) == ("variants" in m):
        raise r.fail(node.line, key, "needs exactly one of `value` (every variant) and `variants` (one per variant)")
    if "value" in m:
        return EnvVar(name, why, r.string(m["value"], f"{key}.value"), (), node.line)
    per = r.mapping(m["variants"], f"{key}.variants", set(variants))
    values = {v: r.string(per.value[v], f"{key}.variants.{v}") for v in per.value}
    missing = [v for v in variants if v not in values]
    if missing:
        raise r.fail(per.line, f"{key}.variants", f"no value for variant {', '.join(missing)}: every variant needs "
                                                  "one (or use `value`)")
    for v, text in values.items():
        if _REFERENCE.search(text):
            raise r.fail(per.value[v].line, f"{key}.variants.{v}", f"{show(text)} refers to a variable: a per-variant "
                                                                  "value is taken as it is; use `value` for that")
    return EnvVar(name, why, None, tuple((v, values[v]) for v in variants), node.line)


@dataclass(frozen=True)
class EnvView(KindView):
    """An env step as its partial reads it."""

    spec: EnvStep

    @property
    def vars(self) -> tuple[dict, ...]:
        return tuple({
            "var": v,
            "rendered": quoted(v.value, True) if v.value is not None else '"${' + v.arg + '}"',
            "defaults": {variant: quoted(value, False) for variant, value in v.per_variant},
        } for v in self.spec.vars)

    @property
    def per_variant(self) -> tuple[dict, ...]:
        return tuple(v for v in self.vars if v["var"].value is None)


class Env(StepKind):
    name = "env"
    adopts = ADOPT_ENV
    noun = "env step"

    def adopted_entry(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, adopted_entry below: asked through the kind, so import names no kind module."""
        return adopted_entry(*args, **kwargs)

    def settable(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, settable below: asked through the kind, so import names no kind module."""
        return settable(*args, **kwargs)

    def read(self, node: Any, key: str, reading: StepReading) -> EnvStep:
        r = reading.reader
        if isinstance(node.value, dict) and "gate" in node.value:
            raise r.fail(node.lines["gate"], f"{key}.gate", "an env step has no gate: ENV is not conditional in a "
                                                           "Dockerfile; give the variable a value per variant")
        m = r.mapping(node, key, {"name", "why", "env"} | reading.common_keys, {"name", "why", "env"}).value
        name = reading.name(m["name"], f"{key}.name")
        claimed: dict[str, int] = reading.claimed(self.name)  # variable -> the line that set it
        out = []
        for j, item in enumerate(r.sequence(m["env"], f"{key}.env", 1)):
            var = _var(r, item, f"{key}.env[{j}]", list(reading.variants))
            if var.name in claimed:
                raise r.fail(var.line, f"{key}.env[{j}].name", f"{var.name} is set twice (first on line "
                                                               f"{claimed[var.name]}): one env step sets it")
            claimed[var.name] = var.line
            out.append(var)
        return EnvStep(name, r.string(m["why"], f"{key}.why"), None, tuple(out), node.line)

    def build_args(self, spec: StepSpec, variant: Any) -> dict[str, str]:
        assert isinstance(spec, EnvStep)
        return {v.arg: v.value_for(variant.name) for v in spec.vars if v.value is None}

    def effect(self, step: Step) -> Effect:
        assert isinstance(step.spec, EnvStep)
        return Effect(outside=tuple(f"env {v.name}" for v in step.spec.vars))

    identity_section = "env"

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        assert isinstance(step.spec, EnvStep)
        return tuple({"step": step.name, "name": v.name, "value": v.value_for(plan.variant.name)}
                     for v in step.spec.vars)

    def view(self, step: Step) -> EnvView:
        assert isinstance(step.spec, EnvStep)
        return EnvView(step, step.spec, self)


KIND = Env()


def adopted_entry(pairs: list[tuple[str, str]], why: str) -> dict:
    """The manifest entry `import` writes for one ENV instruction: each variable with the same value for
    every variant and a why to fill in."""
    return {"name": f"env-{pairs[0][0].lower()}", "kind": KIND.name, "why": why,
            "env": [{"name": name, "why": why, "value": value} for name, value in pairs]}


def settable(name: str) -> bool:
    """Whether an env step can set this variable (import lists the others)."""
    return bool(_NAME.match(name)) and not name.startswith(ARG_PREFIX)
