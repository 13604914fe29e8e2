"""Smoke records written by hand, for the publish gates to read: what a GPU host would have recorded (every
level passed), or a record saved earlier put back."""
from __future__ import annotations

from pathlib import Path

from pinwheel.image.smoke import SmokeResult, record
from pinwheel.workspace import Workspace

ALL_PASSED = {"static": "passed", "import": "passed", "gpu": "passed"}
NO_GPU = {"static": "passed", "import": "skipped", "gpu": "skipped"}


def record_smoke(project_root: Path, image_id: str, levels: dict[str, str]) -> None:
    """Record a smoke of `image_id` that ended well, with these level statuses, in the payload's shape: the
    gates derive a record's levels from its stages, so each level has one stage."""
    document = {"ok": True, "levels": {level: {"status": status} for level, status in levels.items()},
                "stages": [{"level": level, "name": "pins", "status": status} for level, status in levels.items()]}
    record(SmokeResult(image_id, True, dict(levels), document, ""), Workspace(project_root, "").smoke_results)


def restore_smoke(project_root: Path, saved: dict) -> None:
    """Put back a record read earlier (pinwheel.image.smoke.recorded), after a test recorded another."""
    record(SmokeResult(saved["image_id"], saved["ok"], saved["levels"], saved["document"], ""),
           Workspace(project_root, "").smoke_results)
