"""Push an image's tags to a registry, only when every level of its declared smoke passed.

The check is by image id: a tag that moved to another build after the smoke
ran is refused. A skipped level is not a passed one. Which levels an image
must pass is what its smoke declares: the rendered Dockerfile's `smoke`
target runs the payload with `--level gpu`, so the shipped image needs
static, import and gpu. Where nothing declares it, every level is required.

`--allow-skipped LEVEL` with a reason loosens that. The allowance must travel
with the image, and labels are part of the image config, so the tags are
pushed as a derived image: `FROM <the smoked image id>` built with the
`io.pinwheel.smoke.*` labels below and nothing else. It has the smoked
image's layers (checked), so the registry already holds every blob but the
new config. Without an allowance the smoked image itself is pushed.

The image is pushed once, by digest, under its content tag (`<variant>-<hash>`
of its inputs); the registry's manifest must name the smoked image as its
config. Only then is every other tag (the dated `cu130-torch213-<date>`) put
in the registry as that manifest's bytes, so a tag names exactly the smoked
digest and no other build's bytes can get it. `promote` does the same for an
image already in the registry, by digest, without an engine (CI smokes on one
runner and promotes from another).

Publishing is idempotent: the same image pushes the same digest again, and a
tag that already names it is left alone. Nothing is tagged for the registry
or pushed before every check has passed.
"""
from __future__ import annotations

import hashlib
import json
import shlex
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol, Sequence

from rich.progress import BarColumn, Progress, TextColumn

from . import labels
from .base import is_bootstrap
from .engine import Engine, EngineError, PushEvent, PushResult
from .registry import Manifest, Registry, RegistryError, split_ref
from .smoke import SmokeRecordError, recorded
from ..workspace import InContext

LEVELS = ("static", "import", "gpu")  # cumulative, as the smoke payload runs them
SMOKE_TARGET = "smoke"
LABEL = labels.SMOKE
LABEL_IMAGE_ID = f"{LABEL}.image-id"  # the image the smoke ran on
LABEL_LEVELS = f"{LABEL}.levels"  # JSON: level -> passed | skipped | not-run
LABEL_ALLOWED = f"{LABEL}.allowed-skipped"  # comma-separated levels published without passing
LABEL_REASON = f"{LABEL}.skip-reason"  # the stated reason (per level where they differ)
MAX_REASON = 500


def floating_base(base: str) -> str | None:
    """Why this base may move under the same reference (None when it cannot).

    A registry base is fixed only by a digest (name:tag@sha256:...); a tag can be
    re-pushed upstream between two builds. A bootstrap base is built here and
    never pulled.
    """
    if "@sha256:" in base or is_bootstrap(base):
        return None
    return f"the base {base} is not pinned by digest, so the same manifest can build on another image"


class PublishRefused(Exception):
    """Nothing was pushed; the message says why."""


class BadSmokeRecord(PublishRefused):
    """Nothing was pushed because the smoke record cannot be trusted (unreadable, edited, copied): bad input."""


def _checked_record(image_id: str, smoke_results: Path) -> dict | None:
    try:
        return recorded(image_id, smoke_results)
    except SmokeRecordError as exc:
        raise BadSmokeRecord(f"the smoke record of image {image_id[:19]} is not trusted: {exc}") from None


@dataclass(frozen=True)
class DeclaredSmoke:
    """The levels an image's smoke is meant to run, and where that was read."""

    levels: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Published:
    image_id: str  # the smoked image
    refs: tuple[str, ...]
    digests: dict[str, str]
    pushed_id: str  # what was pushed: image_id, or the derived image that carries the allowance
    labels: dict[str, str] = field(default_factory=dict)  # the io.pinwheel.smoke.* labels added, if any
    pushes: dict[str, PushResult] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()  # the tags this publish pointed at the digest (the others already named it)
    previous: dict[str, str] = field(default_factory=dict)  # of the moved tags, each one's digest before


