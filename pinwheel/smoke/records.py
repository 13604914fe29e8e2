"""Stage records, the one shape every check reports in, and how a level is judged from them."""
from __future__ import annotations

import time
import traceback


def stage(level: str, name: str, status: str, **fields) -> dict:
    rec = {"level": level, "name": name, "status": status}
    rec.update(fields)
    return rec


def exc_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def exc_tail(limit: int = 6) -> list:
    return traceback.format_exc().strip().splitlines()[-limit:]


def timed_import(level, name, body) -> dict:
    t0 = time.perf_counter()
    try:
        fields = body()
        return stage(level, name, "passed", seconds=round(time.perf_counter() - t0, 3), **fields)
    except StageFailure as exc:
        return stage(level, name, "failed", seconds=round(time.perf_counter() - t0, 3), error=str(exc), **exc.fields)
    except BaseException as exc:  # noqa: BLE001 - any import error is a finding
        if isinstance(exc, KeyboardInterrupt):
            raise
        return stage(
            level, name, "failed", seconds=round(time.perf_counter() - t0, 3),
            error=exc_text(exc), traceback=exc_tail(),
        )


class StageFailure(Exception):
    def __init__(self, message, **fields):
        super().__init__(message)
        self.fields = fields


def level_status(stages: list) -> str:
    """failed, skipped (nothing ran) or passed. A named check's own stages (in_check) are judged through
    its verify stage: its imports passing never make a level whose forward was skipped pass."""
    sts = [s["status"] for s in stages if "in_check" not in s]
    if any(s == "failed" for s in sts):
        return "failed"
    if all(s == "skipped" for s in sts):  # nothing judged, or every one skipped
        return "skipped"
    return "passed"
