"""The registry's own API (OCI distribution), through oras' client: manifests read and put by digest, tags
pointed at an exact digest, and small artifacts (the SBOM) pushed beside an image.

A tag is pointed at a digest by putting that digest's manifest bytes, unchanged, under the tag: the
registry then serves the same digest for both, so the tag names exactly the bytes that were checked.
`docker buildx imagetools create` would wrap a single manifest in a new index (another digest), and
Docker 20.10's CLI cannot tag inside a registry, so this is the one way here.
Credentials come from the docker configuration, as oras reads it; a loopback registry is spoken
to over plain HTTP, as the engine does.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
OCI_MANIFEST = MANIFEST_TYPES[0]
EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


class RegistryError(Exception):
    """The registry refused or could not be reached; the message says what was asked."""


@dataclass(frozen=True)
class Manifest:
    digest: str
    media_type: str
    raw: bytes

    @property
    def data(self) -> dict:
        return json.loads(self.raw)

    @property
    def config_digest(self) -> str | None:
        try:
            digest = (self.data.get("config") or {}).get("digest")
        except (ValueError, AttributeError):  # not a JSON object: no image's manifest
            return None
        return digest if isinstance(digest, str) else None

    def image_ids(self) -> list[str]:
        """The ids an engine knows the image this manifest names by: its config's digest (the classic image
        store's id), then the manifest's own digest (the containerd image store's id: that store pushes an
        image as the index or manifest it holds, so the digest the push answers is the id it had)."""
        return [d for d in (self.config_digest, self.digest) if d]


def split_ref(ref: str) -> tuple[str, str, str]:
    """host[:port]/repository[:tag|@digest] -> (host, repository, tag or digest)."""
    host, _, rest = ref.partition("/")
    if "@" in rest:
        repository, _, reference = rest.partition("@")
    elif ":" in rest.rsplit("/", 1)[-1]:
        repository, _, reference = rest.rpartition(":")
    else:
        repository, reference = rest, "latest"
    if not host or not repository:
        raise RegistryError(f"{ref}: not a registry reference (host/repository:tag)")
    return host, repository, reference


class Registry:
    """One registry host."""

    def __init__(self, host: str) -> None:
        import oras.provider  # lazy: only publish talks to a registry

        self.host = host
        insecure = host.split(":")[0] in LOOPBACK or host.startswith("[::1]")
        self._oras = oras.provider.Registry(hostname=host, insecure=insecure)
        self._scheme = "http" if insecure else "https"

    def _url(self, repository: str, kind: str, reference: str = "") -> str:
        return f"{self._scheme}://{self.host}/v2/{repository}/{kind}/{reference}"

    def _request(self, method: str, url: str, **kwargs):
        import oras.container  # lazy, as above

        try:
            self._oras.auth.load_configs(oras.container.Container(url.split("/v2/", 1)[1].split("/")[0],
                                                                  registry=self.host))
        except Exception:  # noqa: BLE001 - no credentials for this host is fine for an open registry
            pass
        try:
            return self._oras.do_request(url, method, **kwargs)
        except Exception as exc:  # noqa: BLE001 - requests' and oras' errors alike
            raise RegistryError(f"{method} {url}: {exc}") from None

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        """The manifest ``reference`` (tag or digest) names, byte for byte; None when there is none."""
        resp = self._request("GET", self._url(repository, "manifests", reference),
                             headers={"Accept": ", ".join(MANIFEST_TYPES)})
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise RegistryError(f"{self.host}/{repository}:{reference}: manifest: HTTP {resp.status_code} "
                                f"{resp.text[:200]}")
        raw = resp.content
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        served = resp.headers.get("Docker-Content-Digest")
        if served and served != digest:
            raise RegistryError(f"{self.host}/{repository}:{reference}: the registry says {served} but serves "
                                f"bytes of {digest}")
        if reference.startswith("sha256:") and reference != digest:
            raise RegistryError(f"{self.host}/{repository}@{reference}: the registry served bytes of {digest}")
        return Manifest(digest, resp.headers.get("Content-Type", "").split(";")[0], raw)

    def put_manifest(self, repository: str, tag: str, manifest: Manifest) -> str:
        """Put ``manifest``'s bytes under ``tag``; the digest the registry answers (the manifest's own)."""
        resp = self._request("PUT", self._url(repository, "manifests", tag), data=manifest.raw,
                             headers={"Content-Type": manifest.media_type})
        if resp.status_code not in (200, 201):
            raise RegistryError(f"{self.host}/{repository}:{tag}: put manifest: HTTP {resp.status_code} "
                                f"{resp.text[:200]}")
        served = resp.headers.get("Docker-Content-Digest", manifest.digest)
        if served != manifest.digest:
            raise RegistryError(f"{self.host}/{repository}:{tag}: the registry stored {served}, "
                                f"not {manifest.digest}")
        return served

    def point(self, repository: str, tag: str, digest: str) -> tuple[str, bool]:
        """Point ``tag`` at the manifest ``digest`` names, in the same repository.

        Returns (digest, changed): changed is False when the tag already named it (nothing is put).
        """
        previous = self.repoint(repository, tag, digest)
        return digest, previous != digest

    def repoint(self, repository: str, tag: str, digest: str) -> str | None:
        """Point ``tag`` at ``digest`` as :meth:`point` does; the digest the tag named before (None where
        it named nothing; ``digest`` itself where it already named it, and nothing was put)."""
        now = self.manifest(repository, tag)
        if now is not None and now.digest == digest:
            return digest
        source = self.manifest(repository, digest)
        if source is None:
            raise RegistryError(f"{self.host}/{repository}@{digest}: no such manifest to tag")
        self.put_manifest(repository, tag, source)
        after = self.manifest(repository, tag)
        if after is None or after.digest != digest:
            raise RegistryError(f"{self.host}/{repository}:{tag}: names {after.digest if after else 'nothing'} "
                                f"after it was pointed at {digest}")
        return now.digest if now is not None else None

    def push_blob(self, repository: str, data: bytes, media_type: str) -> dict:
        """Upload one blob (skipped when the registry has it); its OCI descriptor."""
        import oras.container  # lazy, as above

        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        layer = {"mediaType": media_type, "digest": digest, "size": len(data)}
        container = oras.container.Container(repository, registry=self.host)
        with tempfile.TemporaryDirectory(prefix="pinwheel-blob-") as tmp:
            path = Path(tmp) / "blob"
            path.write_bytes(data)
            try:
                resp = self._oras.upload_blob(str(path), container, layer)
            except Exception as exc:  # noqa: BLE001
                raise RegistryError(f"{self.host}/{repository}: upload blob {digest}: {exc}") from None
        if resp.status_code not in (200, 201, 202):
            raise RegistryError(f"{self.host}/{repository}: upload blob {digest}: HTTP {resp.status_code}")
        return layer

    def push_artifact(self, repository: str, tag: str, data: bytes, media_type: str, artifact_type: str,
                      annotations: dict[str, str]) -> str:
        """One file as an OCI artifact (an image manifest with an empty config and one layer) under ``tag``."""
        config = self.push_blob(repository, b"{}", EMPTY_CONFIG)
        layer = self.push_blob(repository, data, media_type)
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact_type,
                    "config": config, "layers": [layer], "annotations": dict(sorted(annotations.items()))}
        raw = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
        return self.put_manifest(repository, tag, Manifest("sha256:" + hashlib.sha256(raw).hexdigest(),
                                                           OCI_MANIFEST, raw))

    def blob(self, repository: str, digest: str) -> bytes:
        resp = self._request("GET", self._url(repository, "blobs", digest))
        if resp.status_code != 200:
            raise RegistryError(f"{self.host}/{repository}@{digest}: blob: HTTP {resp.status_code}")
        return resp.content
