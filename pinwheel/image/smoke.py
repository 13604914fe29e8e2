"""Run the smoke payload inside a built image and remember the verdict per image id.

The payload (pinwheel.smoke, shipped as smoke_payload.pyz) is standalone; this stage only starts it in
the image's `smoke` target, with the GPU when the host has one, and records
the result where `publish` looks for it.

A record is bound to the image by its image id (the config digest, which names
every layer's diff id: the bytes the smoke ran on) and to its own content by a
sha256 over it: publish refuses a record whose content no longer matches that
digest, that names another image than the one published, or whose levels are
not the ones its stages say. Why a digest in the record and not a label
written at smoke time: a label changes the image config, so the image the
smoke ran on would not be the image published; and the record and any digest
beside it live in the same directory, so a digest kept elsewhere locally binds
no tighter. What it stops is a record edited or copied by hand; a record forged
whole, by someone who can write the results directory, is outside what a local
file can prove.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..fsutil import UnreadableFile, atomic_write, read_regular_text
from ..smoke import level_status  # one judgement of a level, the payload's own
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
    repo_digests: tuple[str, ...] = ()  # repository@sha256:... the engine knew for the image when it was smoked


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
    return SmokeResult(engine.image_id(image), ok, levels, document, summary + result.stderr, packages,
                       engine.repo_digests(image))


def _result_path(results_dir: Path, image_id: str) -> Path:
    return Path(results_dir) / f"{image_id.replace(':', '_')}.json"


RECORD_FORMAT = 2
MAX_RECORD_BYTES = 16 * 1024 * 1024  # a payload document is tens of KiB; a record larger than this is not one


class SmokeRecordError(ValueError):
    """A smoke record that publish must not trust: unreadable, changed after the smoke wrote it, written for
    another image, or saying other levels than its own stages. str() is one line naming the file."""


def _record_digest(body: dict) -> str:
    """sha256 of the record's whole content but this digest (the image it smoked, what the engine knew of its
    digests, the verdict, the payload's document and the levels written for people), in canonical JSON."""
    content = {k: v for k, v in body.items() if k != "record_sha256"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def derived_levels(document: dict) -> dict[str, str]:
    """level -> passed | failed | skipped, judged from the document's stages the way the payload judges them;
    a level the document lists without a stage is skipped (nothing was checked)."""
    stages = [s for s in document.get("stages") or [] if isinstance(s, dict)]
    return {str(lv): level_status([s for s in stages if s.get("level") == lv])
            for lv in (document.get("levels") or {})}


def record(result: SmokeResult, results_dir: Path) -> Path:
    """Remember the verdict by image id in results_dir (Workspace.smoke_results), with the digest of its content.

    `levels` and `packages` are written for people to read; recorded() derives them again from the stages."""
    path = _result_path(results_dir, result.image_id)
    body = {"format": RECORD_FORMAT, "image_id": result.image_id, "repo_digests": list(result.repo_digests),
            "ok": result.ok, "levels": result.levels, "packages": result.packages, "document": result.document}
    body["record_sha256"] = _record_digest(body)
    atomic_write(path, (json.dumps(body, indent=2) + "\n").encode())
    return path


def recorded(image_id: str, results_dir: Path) -> dict | None:
    """The record of the smoke of ``image_id``, checked: None when there is none, SmokeRecordError when it
    cannot be trusted. The levels are the ones its stages say, never the ones written beside them."""
    path = _result_path(results_dir, image_id)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        body = json.loads(read_regular_text(path, MAX_RECORD_BYTES, "smoke record"))
    except UnreadableFile as exc:
        raise SmokeRecordError(str(exc)) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise SmokeRecordError(f"{path}: not a smoke record ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(body, dict) or body.get("format") != RECORD_FORMAT or not isinstance(body.get("document"), dict):
        raise SmokeRecordError(f"{path}: not a smoke record of this pinwheel (format {RECORD_FORMAT}): "
                               "run `build.py smoke` again")
    if body.get("record_sha256") != _record_digest(body):
        raise SmokeRecordError(f"{path}: changed after the smoke wrote it (its content does not match its "
                               "record_sha256): run `build.py smoke` again")
    if body.get("image_id") != image_id:
        raise SmokeRecordError(f"{path}: the record of image {str(body.get('image_id'))[:19]}, not of {image_id[:19]}; "
                               "a record is bound to the image it smoked: smoke this image")
    document = body["document"]
    levels = derived_levels(document)
    said = {str(k): str((v or {}).get("status")) if isinstance(v, dict) else str(v)
            for k, v in (document.get("levels") or {}).items()}
    if said != levels:
        raise SmokeRecordError(f"{path}: its levels ({_shown(said)}) are not what its stages say ({_shown(levels)})")
    ok = body.get("ok") is True and document.get("ok") is True and "failed" not in levels.values()
    packages = {str(n): str(v.get("status")) for n, v in (document.get("packages") or {}).items() if isinstance(v, dict)}
    return {"image_id": image_id, "ok": ok, "levels": levels, "packages": packages, "document": document,
            "repo_digests": [str(d) for d in body.get("repo_digests") or []]}


def _shown(levels: dict[str, str]) -> str:
    return ", ".join(f"{lv}: {st}" for lv, st in levels.items()) or "none"
