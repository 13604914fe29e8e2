"""Build a Plan's image on the BuildKit engine: context, secrets, labels, tags.

The build context holds only what the Dockerfile reads (the rendered file,
the variant's lock, the smoke payload, the local wheels that match the
manifest's globs, each wheel set's in a directory of its own), so nothing else
in the checkout can leak into a layer or invalidate the cache. Secrets travel as BuildKit secrets and live in a
temporary directory outside the context.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import json
import shutil
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence
from pathlib import Path

from . import labels
from . import payload as smoke_payload
from .identity import ContentInputs, base_digest, content_inputs
from .labels import BASE_DIGEST_KIND, CONTENT_TAG, OCI_BASE_DIGEST, OCI_SOURCE
from .base import platform_base
from .builder_features import ImageExport
from .engine import CacheExport, Engine
from ..index import ca_bundle, default_index_url, pip_setting
from ..lock import lock_sha256, locked_versions
from ..plan import Plan, plan_variant
from ..steps import kind_of
from ..steps.base import Staging, StagingError
from ..workspace import InContext, InImage, LockFiles, Workspace
from ..render import Layering, dockerfile_groups, render_dockerfile

if TYPE_CHECKING:
    from ..manifest import Manifest

LABEL_PREFIX = labels.PREFIX


class BuildError(Exception):
    """The build cannot start or did not succeed; the message says what to do."""


@dataclass(frozen=True)
class BuildInputs:
    """Where the parts of one variant's build live, relative to the manifest."""

    root: Path  # the manifest's directory
    image_dir: Path  # images/<image>
    lock_dir: Path  # images/<image>/lock/<variant>
    wheels_dir: Path  # wheels/

    @classmethod
    def for_plan(cls, plan: Plan, root: Path) -> "BuildInputs":
        ws = Workspace(root, plan.image)
        return cls(root, ws.image_dir, ws.plan_lock_dir(plan), ws.wheels_dir)


@dataclass(frozen=True)
class BuildCache:
    """The layer cache of one build: refs to read it from, and the ref to write it to (None: not written);
    to_mode: how much of the build a registry cache holds (min: the image's layers, max: every stage's)."""

    from_refs: tuple[str, ...] = ()
    to_ref: str | None = None
    to_mode: str = "max"


@dataclass(frozen=True)
class BuiltImage:
    image_id: str
    tags: tuple[str, ...]
    labels: dict[str, str]
    variant: str
    cache_exports: tuple[CacheExport, ...] = ()


def cache_ref(plan: Plan, registry: str) -> str:
    """The variant's cache ref in ``registry``: one per variant and platform, beside its images."""
    arch = f"-{plan.platform_arch}" if plan.platform_arch else ""
    return f"{registry}/{plan.repository}:cache-{plan.variant.name}{arch}"


def tags_for(plan: Plan, inputs_sha256: str, today: dt.date | None = None) -> tuple[str, str]:
    """The dated tag from the manifest's pattern, and an immutable one from the image's inputs
    (identity.ContentInputs.digest: manifest, lock, base digest, local wheels, assets, sources, patches)."""
    today = today or dt.datetime.now(dt.timezone.utc).date()
    v = plan.variant
    dated = v.tag.format(date=today.strftime("%Y%m%d"), variant=v.name, cuda=v.cuda.replace(".", ""),
                         torch=v.torch.replace(".", ""), python=v.python.replace(".", ""))
    inputs = inputs_sha256[:12]
    arch = f"-{plan.platform_arch}" if plan.platform_arch else ""  # another platform's image: its own tags
    return f"{plan.repository}:{dated}{arch}", f"{plan.repository}:{v.name}-{inputs}{arch}"


def source_date(root: Path) -> dt.datetime:
    """When the sources were last changed: SOURCE_DATE_EPOCH, else the commit time, else now.

    A label that changed on every build would give every cache-hit rebuild a
    new image id, and a recorded smoke would no longer match it.
    """
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        try:
            proc = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=root, capture_output=True, text=True,
                                  timeout=10)
            epoch = proc.stdout.strip() if proc.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            epoch = ""
    if epoch.isdigit():
        return dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc)
    return dt.datetime.now(dt.timezone.utc)