class PushProgress(Protocol):
    def start(self, ref: str, layers: int) -> None: ...
    def event(self, event: PushEvent) -> None: ...
    def done(self, result: PushResult) -> None: ...


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


# ------------------------------------------------------------------ publish


def content_tag(image_labels: Mapping[str, str]) -> str | None:
    """``<variant>-<first 12 of the inputs digest>[-<arch>]``: the tag an image is pushed by, from its labels."""
    return image_labels.get(labels.CONTENT_TAG) or None


def publish(engine: Engine, tags: list[str], registry: str, smoke_results: Path, require_gpu: bool = False,
            declared: DeclaredSmoke | None = None, allowed: Mapping[str, str] | None = None,
            progress: PushProgress | None = None, check_only: bool = False,
            sbom: Path | None = None, explicit_tags: bool = False) -> Published | None:
    """Push one smoked image by digest, then point its tags at exactly that digest.

    The image is pushed once, under its content tag (``<variant>-<hash>``, from its labels; the first tag
    when it has none). The registry's manifest for it must name the smoked image (or the derived image
    that carries an allowance) as its config, so the registry holds the bytes the smoke ran on; every other
    tag is then put as that manifest, unchanged. PublishRefused before anything is pushed when the gate fails.
    check_only: only the gate (None when it passes), so several platforms' images are all checked first.
    sbom: the image's SBOM file, pushed beside it as an OCI artifact (the tag its label names).
    The content tag is immutable (immutable_carrier): explicit_tags (--tag) lets other bytes go under the
    first given tag instead, where the content tag already names another image."""
    if not tags:
        raise PublishRefused("no tags to publish")
    ids = {t: engine.image_id(t) for t in tags}
    if len(set(ids.values())) != 1:
        raise PublishRefused(f"the tags point at different images: {ids}")
    image_id = next(iter(ids.values()))
    smoke = _checked_record(image_id, smoke_results)
    declared = declared or DeclaredSmoke(LEVELS, "nothing declares the smoke's levels, so every level is required")
    extra, notes = gate(smoke, image_id, declared, allowed, require_gpu)
    if check_only:
        return None

    image_labels = engine.labels(image_id)
    base = registry.rstrip("/")
    repository = tags[0].rsplit(":", 1)[0] if ":" in tags[0].rsplit("/", 1)[-1] else tags[0]
    carrier_tag = content_tag(image_labels) or tags[0].rsplit(":", 1)[-1]
    content_ref = f"{base}/{repository}:{carrier_tag}"
    remotes = [f"{base}/{tag}" for tag in tags]
    pushed_id = derive(engine, image_id, [content_ref], extra) if extra else image_id
    carrier, remotes, carrier_before, taken_note = immutable_carrier(content_ref, pushed_id, remotes, explicit_tags,
                                                                     (image_id, repository))
    if taken_note:
        notes = notes + (taken_note,)
    engine.tag(pushed_id, carrier)  # (derive tagged the content tag already; tagging again changes nothing)
    result, reg, remote_repo = _push_by_digest(engine, carrier, pushed_id, progress)
    try:
        digests, moved, previous = _point_tags(reg, remote_repo, [r for r in remotes if r != carrier],
                                               result.digest)
        digests = {carrier: result.digest, **digests}
        if carrier_before not in (None, result.digest):
            previous[carrier] = carrier_before
        sbom_ref = push_sbom(reg, remote_repo, image_labels, sbom, result.digest) if sbom is not None else None
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    refs = (carrier,) + tuple(r for r in remotes if r != carrier)
    if sbom_ref:
        notes = notes + (f"SBOM pushed as {sbom_ref}",)
    return Published(image_id, refs, digests, pushed_id, extra, {carrier: result}, notes, tuple(moved), previous)


