"""Run the smoke payload inside a built image and remember the verdict per image id.

The payload (smoke_payload.py) is standalone; this stage only starts it in
the image's `smoke` target, with the GPU when the host has one, and records
the result where `publish` looks for it.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..workspace import InImage
from .engine import Engine

JSON_MARK = "--- pinwheel smoke json ---"


@dataclass(frozen=True)
class SmokeResult:
    image_id: str
    ok: bool
    levels: dict[str, str]  # level -> passed | failed | skipped
    document: dict
    output: str
    # package -> passed | failed | skipped | partial: the manifest's checks of it that this smoke ran
    packages: dict[str, str] = field(default_factory=dict)


def host_has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


def run_smoke(engine: Engine, image: str, gpus: bool | None = None, level: str = "gpu",
              env: dict[str, str] | None = None, python: str = "python") -> SmokeResult:
    """Run the payload with `python` (the image's environment: the venv on PATH, or a base's interpreter).

    The entrypoint is /bin/sh whatever the image declares: a base may end in an
    entrypoint that is not a shell (or not python), and the smoke must still run.
    """
    gpus = host_has_gpu() if gpus is None else gpus
    # The payload prints a human summary and writes JSON to a file; hand both back on stdout.
    script = (f'"$3" {InImage.SMOKE_PAYLOAD} --expect {InImage.EXPECT} --level "$1" '
              f'--json {InImage.SMOKE_JSON}; rc=$?; echo; echo "$2"; cat {InImage.SMOKE_JSON} 2>/dev/null; exit $rc')
    result = engine.run(image, ["-c", script, "smoke", level, JSON_MARK, python], gpus=gpus, env=env,
                        entrypoint="/bin/sh")
    summary, _, payload = result.stdout.partition(JSON_MARK)
    try:
        document = json.loads(payload) if payload.strip() else {}
    except json.JSONDecodeError:
        document = {}
    levels = {name: str(v.get("status")) for name, v in document.get("levels", {}).items()}
    packages = {name: str(v.get("status")) for name, v in document.get("packages", {}).items()}
    ok = result.returncode == 0 and bool(document.get("ok"))
    return SmokeResult(engine.image_id(image), ok, levels, document, summary + result.stderr, packages)


def _result_path(results_dir: Path, image_id: str) -> Path:
    return Path(results_dir) / f"{image_id.replace(':', '_')}.json"


def record(result: SmokeResult, results_dir: Path) -> Path:
    """Remember the verdict by image id in results_dir (Workspace.smoke_results)."""
    path = _result_path(results_dir, result.image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"image_id": result.image_id, "ok": result.ok, "levels": result.levels,
                                "packages": result.packages, "document": result.document}, indent=2) + "\n")
    return path


def recorded(image_id: str, results_dir: Path) -> dict | None:
    path = _result_path(results_dir, image_id)
    return json.loads(path.read_text()) if path.exists() else None
