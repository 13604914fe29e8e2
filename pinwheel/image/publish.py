"""Push an image's tags to a registry, only when every level of its declared smoke passed.

Which levels an image must pass, and the gate that refuses it otherwise, are
smoke_gate.py's; this module pushes what the gate let through, and decides
the rest of a publish: a floating base is refused, and each platform of a
variant is gated on its own smoke before anything is pushed.

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
import tempfile
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Protocol, Sequence

from . import labels
from .base import is_bootstrap
from .engine import Engine, EngineError, PushEvent, PushResult
from .registry import Manifest, Registry, RegistryError, split_ref
from .smoke_gate import (
    LABEL, LABEL_ALLOWED, LABEL_LEVELS, LABEL_REASON, LEVELS, BadSmokeRecord, DeclaredSmoke, PublishRefused,
    checked_record, declared_smoke, gate, parse_allowances,
)


def floating_base(base: str) -> str | None:
    """Why this base may move under the same reference (None when it cannot).

    A registry base is fixed only by a digest (name:tag@sha256:...); a tag can be
    re-pushed upstream between two builds. A bootstrap base is built here and
    never pulled.
    """
    if "@sha256:" in base or is_bootstrap(base):
        return None
    return f"the base {base} is not pinned by digest, so the same manifest can build on another image"


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
    smoke = checked_record(image_id, smoke_results)
    declared = declared or DeclaredSmoke(LEVELS, "nothing declares the smoke's levels, so every level is required")
    extra, notes = gate(smoke, image_id, declared, allowed, require_gpu)
    base = registry.rstrip("/")
    repository = tags[0].rsplit(":", 1)[0] if ":" in tags[0].rsplit("/", 1)[-1] else tags[0]
    smoked_at = None if extra else smoked_digest(smoke, f"{base}/{repository}", image_id)
    if check_only:
        return None
    if smoked_at:  # the registry holds the very bytes the smoke pulled: the tags go there, nothing is pushed
        done = promote(f"{base}/{repository}@{smoked_at}", tags, smoke_results, declared, require_gpu)
        return replace(done, notes=notes + done.notes + (f"the smoke ran on {base}/{repository}@{smoked_at}: the "
                                                         "tags point at that digest; nothing was pushed",))

    image_labels = engine.labels(image_id)
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


def digests_smoked_in(smoke: Mapping | None, remote: str) -> list[str]:
    """The digests of ``remote`` (host/repository) the engine knew for the image when its smoke ran."""
    return [d.partition("@")[2] for d in (smoke or {}).get("repo_digests", ()) if d.partition("@")[0] == remote]


def smoked_digest(smoke: Mapping | None, remote: str, image_id: str) -> str | None:
    """The digest of ``remote`` (host/repository) the smoke ran on, where its record names one (a host that
    smoked a candidate it pulled by digest): publishing is then pointing tags at it, never a push of other
    bytes. None where the record names no digest of ``remote``; BadSmokeRecord where the registry holds none
    of those it names as this image."""
    here = digests_smoked_in(smoke, remote)
    if not here:
        return None
    host, repository, _ = split_ref(f"{remote}:smoked")
    reg = Registry(host)
    try:
        for digest in here:
            held = reg.manifest(repository, digest)
            if held is not None and image_id in held.image_ids():
                return digest
    except RegistryError as exc:
        raise PublishRefused(f"the registry: {exc}") from None
    raise BadSmokeRecord(f"the smoke of image {image_id[:19]} ran on {remote}@{here[0]}, which the registry does not "
                         "hold as this image; smoke the image again (or push it with --candidate and smoke that)")


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
        if taken is None or image_id in taken.image_ids():
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
    if pushed is None or image_id not in pushed.image_ids():
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
    image_id, smoke = _smoked_id(manifest, smoke_results)
    if image_id is None:
        raise PublishRefused(f"{registry_ref}: a {manifest.media_type}, not one image; promote each platform's image")
    here = digests_smoked_in(smoke, f"{host}/{repository}")
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


def _smoked_id(manifest: Manifest, smoke_results: Path) -> tuple[str | None, dict | None]:
    """(the id the smoke of the image ``manifest`` names was recorded by, that record): the first of its
    image_ids with a record (an engine with the containerd image store records the manifest's digest), else
    its config digest with none (the gate then refuses it); (None, None) for an index no smoke ran on."""
    for image_id in manifest.image_ids():
        smoke = checked_record(image_id, smoke_results)
        if smoke is not None:
            return image_id, smoke
    return manifest.config_digest, None


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
            # No provenance attestation: on the containerd image store an image's id is its index's digest,
            # which holds the attestation and its build times, so labelling the same image again would give
            # another image, and a republish would find its content tag naming "another image".
            derived = engine.build(Path(tmp), dockerfile, tags=list(refs), labels=dict(labels), provenance=False,
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


def refuse_floating_base(base: str, allowed: bool) -> None:
    """PublishRefused for a base that may move under the same reference, unless --allow-floating-base."""
    floating = floating_base(base)
    if floating and not allowed:
        raise PublishRefused(f"{floating}; pin it (name:tag@sha256:…) or pass --allow-floating-base")


def allowances(values: Sequence[str], reason: str | None, require_gpu: bool) -> dict[str, str]:
    """--allow-skipped and --reason as {level: reason} (parse_allowances); ValueError with the message for
    the user, also where --require-gpu contradicts them."""
    allowed = parse_allowances(values, reason)
    if require_gpu and "gpu" in allowed:
        raise ValueError("--require-gpu and --allow-skipped gpu contradict each other")
    return allowed


def platform_allowances(platform: str, own: str, allowed: Mapping[str, str],
                        no_gpu: Mapping[str, str]) -> dict[str, str]:
    """The levels ``platform``'s image may publish without passing. Another platform than the variant's own
    skips its GPU levels only where the manifest says why (no_gpu_smoke: ``no_gpu``); --allow-skipped
    (``allowed``) is for the variant's own platform."""
    own_allowed = dict(allowed) if platform == own else {}
    if platform in no_gpu:
        own_allowed.update({"import": no_gpu[platform], "gpu": no_gpu[platform]})
    return own_allowed


def publish_platforms(engine: Engine, tags_of: Mapping[str, list[str]], own: str, registry: str,
                      smoke_results: Path, *, declared: DeclaredSmoke, allowed: Mapping[str, str],
                      no_gpu_smoke: Sequence[tuple[str, str]], require_gpu: bool, sboms: Mapping[str, Path | None],
                      progress: PushProgress | None, explicit_tags: bool
                      ) -> tuple[dict[str, Published], dict[str, str]]:
    """Each platform's image (``tags_of``: platform -> its tags; ``own``: the variant's own platform)
    published, and the index digest per tag. Every image is gated on its own smoke before anything is
    pushed: with several platforms a first pass only checks them all, and then one multi-platform index is
    pushed per tag of the own platform's image (publish_index)."""
    no_gpu = {p: why for p, why in no_gpu_smoke if p in tags_of}
    several = len(tags_of) > 1
    results: dict[str, Published] = {}
    for check_only in ((True, False) if several else (False,)):
        for platform, tags in tags_of.items():
            result = publish(engine, tags, registry, smoke_results, require_gpu=require_gpu and platform not in no_gpu,
                             declared=declared, allowed=platform_allowances(platform, own, allowed, no_gpu),
                             progress=progress, check_only=check_only, sbom=sboms[platform],
                             explicit_tags=explicit_tags)
            if result is not None:
                results[platform] = result
    indexes = publish_index(tags_of[own], registry, results, no_gpu, engine.labels(tags_of[own][0])) if several else {}
    return results, indexes


__all__ = [
    "BadSmokeRecord", "DeclaredSmoke", "LEVELS", "PublishRefused", "Published", "allowances", "declared_smoke",
    "derive", "gate", "parse_allowances", "promote", "publish", "publish_platforms", "push_candidate",
    "refuse_floating_base",
]
