"""Is a committed lock made from the manifest as it is now, and is every file of it what `lock` wrote? Answered
from the files alone, without the network."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..plan import Plan
from ..resolve.base import reads_base, with_inventory
from ..workspace import LockFiles, Workspace
from .format import DEFAULT_ENGINE, ENGINE_HEADER, ENGINES, INPUTS_HEADER, header_value
from .inputs import lock_inputs_digest
from .slicing import units
from .verify import lock_problem, read_lock_file


def expected_files(plan: Plan) -> list[str]:
    """Every file a Plan's lock directory must hold (the generated inputs are for review, not checked)."""
    steps, fallbacks = units(plan)
    return [LockFiles.REQUIREMENTS, LockFiles.EXPECT] + [u.file for u in steps + fallbacks]


@dataclass(frozen=True)
class LockCheck:
    variant: str
    status: str  # "ok" | "stale" | "missing"
    detail: str
    needs_env: str | None = None  # the extra index variable a missing lock needs


def check_lock(plan: Plan, root: Path | str, engine: str | None = None) -> LockCheck:
    """Is the committed lock of this Plan made from its current inputs? No network.

    A variant that reads its base is checked against its committed inventory too
    (read here when the Plan does not carry it): a changed inventory makes the lock stale.
    """
    if reads_base(plan) and plan.resolution.base_inventory is None:
        plan = with_inventory(plan, root)
    ws = Workspace(Path(root), plan.image)
    d = ws.plan_lock_dir(plan)
    name = plan.label
    for directory in dict.fromkeys((ws.lock_dir(plan.variant.name), d)):
        left = sorted(directory.parent.glob(f".{directory.name}.old-*"))
        if left:
            return LockCheck(name, "stale", f"an interrupted `lock` left {ws.relative(left[0])}: run "
                                            f"`build.py lock --variant {plan.variant.name}` to finish it")
    full = d / LockFiles.REQUIREMENTS
    if not full.exists() and not full.is_symlink():
        return LockCheck(name, "missing", f"no lock at {ws.relative(full)}", plan.variant.torch_index_env)
    text = read_lock_file(full)
    recorded = header_value(text, INPUTS_HEADER)
    used = engine or header_value(text, ENGINE_HEADER) or DEFAULT_ENGINE
    if used not in ENGINES:
        return LockCheck(name, "stale", f"made with unknown engine {used!r}")
    want = lock_inputs_digest(plan, used)
    if recorded is None:
        return LockCheck(name, "stale", f"{full.name} has no pinwheel-inputs header (not made by `build.py lock`)")
    if recorded != want:
        return LockCheck(name, "stale", f"inputs changed (lock {str(recorded)[:12]}, manifest {want[:12]}, {used})")
    absent = [f for f in expected_files(plan) if not (d / f).exists() and not (d / f).is_symlink()]
    if absent:
        return LockCheck(name, "stale", f"missing {', '.join(absent)}")
    problem = lock_problem(plan, d)  # every file exactly what `lock` writes from requirements.txt
    if problem:
        return LockCheck(name, "stale", f"{ws.relative(d)}/{problem}")
    return LockCheck(name, "ok", f"up to date ({used}, inputs {want[:12]})")
