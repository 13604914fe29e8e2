"""What a modern builder adds to a build, decided before it starts: the registry cache by default, layers
compressed with zstd, and layers whose file times are clamped to SOURCE_DATE_EPOCH (reproducible).

A modern builder is one whose BuildKit exports a registry cache (Engine.cache_kind: the docker driver of
an engine with the containerd image store, docker-container, remote). Elsewhere (Docker 20.10's docker
driver, BuildKit v0.8) a build stays as it was, and each feature it lacks is one line of note.
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Engine

COMPRESSIONS = ("zstd", "gzip")
# BuildKit v0.13 (Docker 26) brought the exporter's rewrite-timestamp; v0.10 (Docker 23) zstd layers that
# a docker driver's engine keeps
_REWRITE_TIMESTAMP = (26, 0)


@dataclass(frozen=True)
class ImageExport:
    """How the built image leaves the builder: ``compression`` of its new layers (gzip, zstd), and whether
    its layers' file times are clamped to ``source_date_epoch`` (``rewrite_timestamp``)."""

    compression: str = "gzip"
    rewrite_timestamp: bool = False
    source_date_epoch: str | None = None

    @property
    def default(self) -> bool:
        return self.compression == "gzip" and not self.rewrite_timestamp


def registry_answers(registry: str, timeout: float = 3.0) -> bool:
    """Whether ``registry`` (host[:port]) answers the distribution API's /v2/ (401 is an answer: it asks for
    credentials). Loopback registries speak plain HTTP, as the engines trust them."""
    import urllib.error  # lazy: only a build asks, and --help must not load the network's modules
    import urllib.request

    host = registry.split("/", 1)[0]
    loopback = loopback_registry(f"{host}/v2")
    try:
        with urllib.request.urlopen(f"{'http' if loopback else 'https'}://{host}/v2/", timeout=timeout):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except (OSError, ValueError):
        return False


def loopback_registry(ref: str) -> bool:
    """True when ``ref`` names a registry on this host's loopback (``127.0.0.1:5000/a/b:t``)."""
    first, sep, _ = ref.partition("/")
    if not sep or not ("." in first or ":" in first or first == "localhost"):
        return False
    host = first[1:].split("]", 1)[0] if first.startswith("[") else first.rsplit(":", 1)[0] if first.count(":") == 1 else first
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_cache_ref(engine: Engine, ref: str, registry: str) -> tuple[str | None, str | None]:
    """The variant's cache ref when a build given no cache option should read and write it (a builder that
    exports a registry cache, a registry that answers), else None; and the one line of note that says why
    not, where a modern builder is left without it (None on an engine that has no registry cache)."""
    if engine.cache_kind() != "registry":
        return None, None  # Docker 20.10's docker driver: the inline cache only where asked for
    if not registry_answers(registry):
        return None, (f"the registry {registry} does not answer: no layer cache read or written "
                      f"(give --registry, or --no-cache-export)")
    return ref, None


def image_export(engine: Engine, compression: str | None = None,
                 environ: dict[str, str] | None = None) -> tuple[ImageExport, list[str]]:
    """What this builder's image exporter is asked for, and the notes for what it cannot do.

    ``compression`` None: zstd where the builder can. SOURCE_DATE_EPOCH in the environment asks for
    reproducible layers (BuildKit v0.13's rewrite-timestamp)."""
    epoch = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH", "").strip() or None
    notes: list[str] = []
    if engine.cache_kind() != "registry":  # the classic image store keeps gzip layers only
        if compression == "zstd":
            notes.append("the engine keeps gzip layers only (classic image store): the layers stay gzip")
        if epoch:
            notes.append("the builder has no rewrite-timestamp (BuildKit before v0.13): SOURCE_DATE_EPOCH "
                         "does not clamp the layers' file times")
        return ImageExport(source_date_epoch=epoch), notes
    rewrite = bool(epoch)
    if rewrite and engine.builder_driver() == "docker" and engine.engine_version() < _REWRITE_TIMESTAMP:
        notes.append("the engine's BuildKit has no rewrite-timestamp (Docker before 26): SOURCE_DATE_EPOCH "
                     "does not clamp the layers' file times")
        rewrite = False
    return ImageExport(compression or "zstd", rewrite, epoch), notes


def buildx_output(export: ImageExport, tags: list[str], push: bool, oci_tarball: str | None) -> dict[str, str]:
    """buildx's --output for ``export``. rewrite-timestamp cannot go with the image exporter of the docker
    driver, which unpacks what it stores ("conflicts with unpack"): a build that loads is written as an OCI
    tarball (``oci_tarball``, None on other drivers), which the caller loads. The image is named by the first
    tag only (buildx's --output is one CSV line, and a quoted list of names does not survive the CLI
    wrapper); the caller tags the others."""
    compression = {"compression": export.compression,
                   **({"force-compression": "true"} if export.compression != "gzip" else {})}
    rewrite = {"rewrite-timestamp": "true"} if export.rewrite_timestamp else {}
    if rewrite and oci_tarball and not push:
        return {"type": "oci", "dest": oci_tarball, "name": tags[0], **rewrite, **compression}
    return {"type": "image", "name": tags[0], **({"push": "true"} if push else {}), **rewrite, **compression}
