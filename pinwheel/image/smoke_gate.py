"""Which smoke levels an image must pass before it is published, and the gate that refuses it otherwise.

The check is by image id: a tag that moved to another build after the smoke
ran is refused. A skipped level is not a passed one. Which levels an image
must pass is what its smoke declares: the rendered Dockerfile's `smoke`
target runs the payload with `--level gpu`, so the shipped image needs
static, import and gpu. Where nothing declares it, every level is required.
`--allow-skipped LEVEL` with a reason loosens that; the labels below record
the allowance in the pushed image (publish.py pushes it as a derived image).
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from . import labels
from ..workspace import InContext
from .smoke import SmokeRecordError, recorded

LEVELS = ("static", "import", "gpu")  # cumulative, as the smoke payload runs them
SMOKE_TARGET = "smoke"
LABEL = labels.SMOKE
LABEL_IMAGE_ID = f"{LABEL}.image-id"  # the image the smoke ran on
LABEL_LEVELS = f"{LABEL}.levels"  # JSON: level -> passed | skipped | not-run
LABEL_ALLOWED = f"{LABEL}.allowed-skipped"  # comma-separated levels published without passing
LABEL_REASON = f"{LABEL}.skip-reason"  # the stated reason (per level where they differ)
MAX_REASON = 500


class PublishRefused(Exception):
    """Nothing was pushed; the message says why."""


class BadSmokeRecord(PublishRefused):
    """Nothing was pushed because the smoke record cannot be trusted (unreadable, edited, copied): bad input."""


def checked_record(image_id: str, smoke_results: Path) -> dict | None:
    try:
        return recorded(image_id, smoke_results)
    except SmokeRecordError as exc:
        raise BadSmokeRecord(f"the smoke record of image {image_id[:19]} is not trusted: {exc}") from None


@dataclass(frozen=True)
class DeclaredSmoke:
    """The levels an image's smoke is meant to run, and where that was read."""

    levels: tuple[str, ...]
    source: str


# ------------------------------------------------------------------ the declaration


def declared_smoke(dockerfile: Path, root: Path | None = None) -> DeclaredSmoke:
    """The levels the Dockerfile's `smoke` target runs; every level when nothing declares them.

    The target's CMD (or ENTRYPOINT) runs the payload (smoke_payload.pyz); its `--level` is
    the highest level run (levels are cumulative) and `--require` one that
    must not be skipped. Either raises what is required.
    """
    try:
        shown = str(dockerfile.relative_to(root)) if root is not None else str(dockerfile)
    except ValueError:
        shown = str(dockerfile)
    every = DeclaredSmoke(LEVELS, f"nothing declares the smoke's levels ({shown} has no `{SMOKE_TARGET}` target "
                                  f"running {InContext.SMOKE_PAYLOAD}), so every level is required")
    try:
        text = dockerfile.read_text()
    except (OSError, UnicodeDecodeError):
        return every
    argv = _smoke_command(text)
    if argv is None:
        return every
    highest = "static"  # the payload's default --level
    said = []
    for flag in ("--level", "--require"):
        value = _option(argv, flag)
        if value is None:
            continue
        if value not in LEVELS:
            return every
        said.append(f"{flag} {value}")
        if LEVELS.index(value) > LEVELS.index(highest):
            highest = value
    levels = LEVELS[: LEVELS.index(highest) + 1]
    return DeclaredSmoke(levels, f"declared by {shown}, target {SMOKE_TARGET}: {InContext.SMOKE_PAYLOAD} "
                                 f"{' '.join(said)}".rstrip())


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) per Dockerfile instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        head, _, rest = line.partition(" ")
        out.append((head.upper(), rest.strip()))
    return out


def _smoke_command(text: str) -> list[str] | None:
    """The argv of the `smoke` target's CMD/ENTRYPOINT from the payload (smoke_payload.pyz) on; None if there
    is none."""
    in_smoke = False
    command: list[str] | None = None
    for head, rest in _instructions(text):
        if head == "FROM":
            words = rest.split()
            in_smoke = len(words) >= 3 and words[-2].upper() == "AS" and words[-1].lower() == SMOKE_TARGET
            continue
        if not in_smoke or head not in ("CMD", "ENTRYPOINT"):
            continue
        try:
            argv = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
        except (ValueError, TypeError):
            continue
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            continue
        at = next((i for i, a in enumerate(argv) if a.endswith(InContext.SMOKE_PAYLOAD)), None)
        if at is not None:
            command = argv[at:]
    return command


def _option(argv: Sequence[str], flag: str) -> str | None:
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


# ------------------------------------------------------------------ allowances


