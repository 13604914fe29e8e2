"""Run the smoke payload inside a built image and remember the verdict per image id.

The payload (smoke_payload.py) is standalone; this stage only starts it in
the image's `smoke` target, with the GPU when the host has one, and records
the result where `publish` looks for it.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .engine import Engine

RESULTS_DIR = Path(".pinwheel") / "smoke"
JSON_MARK = "--- pinwheel smoke json ---"


@dataclass(frozen=True)
class SmokeResult:
    image_id: str
    ok: bool
    levels: dict[str, str]  # level -> passed | failed | skipped
    document: dict
    output: str


def host_has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


def run_smoke(engine: Engine, image: str, gpus: bool | None = None, level: str = "gpu",
              env: dict[str, str] | None = None) -> SmokeResult:
    gpus = host_has_gpu() if gpus is None else gpus
    # The payload prints a human summary and writes JSON to a file; hand both back on stdout.
    script = ('python /opt/pinwheel/smoke_payload.py --expect /opt/pinwheel/expect.json --level "$1" '
              '--json /tmp/smoke.json; rc=$?; echo; echo "$2"; cat /tmp/smoke.json 2>/dev/null; exit $rc')
    result = engine.run(image, ["sh", "-c", script, "smoke", level, JSON_MARK], gpus=gpus, env=env)
    summary, _, payload = result.stdout.partition(JSON_MARK)
    try:
        document = json.loads(payload) if payload.strip() else {}
    except json.JSONDecodeError:
        document = {}
    levels = {name: str(v.get("status")) for name, v in document.get("levels", {}).items()}
    ok = result.returncode == 0 and bool(document.get("ok"))
    return SmokeResult(engine.image_id(image), ok, levels, document, summary + result.stderr)


def record(result: SmokeResult, root: Path) -> Path:
    path = root / RESULTS_DIR / f"{result.image_id.replace(':', '_')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"image_id": result.image_id, "ok": result.ok, "levels": result.levels,
                                "document": result.document}, indent=2) + "\n")
    return path


def recorded(image_id: str, root: Path) -> dict | None:
    path = root / RESULTS_DIR / f"{image_id.replace(':', '_')}.json"
    return json.loads(path.read_text()) if path.exists() else None