def _point_tags(reg: Registry, repository: str, refs: Sequence[str], digest: str
                ) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """Point each of ``refs`` (host/repository:tag, in ``repository``) at ``digest``: (ref -> digest, the
    refs that moved, the digest each moved one named before, where it named one)."""
    digests: dict[str, str] = {}
    moved: list[str] = []
    previous: dict[str, str] = {}
    for ref in refs:
        _, tag_repo, tag = split_ref(ref)
        if tag_repo != repository:
            raise PublishRefused(f"{ref}: a tag of another repository than {repository}")
        before = reg.repoint(repository, tag, digest)
        digests[ref] = digest
        if before != digest:
            moved.append(ref)
            if before is not None:
                previous[ref] = before
    return digests, moved, previous


def immutable_carrier(content_ref: str, image_id: str, remotes: Sequence[str], explicit_tags: bool,
                      local: tuple[str, str]) -> tuple[str, list[str], str | None, str | None]:
    """(the ref to push ``image_id`` by, the refs to point at it then, the digest that ref named before,
    a note). The content tag is immutable: where the registry's already names another image (other bytes
    from the same inputs: another commit's revision and created labels, another allowance reason, or a
    build that is not byte-for-byte reproducible) it is never moved. With tags of the user's own (--tag)
    the first other one carries the image instead, and the note says so; else PublishRefused says how to
    publish these bytes (``local``: the smoked image's id and its local repository, for that advice)."""
    host, repository, tag = split_ref(content_ref)
    reg = Registry(host)
    try:
        taken = reg.manifest(repository, tag)
        if taken is None or taken.config_digest == image_id:
            return content_ref, list(remotes), None, None
        own = [r for r in remotes if r != content_ref] if explicit_tags else []
        if own:
            before = reg.manifest(repository, split_ref(own[0])[2])
            return own[0], own, before.digest if before else None, (
                f"the content tag {content_ref} names another image ({taken.digest}); it is immutable, so it "
                f"keeps that one, and {own[0]} carries this one")
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    raise PublishRefused(
        f"the content tag {content_ref} already names another image ({taken.digest}, image "
        f"{(taken.config_digest or 'unknown')[:19]}) built from the same inputs; a content tag is immutable, so "
        f"it is not moved. Publish that image again (`publish --digest {taken.digest}`), or these bytes under "
        f"a tag of their own: `docker tag {local[0][:19]} {local[1]}:<tag>`, then `publish --tag {local[1]}:<tag>`")


def _push_by_digest(engine: Engine, carrier: str, image_id: str,
                    progress: PushProgress | None) -> tuple[PushResult, Registry, str]:
    """Push ``carrier``, then read its manifest back by the digest the push reported: the registry must hold
    exactly ``image_id`` there before any tag points at it. Returns (the push, the registry, the repository)."""
    if progress is not None:
        progress.start(carrier, len(engine.layers(carrier)))
    result = engine.push(carrier, on_event=progress.event if progress is not None else None)
    if progress is not None:
        progress.done(result)
    host, remote_repo, _ = split_ref(carrier)
    reg = Registry(host)
    try:
        pushed = reg.manifest(remote_repo, result.digest)
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    if pushed is None or pushed.config_digest != image_id:
        raise PublishRefused(f"{carrier}@{result.digest} does not hold image {image_id[:19]} "
                             f"(its config is {pushed.config_digest if pushed else 'missing'}); no tag was made")
    return result, reg, remote_repo


def push_candidate(engine: Engine, tag: str, registry: str, sbom: Path | None = None,
                   progress: PushProgress | None = None) -> tuple[str, str]:
    """Push a built image by digest under its content tag only, for a smoke on another host (which pulls
    it by digest); no human tag is made, so no smoke is needed yet. Returns (ref, digest)."""
    image_id = engine.image_id(tag)
    image_labels = engine.labels(image_id)
    name = content_tag(image_labels)
    if name is None:
        raise PublishRefused(f"{tag} carries no {labels.INPUTS_SHA256} label: build it with `build.py build`")
    repository = tag.rsplit(":", 1)[0]
    carrier = f"{registry.rstrip('/')}/{repository}:{name}"
    engine.tag(image_id, carrier)
    result, reg, remote_repo = _push_by_digest(engine, carrier, image_id, progress)
    try:
        if sbom is not None:
            push_sbom(reg, remote_repo, image_labels, sbom, result.digest)
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    return carrier, result.digest