def labels_for(plan: Plan, lock_sha256: str, versions: dict[str, str], dated_tag: str, revision: str | None,
               created: dt.datetime) -> dict[str, str]:
    labels = {
        "org.opencontainers.image.title": plan.title or plan.image,
        "org.opencontainers.image.version": dated_tag.split(":", 1)[1],
        "org.opencontainers.image.created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "org.opencontainers.image.base.name": plan.variant.base,
        f"{LABEL_PREFIX}.image": plan.image,
        f"{LABEL_PREFIX}.variant": plan.variant.name,
        f"{LABEL_PREFIX}.cuda": plan.variant.cuda,
        f"{LABEL_PREFIX}.torch": plan.variant.torch,
        f"{LABEL_PREFIX}.manifest.sha256": plan.manifest_sha256,
        f"{LABEL_PREFIX}.lock.sha256": lock_sha256,
        f"{LABEL_PREFIX}.versions": json.dumps(versions, sort_keys=True, separators=(",", ":")),
    }
    if revision:
        labels["org.opencontainers.image.revision"] = revision
    return labels


def base_digest_kind(engine: Engine, base: str, digest: str) -> str:
    """What ``digest`` (the base.digest label) is: a manifest digest, or, for a base that has none in a
    registry (a bootstrap base), the local image's id."""
    if "@sha256:" in base or not engine.image_exists(base) or engine.image_id(base) != digest:
        return "manifest"
    return "image-id"


