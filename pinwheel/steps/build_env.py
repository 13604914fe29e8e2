"""A source build's environment per architecture and per CUDA line (`build_env:` on a git or an sdist step).

`env` holds what every build of the step sees; `build_env` lists overrides, each with a why and at least one of
`arch` (amd64, arm64: the platform built for) and `cuda` (a CUDA line, "13" or "12.8", matched against the
variant's cuda by its leading components). They apply in the manifest's order over `env`, a later one over an
earlier one: TORCH_CUDA_ARCH_LIST is "9.0;10.0" on x86_64 and "9.0a;10.0a" on arm64, "8.0;9.0" on CUDA 12.

The Dockerfile serves every variant and platform, so the table is resolved when the manifest is read, one
case per variant and architecture, and the builder stage picks its row with `case "${VARIANT}/${TARGETARCH}"`
(templates/steps/build_env.j2); a variant without a row fails the build naming it. Both build arguments are
declared in the stage, so each row has its own cache key. The environment each Plan's build sees joins the
lock's inputs (sdist) and the image's identity (`build_env`, only on a step that has overrides).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..model.reader import StepReading
from ..model.source import show

ARCHES = ("amd64", "arm64")  # what TARGETARCH says, as the container platforms name them
_CUDA_LINE = re.compile(r"^\d+(\.\d+)?$")

Env = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class BuildEnvOverride:
    arch: str | None
    cuda: str | None
    env: Env
    why: str
    line: int

    def applies(self, cuda: str, arch: str | None) -> bool:
        """True for a build on CUDA ``cuda`` for ``arch`` (None: an architecture no override names)."""
        on_line = self.cuda is None or cuda.split(".")[:len(self.cuda.split("."))] == self.cuda.split(".")
        return on_line and (self.arch is None or self.arch == arch)


def read_build_env(reading: StepReading, node: Any, key: str, read_env) -> tuple[BuildEnvOverride, ...]:
    r = reading.reader
    out = []
    for j, item in enumerate(r.sequence(node, key, 1)):
        where = f"{key}[{j}]"
        m = r.mapping(item, where, {"arch", "cuda", "env", "why"}, {"env", "why"}).value
        arch = r.string(m["arch"], f"{where}.arch") if "arch" in m else None
        if arch is not None and arch not in ARCHES:
            raise r.fail(m["arch"].line, f"{where}.arch", f"{show(arch)} is not one of: {', '.join(ARCHES)}")
        cuda = r.string(m["cuda"], f"{where}.cuda", _CUDA_LINE, 'CUDA line like "13" or "12.8"') if "cuda" in m \
            else None
        if arch is None and cuda is None:
            raise r.fail(item.line, where, "say where it applies: arch, cuda or both (what every build sees goes "
                                           "in `env`)")
        if cuda is not None and not any(BuildEnvOverride(None, cuda, (), "", 0).applies(v.cuda, None)
                                        for v in reading.variants.values()):
            known = ", ".join(f"{name} (cuda {v.cuda})" for name, v in reading.variants.items())
            raise r.fail(m["cuda"].line, f"{where}.cuda", f"no variant is on CUDA line {cuda} (variants: {known})")
        env = read_env(r, m["env"], f"{where}.env")
        if not env:
            raise r.fail(m["env"].line, f"{where}.env", "name at least one variable")
        out.append(BuildEnvOverride(arch, cuda, env, r.string(m["why"], f"{where}.why"), item.line))
    return tuple(out)


def env_for(env: Env, overrides: tuple[BuildEnvOverride, ...], cuda: str, arch: str | None) -> Env:
    """What a build on CUDA ``cuda`` for ``arch`` sees: `env`, then each override that applies, in order."""
    values = dict(env)
    for o in overrides:
        if o.applies(cuda, arch):
            values.update(o.env)
    return tuple(values.items())


def env_cases(env: Env, overrides: tuple[BuildEnvOverride, ...], variants: Mapping[str, Any]) -> tuple:
    """(`case` pattern, its environment) for every variant: one row per architecture an override names whose
    environment differs from the variant's other architectures', then `<variant>/*`. Empty without overrides."""
    if not overrides:
        return ()
    named = [a for a in ARCHES if any(o.arch == a for o in overrides)]
    rows = []
    for name, variant in variants.items():
        default = env_for(env, overrides, variant.cuda, None)
        rows += [(f"{name}/{a}", env_for(env, overrides, variant.cuda, a)) for a in named
                 if env_for(env, overrides, variant.cuda, a) != default]
        rows.append((f"{name}/*", default))
    return tuple(rows)


def plan_arch(plan) -> str:
    """The architecture a Plan is built for, as TARGETARCH says it."""
    return plan.container_platform.split("/", 1)[1]


def build_env_identity(spec, plan) -> dict:
    """The environment this Plan's build of the step sees, for its identity; empty without overrides."""
    if not spec.build_env:
        return {}
    return {"build_env": [list(e) for e in env_for(spec.env, spec.build_env, plan.variant.cuda, plan_arch(plan))]}


def case_message(noun: str, step_name: str) -> str:
    return f"pinwheel: ERROR: {noun} {step_name}: no build environment for variant/architecture"