def push_sbom(reg: Registry, repository: str, image_labels: Mapping[str, str], sbom: Path, digest: str) -> str:
    """The SBOM as an OCI artifact under the tag the image's label names, its bytes the ones the label hashes."""
    tag = image_labels.get(labels.SBOM)
    want = image_labels.get(labels.SBOM_SHA256)
    if not tag or not want:
        raise PublishRefused(f"the image names no SBOM (labels {labels.SBOM}, {labels.SBOM_SHA256})")
    try:
        data = sbom.read_bytes()
    except OSError as exc:
        raise PublishRefused(f"the SBOM {sbom} cannot be read ({exc.strerror}): build the image again") from None
    if hashlib.sha256(data).hexdigest() != want:
        raise PublishRefused(f"{sbom} is not the SBOM the image was built with (sha256 {want})")
    reg.push_artifact(repository, tag, data, labels.SBOM_MEDIA_TYPE, labels.SBOM_MEDIA_TYPE,
                      {"org.opencontainers.image.ref.name": tag, "io.pinwheel.sbom.of": digest})
    return f"{reg.host}/{repository}:{tag}"


def promote(registry_ref: str, tags: Sequence[str], smoke_results: Path, declared: DeclaredSmoke | None = None,
            require_gpu: bool = False) -> Published:
    """Point ``tags`` at the image ``registry_ref`` (host/repository@sha256:...) names, already in the
    registry, only when the smoke recorded for its config (the image id the smoke ran on) passed.

    No engine is needed: the manifest is read by digest, and the tags are that manifest's bytes.
    """
    host, repository, digest = split_ref(registry_ref)
    if not digest.startswith("sha256:"):
        raise PublishRefused(f"{registry_ref}: promote takes an image by digest (repository@sha256:...)")
    reg = Registry(host)
    try:
        manifest = reg.manifest(repository, digest)
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    if manifest is None:
        raise PublishRefused(f"{registry_ref}: not in the registry")
    image_id = manifest.config_digest
    if not image_id:
        raise PublishRefused(f"{registry_ref}: a {manifest.media_type}, not one image; promote each platform's image")
    smoke = _checked_record(image_id, smoke_results)
    here = [d.partition("@")[2] for d in (smoke or {}).get("repo_digests", ()) if d.partition("@")[0] == f"{host}/{repository}"]
    if here and digest not in here:
        raise BadSmokeRecord(f"{registry_ref}: the smoke of image {image_id[:19]} ran on {host}/{repository}@{here[0]}, "
                             "not on this digest; smoke the image by this digest")
    declared = declared or DeclaredSmoke(LEVELS, "nothing declares the smoke's levels, so every level is required")
    extra, notes = gate(smoke, image_id, declared, None, require_gpu)
    assert not extra  # no allowance is given here, so a passing gate adds no labels
    refs = [f"{host}/{repository}:{tag.rsplit(':', 1)[-1] if ':' in tag else tag}" for tag in tags]
    try:
        digests, moved, previous = _point_tags(reg, repository, refs, digest)
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    return Published(image_id, tuple(digests), digests, image_id, {}, {}, notes, tuple(moved), previous)


NO_GPU_SMOKE = f"{LABEL}.no-gpu-smoke"  # index annotation: JSON {platform: why it has no GPU smoke}
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
INDEX_COPIED = (labels.OCI_CREATED, labels.OCI_SOURCE, labels.OCI_REVISION, labels.OCI_VERSION, labels.OCI_TITLE)