def parse_allowances(values: Sequence[str], reason: str | None) -> dict[str, str]:
    """`--allow-skipped LEVEL[,LEVEL][=REASON]` (repeatable) and `--reason TEXT` -> {level: reason}.

    Raises ValueError with the message for the user.
    """
    allowed: dict[str, str] = {}
    common = _clean_reason(reason, "--reason") if reason is not None else None
    if reason is not None and not values:
        raise ValueError("--reason says why skipped levels may be published; name them with --allow-skipped LEVEL")
    for value in values:
        names, sep, own = value.partition("=")
        text = _clean_reason(own, f"--allow-skipped {value}") if sep else common
        for name in (n.strip() for n in names.split(",")):
            if name not in LEVELS:
                raise ValueError(f"--allow-skipped {value}: {name!r} is not a smoke level ({', '.join(LEVELS)})")
            if text is None:
                raise ValueError(f"--allow-skipped {name} needs a reason, recorded in the pushed image: "
                                 f"--reason TEXT, or --allow-skipped {name}=TEXT")
            allowed[name] = text
    return allowed


def _clean_reason(text: str, where: str) -> str:
    cleaned = " ".join(text.split())
    if not cleaned:
        raise ValueError(f"{where}: the reason is empty")
    if len(cleaned) > MAX_REASON:
        raise ValueError(f"{where}: the reason is longer than {MAX_REASON} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in cleaned):
        raise ValueError(f"{where}: the reason holds control characters")
    return cleaned


# ------------------------------------------------------------------ the gate


def gate(smoke: dict | None, image_id: str, declared: DeclaredSmoke, allowed: Mapping[str, str] | None = None,
         require_gpu: bool = False) -> tuple[dict[str, str], tuple[str, ...]]:
    """Refuse (PublishRefused) unless every required level passed or is allowed to have been skipped.

    Returns the labels that record the allowance ({} when every required
    level passed) and notes for the user (allowances that were not needed).
    """
    allowed = dict(allowed or {})
    if require_gpu and "gpu" in allowed:
        raise ValueError("--require-gpu and --allow-skipped gpu contradict each other")
    short = image_id[:19]
    if smoke is None:
        raise PublishRefused(f"no smoke result for image {short}: run `build.py smoke` first")
    levels = {str(k): str(v) for k, v in (smoke.get("levels") or {}).items()}
    failed = [lv for lv, status in levels.items() if status not in ("passed", "skipped")]
    if not smoke.get("ok") or failed:
        shown = ", ".join(f"{lv}: {levels[lv]}" for lv in failed) or _statuses(levels)
        raise PublishRefused(f"the smoke of image {short} failed ({shown}); a failed smoke is never published")
    wanted = set(declared.levels) | ({"gpu"} if require_gpu else set())
    required = [lv for lv in LEVELS if lv in wanted]
    not_passed = {lv: levels.get(lv, "not-run") for lv in required if levels.get(lv) != "passed"}
    refused = [lv for lv in not_passed if lv not in allowed]
    if refused:
        document = smoke.get("document") or {}
        why = []
        for lv in refused:
            reason = ((document.get("levels") or {}).get(lv) or {}).get("reason")
            if not_passed[lv] == "not-run":
                reason = reason or f"the smoke ran with --level {document.get('requested') or 'static'}"
            why.append(f"{lv}: {not_passed[lv].upper()}" + (f" ({reason})" if reason else ""))
        needed = " ".join(f"--allow-skipped {lv}" for lv in not_passed)
        gpu_note = " (--require-gpu)" if require_gpu and "gpu" not in declared.levels else ""
        raise PublishRefused(
            f"the smoke of image {short} did not pass every level it must: {'; '.join(why)}. "
            f"Required: {', '.join(required)}{gpu_note} ({declared.source}). A skipped level is not a passed one. "
            f"Smoke it where those levels run (a GPU host), or publish anyway with {needed} --reason TEXT, "
            "which the pushed image's labels record")
    notes = tuple(f"--allow-skipped {lv}: not needed, {lv} " + ("passed" if levels.get(lv) == "passed" else "is not required")
                  for lv in allowed if lv not in not_passed)
    if not not_passed:
        return {}, notes
    reasons = {lv: allowed[lv] for lv in not_passed}
    labels = {
        LABEL_IMAGE_ID: image_id,
        LABEL_LEVELS: json.dumps({lv: levels.get(lv, "not-run") for lv in LEVELS}, separators=(",", ":")),
        LABEL_ALLOWED: ",".join(reasons),
        LABEL_REASON: next(iter(reasons.values())) if len(set(reasons.values())) == 1
        else "; ".join(f"{lv}: {text}" for lv, text in reasons.items()),
    }
    labels.update({f"{LABEL_REASON}.{lv}": text for lv, text in reasons.items()})
    return labels, notes


def _statuses(levels: Mapping[str, str]) -> str:
    return ", ".join(f"{lv}: {status}" for lv, status in levels.items()) or "no levels recorded"