def source_url(root: Path) -> str | None:
    """org.opencontainers.image.source: the repository the image is built from, as CI names it, else the
    checkout's `origin` remote (https only, without credentials); None when neither says."""
    server, repo = os.environ.get("GITHUB_SERVER_URL", "").strip(), os.environ.get("GITHUB_REPOSITORY", "").strip()
    if server and repo:
        return f"{server.rstrip('/')}/{repo}"
    try:
        proc = subprocess.run(["git", "config", "--get", "remote.origin.url"], cwd=root, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return https_source(proc.stdout.strip()) if proc.returncode == 0 else None


def https_source(url: str) -> str | None:
    """A remote's address as a browser opens it, as CI tools write the source label: https as is, an ssh
    remote (``git@host:org/repo.git``, ``ssh://git@host[:port]/org/repo.git``) as https on the same host
    and path; never a user or credentials. None for anything else (a local path, a file:// remote)."""
    from urllib.parse import urlsplit

    scp = re.fullmatch(r"(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+):(?!//)/?([^\s]+)", url)
    if scp and "/" in scp.group(2):
        return f"https://{scp.group(1)}/{scp.group(2)}"
    parts = urlsplit(url)
    if parts.scheme not in ("https", "ssh", "git+ssh") or not parts.hostname or not parts.path.strip("/"):
        return None
    return f"https://{parts.hostname}{parts.path}"


def git_revision(root: Path) -> str | None:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def dockerfile_for(plans: list[Plan], plan: Plan) -> tuple[str, list[Plan]]:
    """The file name of the Dockerfile that builds plan's variant, and the Plans it serves."""
    for name, members in dockerfile_groups(plans).items():
        if any(p.variant.name == plan.variant.name for p in members):
            return name, members
    raise BuildError(f"variant {plan.variant.name} is not among the Plans rendered")


def check_inputs(plans: list[Plan], plan: Plan, inputs: BuildInputs) -> None:
    """Refuse to build from a stale Dockerfile or without a lock."""
    name, members = dockerfile_for(plans, plan)
    dockerfile = inputs.image_dir / name
    if not dockerfile.exists() or dockerfile.read_text() != render_dockerfile(members):
        raise BuildError(f"{dockerfile.relative_to(inputs.root)} is missing or out of date: run `make render`")
    if not (inputs.lock_dir / LockFiles.REQUIREMENTS).exists():
        raise BuildError(f"variant {plan.variant.name} has no lock in {inputs.lock_dir.relative_to(inputs.root)}: "
                         "run `make lock`")


def engine_layering(plan: Plan, engine: Engine) -> Layering:
    """How this engine builds the plan's wheel sets: parent-free (as the committed Dockerfile has them) only
    where the engine has COPY --link; else chained, with the note that says so."""
    asked = Layering.of(plan)
    if not asked.parent_free or engine.copy_link():
        return asked
    return Layering.of(plan, copy_link=False)


def refuse_todos(plan: Plan) -> None:
    """A manifest that still holds values import could not know (its `todo:` entries) is not built: a
    placeholder commit or sha256 would only fail deep in the build, or build something nobody chose."""
    if plan.todos:
        shown = "; ".join(plan.todos[:3]) + (f"; and {len(plan.todos) - 3} more" if len(plan.todos) > 3 else "")
        raise BuildError(f"the manifest still has {len(plan.todos)} TODO(s) left by import ({shown}): fill each "
                         f"in and delete its `todo:` entry, or run `import --pin` to pin what can be pinned")


def check_local_wheels(plan: Plan, inputs: BuildInputs) -> list[str]:
    """Every local wheel this variant installs, checked in wheels/ on the host before the engine starts.

    A required wheel (if_missing: fail) that is missing, or any glob with more
    than one match, is a BuildError naming the glob and how to provide the
    wheel: the build would only fail later, in the image's preflight. What a
    missing skip or fallback wheel will do is returned as warnings.
    """
    errors: list[str] = []
    warnings: list[str] = []
    for pkg in plan.packages():  # active in this variant: its gates are on
        if not pkg.local:
            continue
        found = [w.name for w in plan.local_wheels(inputs.wheels_dir, pkg.local.glob) if w.is_file()]
        if len(found) > 1:
            errors.append(f"{pkg.multiple_wheels()} {' '.join(found)}")
        elif not found:
            level, message = pkg.missing_wheel()
            (errors if level == "ERROR" else warnings).append(message)
    if errors:
        where = f"(wheels/ is {inputs.wheels_dir})"
        if len(errors) == 1:
            raise BuildError(f"{errors[0]} {where}")
        raise BuildError(f"{len(errors)} local wheels are not usable {where}:\n" +
                         "\n".join(f"  {e}" for e in errors))
    return warnings


def assemble_context(plan: Plan, inputs: BuildInputs, context: Path, dockerfile: str = "Dockerfile") -> None:
    shutil.copy2(inputs.image_dir / dockerfile, context / "Dockerfile")
    for path in LockFiles.of_platform(inputs.lock_dir):  # this platform's lock only
        target = context / "lock" / plan.variant.name / path.relative_to(inputs.lock_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    payload = context / InContext.SMOKE_PAYLOAD  # pinwheel.smoke, as one zipapp (image.payload)
    payload.write_bytes(smoke_payload.build())
    payload.chmod(0o644)
    (context / InContext.WHEELS).mkdir()
    for step in plan.steps:  # each wheel set's own local wheels in a directory of its own, which its step mounts
        local = [p for p in step.packages if p.local]
        if not local:
            continue
        wheels = context / InContext.wheel_set(step.name)
        wheels.mkdir()  # even empty (its gate off, its wheels missing): the step mounts it all the same
        for pkg in local:
            if pkg.active and inputs.wheels_dir.is_dir():
                for wheel in plan.local_wheels(inputs.wheels_dir, pkg.local.glob):  # the Plan's platform's only
                    shutil.copy2(wheel, wheels / wheel.name)


def write_secrets(plan: Plan, secrets_dir: Path) -> dict[str, Path]:
    """The CA bundle and pip's index configuration, as files for BuildKit secrets."""
    secrets: dict[str, Path] = {}
    ca = ca_bundle()
    if ca and Path(ca).is_file():
        secrets["ca"] = Path(ca)
    lines = ["[global]", f"index-url = {default_index_url()}"]
    trusted = pip_setting("PIP_TRUSTED_HOST", ("install.trusted-host", "global.trusted-host"))
    if trusted:
        lines.append(f"trusted-host = {trusted}")
    extras: list[str] = []
    if plan.variant.torch_index_env:
        extra = plan.variant.torch_index_url()
        if not extra:
            raise BuildError(plan.variant.torch_index_unset())
        extras.append(extra)
    # the indexes and find-links pages the manifest names packages to (each slice is hash-checked)
    named = {p.index.name: p.index for p in plan.packages() if getattr(p, "index", None) is not None}
    extras += [i.url for _, i in sorted(named.items()) if not i.flat]
    flat = [i.url for _, i in sorted(named.items()) if i.flat]
    if extras:
        lines.append("extra-index-url = " + "\n    ".join(extras))
    if flat:
        lines.append("find-links = " + "\n    ".join(flat))
    pipconf = secrets_dir / "pip.conf"
    pipconf.write_text("\n".join(lines) + "\n")
    pipconf.chmod(0o600)
    secrets["pipconf"] = pipconf
    if plan.installer == "uv":  # uv reads no pip.conf: the same index configuration as its uv.toml
        secrets["uvconf"] = _uv_config(secrets_dir, trusted, extras, flat)
    return secrets


def image_identity(plan: Plan, root: Path, engine: Engine | None, base: str | None = None) -> ContentInputs:
    """What decides the image of ``plan`` built FROM ``base`` (its reference; the variant's by default)."""
    base = base or platform_base(plan.variant.base, plan.platform_arch)
    return content_inputs(plan, root, base, base_digest(engine, base))


def write_sbom(plan: Plan, root: Path, identity: ContentInputs, immutable: str, created: dt.datetime) -> dict[str, str]:
    """The SBOM written beside the image (Workspace.sbom_file), and the labels that point at it."""
    from .sbom import SbomError, make_sbom, render as render_sbom  # lazy: cyclonedx costs ~0.5 s, paid by builds only

    try:
        text = render_sbom(make_sbom(plan, root, identity, immutable, created))
    except SbomError as exc:
        raise BuildError(str(exc)) from None
    path = Workspace(root, plan.image).sbom_file(immutable)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return {labels.SBOM: labels.sbom_tag(immutable.rsplit(":", 1)[-1]),
            labels.SBOM_SHA256: hashlib.sha256(text.encode()).hexdigest()}


def _uv_config(secrets_dir: Path, trusted: str | None, extras: list[str], flat: list[str] = ()) -> Path:
    """uv.toml with pip's index URL (and the extra indexes and find-links pages, pip's trusted hosts): what uv
    installs from."""
    import tomli_w  # lazy: only a build writes it

    config: dict = {"allow-insecure-host": trusted.split()} if trusted else {}
    config["pip"] = {"index-url": default_index_url(), **({"extra-index-url": list(extras)} if extras else {}),
                     **({"find-links": list(flat)} if flat else {})}
    path = secrets_dir / "uv.toml"
    path.write_text(tomli_w.dumps(config))
    path.chmod(0o600)
    return path


def base_variant_plan(m: Manifest, plan: Plan) -> Plan | None:
    """The Plan of the variant whose image ``plan`` starts FROM, for ``plan``'s platform (the manifest
    refuses a base_variant that is not built for every platform of the variant on it); None where
    ``plan`` starts from its base image."""
    if not plan.variant.base_variant:
        return None
    return plan_variant(m, plan.variant.base_variant, platform=plan.container_platform)


def from_base_variant(base_tags: Sequence[str]) -> str:
    """What a variant built on another variant's image starts FROM: that image's immutable tag. BuildKit
    resolves FROM as a reference, and an image id is not one (it would look for docker.io/library/sha256);
    the immutable tag names the image just built, and goes into the content identity of the one on it."""
    return base_tags[1]


def base_reference(plan: Plan, base_image: str | None) -> str:
    """What FROM ${BASE} is given: the variant's base (a digest pin kept), or, for base_variant, the
    image of that variant, built first by the caller (its id or a tag)."""
    if plan.variant.base_variant:
        if not base_image:
            raise BuildError(f"variant {plan.variant.name} is built on variant {plan.variant.base_variant}'s image: "
                             f"build that first and pass it as the base")
        return base_image
    return base_image or platform_base(plan.variant.base, plan.platform_arch)  # a bootstrap base per arch


def _cache_options(cache: BuildCache | None, on_export) -> dict:
    """Engine.build's cache arguments, only those a build uses."""
    options: dict = {}
    if cache and cache.from_refs:
        options["cache_from"] = cache.from_refs
    if cache and cache.to_ref:
        options.update(cache_to=cache.to_ref, cache_mode=cache.to_mode, on_cache_export=on_export)
    return options


def stage_steps(plan: Plan, root: Path, context: Path) -> None:
    """What each step's kind puts in the build context (StepKind.stage); StagingError when it cannot."""
    staging = Staging(plan, Path(root), context, Workspace(root, plan.image).asset_cache)
    for step in plan.steps:
        kind_of(step).stage(step, staging)


def step_labels(plan: Plan) -> dict[str, str]:
    """One label per kind that names its steps (StepKind.label_entries), its entries merged over the steps."""
    found: dict[str, dict] = {}
    for step in plan.steps:
        kind = kind_of(step)
        if kind.label:
            entries = kind.label_entries(step, plan)
            if entries:
                found.setdefault(f"{labels.PREFIX}.{kind.label}", {}).update(entries)
    return {key: json.dumps(value, sort_keys=True, separators=(",", ":")) for key, value in found.items()}


def build_image(plans: list[Plan], plan: Plan, root: Path, engine: Engine, target: str = "image",
                progress: bool = True, extra_tags: tuple[str, ...] = (), base_image: str | None = None,
                cache: BuildCache | None = None, fresh_checks: bool = False,
                on_log: Callable[[str], None] | None = None, export: ImageExport | None = None) -> BuiltImage:
    """Build one variant. base_image: the image a base_variant variant starts FROM (the BASE build arg);
    cache: where its layer cache is read from and written to; fresh_checks: the invariant reuses no earlier
    passing result; on_log: sees each line of the build log (progress: it streams to stderr too); export: the
    image exporter's compression and rewrite-timestamp (builder_features.image_export)."""
    inputs = BuildInputs.for_plan(plan, root)
    base = base_reference(plan, base_image)
    check_inputs(plans, plan, inputs)
    check_local_wheels(plan, inputs)
    lock_sha = lock_sha256(inputs.lock_dir)
    identity = image_identity(plan, root, engine, base)
    dated, immutable = tags_for(plan, identity.digest)
    tags = (dated, immutable) if target == "image" else (f"{plan.repository}:{immutable.split(':', 1)[1]}-{target}",)
    versions = locked_versions(plan, inputs.lock_dir)
    created = source_date(root)
    labels = labels_for(plan, lock_sha, versions, dated, git_revision(root), created)
    labels["org.opencontainers.image.base.name"] = base
    if identity.base_digest:
        labels[OCI_BASE_DIGEST] = identity.base_digest
        labels[BASE_DIGEST_KIND] = base_digest_kind(engine, base, identity.base_digest)
    source = source_url(root)
    if source:
        labels[OCI_SOURCE] = source
    labels.update(identity.labels())  # every input, and their digest (the immutable tag's hash)
    labels[CONTENT_TAG] = immutable.rsplit(":", 1)[-1]
    labels.update(write_sbom(plan, root, identity, immutable, created))
    labels.update(step_labels(plan))  # what each kind names of its steps: an asset's URL and sha256, a patch's
    exports: list[CacheExport] = []
    with tempfile.TemporaryDirectory(prefix="pinwheel-context-") as ctx, \
            tempfile.TemporaryDirectory(prefix="pinwheel-secrets-") as sec:
        context = Path(ctx)
        name, members = dockerfile_for(plans, plan)
        assemble_context(plan, inputs, context, name)
        if Layering.of(plan).parent_free and not engine_layering(plan, engine).parent_free:
            # an engine without COPY --link builds the chained rendering of the same steps
            (context / "Dockerfile").write_text(render_dockerfile(members, copy_link=False))
        try:  # each step's files (a verified download, a patch) staged in the context
            stage_steps(plan, root, context)
        except StagingError as exc:
            raise BuildError(str(exc)) from None
        secrets = write_secrets(plan, Path(sec))
        image_id = engine.build(
            context, context / "Dockerfile", tags=list(tags + extra_tags), labels=labels,
            build_args={"BASE": base, **plan.build_args, **({InImage.FRESH_CHECKS_ARG: "1"} if fresh_checks else {})},
            secrets=secrets,
            target=target, progress=progress, **({"on_log": on_log} if on_log else {}),
            platform=plan.container_platform if plan.variant.platforms else None,
            **_cache_options(cache, exports.append), **({"export": export} if export else {}),
        )
    return BuiltImage(image_id, tags + extra_tags, labels, plan.variant.name, tuple(exports))