def publish_index(tags: Sequence[str], registry: str, platforms: Mapping[str, Published],
                  no_gpu_smoke: Mapping[str, str] | None = None,
                  image_labels: Mapping[str, str] | None = None) -> dict[str, str]:
    """One multi-platform index (OCI image index) per tag, made of each platform's image as published (and
    smoked) above, put through the registry API so that it carries annotations: why a platform was published
    without a GPU smoke (``no_gpu_smoke``, the manifest's), on the index and on that platform's entry, and
    the OCI keys of ``image_labels`` (the variant's own platform's image).

    ``platforms`` maps a container platform (linux/amd64) to its Published result; each entry names that
    platform's image by digest, so the index holds exactly what was pushed. Returns each index ref's digest.
    """
    if not platforms:
        raise PublishRefused("no platform images to put in an index")
    no_gpu_smoke = dict(no_gpu_smoke or {})
    entries = []
    host = repository = None
    try:
        for platform, published in platforms.items():
            remote = published.refs[0]
            host, repository, _ = split_ref(remote)
            reg = Registry(host)
            image = reg.manifest(repository, published.digests[remote])
            if image is None:
                raise PublishRefused(f"{remote}@{published.digests[remote]} is not in the registry")
            os_name, _, arch = platform.partition("/")
            entry: dict = {"mediaType": image.media_type, "digest": image.digest, "size": len(image.raw),
                           "platform": {"architecture": arch.split("/")[0], "os": os_name}}
            if "/" in arch:
                entry["platform"]["variant"] = arch.split("/", 1)[1]
            notes = {k: v for k, v in published.labels.items() if k in (LABEL_LEVELS, LABEL_ALLOWED, LABEL_REASON)}
            if platform in no_gpu_smoke:
                notes[NO_GPU_SMOKE] = no_gpu_smoke[platform]
            if notes:
                entry["annotations"] = dict(sorted(notes.items()))
            entries.append(entry)
        annotations = {k: v for k, v in (image_labels or {}).items() if k in INDEX_COPIED}
        if no_gpu_smoke:
            annotations[NO_GPU_SMOKE] = json.dumps(no_gpu_smoke, sort_keys=True, separators=(",", ":"))
        index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": entries}
        if annotations:
            index["annotations"] = dict(sorted(annotations.items()))
        raw = json.dumps(index, sort_keys=True, separators=(",", ":")).encode()
        manifest = Manifest("sha256:" + hashlib.sha256(raw).hexdigest(), INDEX_TYPE, raw)
        assert host is not None and repository is not None
        reg = Registry(host)
        out: dict[str, str] = {}
        for tag in tags:
            _, tag_repo, name = split_ref(f"{registry.rstrip('/')}/{tag}")
            out[f"{registry.rstrip('/')}/{tag}"] = reg.put_manifest(tag_repo, name, manifest)
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    return out


def derive(engine: Engine, image_id: str, refs: Sequence[str], labels: Mapping[str, str]) -> str:
    """Build `FROM image_id` with ``labels`` added, tagged ``refs``; refuse unless it has the same layers."""
    source = f"pinwheel-publish/smoked:{uuid.uuid4().hex[:12]}"  # BuildKit's FROM takes a name, not an id
    engine.tag(image_id, source)
    try:
        with tempfile.TemporaryDirectory(prefix="pinwheel-publish-") as tmp:
            dockerfile = Path(tmp) / "Dockerfile"
            dockerfile.write_text(f"FROM {source}\n")
            derived = engine.build(Path(tmp), dockerfile, tags=list(refs), labels=dict(labels),
                                   platform=engine.platform(image_id))  # an arm64 image stays arm64
    except EngineError as exc:
        raise PublishRefused(f"could not add the allowance labels to image {image_id[:19]}: {exc}") from None
    finally:
        engine.remove(source)
    if engine.layers(derived) != engine.layers(image_id):
        for ref in refs:
            engine.remove(ref)
        raise PublishRefused(f"the labelled image {derived[:19]} does not have the layers of the smoked image "
                             f"{image_id[:19]}; nothing was pushed")
    return derived


# ------------------------------------------------------------------ showing the push


def human_bytes(n: int | None) -> str:
    if n is None:
        return "size unknown"
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


_STATE_WORDS = {"exists": "already in the registry", "mounted": "mounted from another repository",
                "pushing": "pushing", "pushed": "pushed"}


def summary(result: PushResult) -> str:
    """`12 layers: 3 pushed (4.2 GB), 9 already in the registry (1.6 GB)`."""
    pushed = [layer for layer in result.layers if layer.transferred]
    present = [layer for layer in result.layers if not layer.transferred]
    text = (f"{len(result.layers)} layers: {len(pushed)} pushed ({human_bytes(result.bytes_pushed)}), "
            f"{len(present)} already in the registry ({human_bytes(result.bytes_present)})")
    if result.sizes_from != "registry":
        text += "; sizes uncompressed, from the push progress"
    return text


class PushPrinter:
    """Shows a push: a live bar per layer on a terminal, else one line per layer state change."""

    def __init__(self, console, live: bool | None = None) -> None:
        self.console = console
        self.live = console.is_terminal if live is None else live
        self._states: dict[str, str] = {}
        self._totals: dict[str, int] = {}
        self._progress = None
        self._tasks: dict[str, int] = {}

    def start(self, ref: str, layers: int) -> None:
        self._states, self._totals, self._tasks = {}, {}, {}
        self.console.print(f"pushing {ref} ({layers} layers)", markup=False)
        if self.live:
            self._progress = Progress(TextColumn("  {task.description}"), BarColumn(bar_width=30),
                                      TextColumn("{task.fields[detail]}"), console=self.console)
            self._progress.start()

    def event(self, event: PushEvent) -> None:
        if event.total:
            self._totals[event.layer] = event.total
        if self._progress is not None:
            self._live_event(event)
            return
        if self._states.get(event.layer) == event.status or event.status in ("preparing", "waiting"):
            self._states[event.layer] = event.status
            return
        self._states[event.layer] = event.status
        if event.status == "pushing":
            words = f"pushing {human_bytes(event.total)}" if event.total else "pushing"
        elif event.status == "pushed":
            total = self._totals.get(event.layer)
            words = f"pushed {human_bytes(total)}" if total else "pushed"
        elif event.status in ("mounted", "retrying"):
            words = event.text[:1].lower() + event.text[1:]
        else:
            words = _STATE_WORDS.get(event.status, event.status)
        self.console.print(f"  layer {event.layer}: {words}", markup=False)

    def _live_event(self, event: PushEvent) -> None:
        assert self._progress is not None
        task = self._tasks.get(event.layer)
        if task is None:
            task = self._tasks[event.layer] = self._progress.add_task(f"layer {event.layer}", total=None, detail="")
        total = self._totals.get(event.layer)
        if event.status == "pushing":
            current = event.current or 0
            detail = f"{human_bytes(current)} / {human_bytes(total)}" if total else human_bytes(current)
            self._progress.update(task, total=total or None, completed=current, detail=detail)
        elif event.status == "pushed":
            self._progress.update(task, total=total or 1, completed=total or 1,
                                  detail=f"pushed {human_bytes(total)}" if total else "pushed")
        elif event.status in ("exists", "mounted"):
            self._progress.update(task, total=1, completed=1, detail=_STATE_WORDS[event.status])
        else:
            self._progress.update(task, detail=event.text)

    def done(self, result: PushResult) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self.console.print(f"  {summary(result)}", markup=False)


__all__ = [
    "DeclaredSmoke", "LEVELS", "PublishRefused", "Published", "PushPrinter", "declared_smoke", "derive", "gate",
    "parse_allowances", "promote", "publish", "push_candidate", "summary",
]
