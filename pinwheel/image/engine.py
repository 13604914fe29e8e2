"""The container engine adapter: the one module that talks to Docker.

Everything goes through python-on-whales (the docker CLI plus the buildx
plugin), except `push` and `local_image_id`: push runs the same CLI under a
pseudo-terminal, the only place the CLI reports a push's bytes, and reads the
pushed manifest back with `docker manifest inspect`; local_image_id is one
plain CLI call, for a report. (The engine API's push endpoint streams the same
progress as JSON, but reading it means a second client beside the CLI, one that
speaks to every host the CLI reaches: unix and tcp sockets, ssh:// hosts,
docker contexts and their TLS settings. The CLI stays the one client, so its
progress text is parsed, by push_output.py.) Nothing happens at import time.

Where it builds is this adapter's business only: ``host`` (``--engine-host``,
a remote or second engine), ``context`` (a docker context) and ``builder``
(any buildx builder, ``--builder``) go on every CLI call it makes. So does
the layer cache: ``cache_to`` is the registry cache (``type=registry,
mode=max``) where the builder can export one, and on a builder that cannot
(the docker driver of an engine with the classic image store, such as
Docker 20.10's BuildKit v0.8) the inline cache, with the image itself pushed
to the cache ref; ``cache_from`` reads either kind.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Sequence, cast

from .cache_spec import buildx_cache_to
from .builder_features import ImageExport, buildx_output, loopback_registry as _loopback_registry
from .push_output import PushedLayer, PushEvent, PushResult, _PushOutputParser, _run_in_pty

if TYPE_CHECKING:  # pragma: no cover
    from python_on_whales import DockerClient

__all__ = [
    "BuildFailed",
    "CacheExport",
    "Engine",
    "EngineError",
    "Mount",
    "PushEvent",
    "PushResult",
    "PushedLayer",
    "RunResult",
]


def _save_failure(ref: str, code: int, stderr: bytes) -> str:
    said = stderr.decode(errors="replace").strip().splitlines()
    return f"docker save {ref}: {said[-1] if said else f'exit {code}'}"


class EngineError(RuntimeError):
    """The engine refused or failed an operation."""


class BuildFailed(EngineError):
    """A build did not produce an image. ``log_tail`` holds the last build log lines."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(message)
        self.message = message
        self.log_tail = log_tail

    def __str__(self) -> str:
        if not self.log_tail:
            return self.message
        return f"{self.message}\n--- last build log lines ---\n{self.log_tail}"


@dataclass(frozen=True)
class RunResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass(frozen=True)
class Mount:
    """A host path bind-mounted into a container."""

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class CacheExport:
    """How a build's layer cache left for ``ref``: ``registry`` (a cache manifest, every stage, mode=max)
    or ``inline`` (the cache keys in the image's config, final stage only; the image pushed to ``ref``)."""

    ref: str
    kind: str  # registry | inline
    digest: str | None = None  # the pushed image's digest (inline)


# Builder drivers whose BuildKit exports a registry cache. The docker driver does only where the engine
# keeps images in containerd (its "driver-type: io.containerd.snapshotter.v1").
_REGISTRY_CACHE_DRIVERS = frozenset({"docker-container", "remote", "kubernetes"})


class Engine:
    """A Docker engine reached through the docker CLI and buildx.

    ``client_call`` is the command that runs the CLI (default ``["docker"]``,
    taken from PATH when used). ``host`` (``unix:///run/x.sock``,
    ``tcp://h:2376``, ``ssh://u@h``) or ``context`` (a docker context name)
    selects the engine; ``builder`` a buildx builder (None: the engine's own,
    the docker driver). Images load into the selected engine's store.
    """

    def __init__(self, client_call: Sequence[str] = ("docker",), log_tail_lines: int = 80, *,
                 host: str | None = None, context: str | None = None, builder: str | None = None) -> None:
        if host and context:
            raise EngineError("give an engine host or a docker context, not both")
        if builder and not host and not context and _is_docker_context(client_call, builder):
            # A docker-driver builder is a docker context; buildx refuses it as --builder and asks for
            # --context, which also loads the result into that context's engine.
            context, builder = builder, None
        self._client_call = [*client_call, *(["--host", host] if host else []),
                             *(["--context", context] if context else [])]
        self._log_tail_lines = log_tail_lines
        self._client: DockerClient | None = None
        self.host = host
        self.context = context
        self.builder = builder
        self._driver: str | None = None

    def describe(self) -> str:
        """Where builds run, in words: ``builder B on engine H`` (``the local engine`` by default)."""
        where = f"engine {self.host}" if self.host else f"docker context {self.context}" if self.context \
            else "the local engine"
        return f"builder {self.builder} on {where}" if self.builder else where

    # -- plumbing ---------------------------------------------------------
    @property
    def docker(self) -> DockerClient:
        if self._client is None:
            from python_on_whales import DockerClient  # lazy: ~0.5 s to import, paid only by engine commands

            self._client = DockerClient(client_call=self._client_call)
        return self._client

    @staticmethod
    def _errors() -> tuple[type[BaseException], ...]:
        from python_on_whales.client_config import ClientNotFoundError  # lazy: ~0.5 s to import, paid only by engine commands
        from python_on_whales.exceptions import DockerException  # lazy: ~0.5 s to import, paid only by engine commands

        return (DockerException, ClientNotFoundError, FileNotFoundError, PermissionError)

    # -- state --------------------------------------------------------------
    def unavailable_reason(self) -> str | None:
        """None when the daemon answers and buildx works, else why not."""
        try:
            self.docker.system.info()
        except self._errors() as exc:
            return f"no Docker daemon answers ({_last_line(exc)}); run scripts/engine-up"
        try:
            self.docker.buildx.version()
        except self._errors() as exc:
            return f"the buildx plugin does not work ({_last_line(exc)}); run scripts/engine-up"
        if self.builder:
            try:
                self.docker.buildx.inspect(self.builder)
            except self._errors() as exc:
                return f"no buildx builder {self.builder!r} ({_last_line(exc)}); see `docker buildx ls`"
        return None

    def builder_driver(self) -> str:
        """The buildx driver of the builder builds use: docker, docker-container, remote, kubernetes."""
        if self._driver is None:
            self._driver = str(self.docker.buildx.inspect(self.builder).driver or "docker")
        return self._driver

    def cache_kind(self) -> str:
        """``registry`` where the builder exports a registry cache, else ``inline``.

        The docker driver exports only the inline cache, unless the engine
        keeps its images in containerd (Docker 24 and later, with the
        containerd image store turned on).
        """
        driver = self.builder_driver()
        if driver in _REGISTRY_CACHE_DRIVERS:
            return "registry"
        if driver == "docker" and self._containerd_store():
            return "registry"
        return "inline"

    def copy_link(self) -> bool:
        """Whether the builder's Dockerfile frontend takes COPY --link (BuildKit v0.10, Docker 23, and later).

        The docker driver's BuildKit is the engine's (Debian's builds report it as v0.0.0), so there the
        engine's version decides; another driver's node reports its own BuildKit version."""
        if self.builder_driver() == "docker":
            return self.engine_version() >= (23, 0)
        proc = subprocess.run([*self._client_call, "buildx", "inspect", *([self.builder] if self.builder else [])],
                              capture_output=True, text=True)
        found = re.search(r"^BuildKit(?: version)?:\s*v?(\S+)", proc.stdout, re.MULTILINE | re.IGNORECASE)
        return bool(found) and _major_minor(found.group(1)) >= (0, 10)

    def engine_version(self) -> tuple[int, int]:
        """(major, minor) of the engine's version: 26.1.5+dfsg1 is (26, 1)."""
        return _major_minor(str(self.docker.version().server.version or ""))

    def _containerd_store(self) -> bool:
        info = self.docker.system.info()
        status = [tuple(pair) for pair in (getattr(info, "driver_status", None) or []) if len(pair) == 2]
        return ("driver-type", "io.containerd.snapshotter.v1") in status

    def available(self) -> bool:
        """True when a daemon answers and buildx works."""
        return self.unavailable_reason() is None

    # -- build --------------------------------------------------------------
    def build(
        self,
        context: Path,
        dockerfile: Path,
        tags: Sequence[str] = (),
        labels: Mapping[str, str] | None = None,
        build_args: Mapping[str, str] | None = None,
        secrets: Mapping[str, Path] | None = None,
        target: str | None = None,
        progress: bool = False,
        cache: bool = True,
        platform: str | None = None,
        cache_from: Sequence[str] = (),
        cache_to: str | None = None,
        cache_mode: str = "max",
        on_cache_export: Callable[[CacheExport], None] | None = None,
        on_log: Callable[[str], None] | None = None,
        push: bool = False,
        export: ImageExport | None = None,
        provenance: bool = True,
    ) -> str:
        """Build with buildx into the engine's image store (``push``: to its tags' registry, so layers it holds
        need no download); return the image id. On failure raise :class:`BuildFailed` with the log's tail.

        ``cache_from``: cache refs to read (a registry cache or an image with inline cache); ``cache_to``: where
        this build's cache goes, as :meth:`cache_kind` says (``cache_mode`` max: every stage; min: the image's
        layers), told to ``on_cache_export``. ``export``: the exporter's compression and rewrite-timestamp
        (builder_features; None: buildx's own). ``provenance`` False: no provenance attestation (its build
        times make each build of the same inputs another image). ``platform`` (linux/arm64) runs a foreign
        platform's RUN steps through QEMU. ``secrets`` maps a BuildKit secret id to a host file, never in a
        layer. ``progress`` streams the plain log to stderr; ``on_log`` sees each of its lines.
        """
        secret_specs = _secret_specs(secrets)
        cache_kind = self.cache_kind() if cache_to else None
        image_id, tail, exported = self._exported_build(
            context, dockerfile, progress, on_log, export, push, tags=list(tags), labels=dict(labels or {}),
            build_args=dict(build_args or {}), secrets=secret_specs, target=target,
            platforms=[platform] if platform else None, builder=self.builder, cache=cache,
            cache_from=[{"type": "registry", "ref": ref} for ref in cache_from] or None,
            cache_to=buildx_cache_to(cache_to, cache_kind, cache_mode), **({} if provenance else {"provenance": False}))
        if image_id is None and push:
            raise BuildFailed("build pushed but reported no image id", "\n".join(tail))
        image_id = self._read_back(image_id, tags, push, tail)
        for tag in tags[1:] if exported else ():  # an exporter's output names the first tag only
            self.tag(tags[0], tag)
        if cache_to:
            self._export_cache(image_id, cache_to, cache_kind, push, on_cache_export)
        return image_id

    def _read_back(self, image_id: str | None, tags: Sequence[str], push: bool, tail: Iterable[str]) -> str:
        """The metadata's config digest, else (on the containerd store it names no image) the first tag's id."""
        if image_id is not None and (push or not tags or self.local_image_id(image_id) is not None):
            return image_id
        if not tags:
            raise BuildFailed("build finished but reported no image id", "\n".join(tail))
        return self.image_id(tags[0])

    def _exported_build(self, context: Path, dockerfile: Path, progress: bool, on_log: Callable[[str], None] | None,
                        export: ImageExport | None, push: bool, **options):
        """:meth:`_buildx` with ``export``'s --output where it asks for more than buildx's default (else load or
        push); with it, whether an exporter named the image (by its first tag only)."""
        with tempfile.TemporaryDirectory(prefix="pinwheel-oci-") as oci:
            tarball = str(Path(oci) / "image.tar")
            output = None if export is None or export.default or not options["tags"] else buildx_output(
                export, options["tags"], push, tarball if self.builder_driver() == "docker" else None)
            if output and export and export.rewrite_timestamp:
                options["build_args"] = {"SOURCE_DATE_EPOCH": str(export.source_date_epoch), **options["build_args"]}
            image_id, tail = self._buildx(context, dockerfile, progress, on_log, load=not push and not output,
                                          push=push and not output, output=output or {}, **options)
            if output and output["type"] == "oci":  # the docker driver's exporter cannot rewrite timestamps
                self.docker.image.load(Path(output["dest"]), quiet=True)
                image_id = None
        return image_id, tail, output is not None

    def _buildx(self, context: Path, dockerfile: Path, progress: bool, on_log: Callable[[str], None] | None,
                **options) -> tuple[str | None, collections.deque[str]]:
        """Run buildx's build with ``options``, streaming its plain log; the image id its metadata names (None
        where it names none) and the log's tail."""
        from python_on_whales.client_config import ClientNotFoundError  # lazy: ~0.5 s to import, paid only by engine commands
        from python_on_whales.exceptions import DockerException  # lazy: ~0.5 s to import, paid only by engine commands

        tail: collections.deque[str] = collections.deque(maxlen=self._log_tail_lines)
        with tempfile.TemporaryDirectory(prefix="pinwheel-build-") as tmp:
            metadata = Path(tmp) / "metadata.json"
            try:
                lines = self.docker.buildx.build(Path(context), file=Path(dockerfile), **options, progress="plain",
                                                 metadata_file=metadata, stream_logs=True)
                for line in cast("Iterator[str]", lines):
                    tail.append(line.rstrip("\n"))
                    if on_log is not None:
                        on_log(line)
                    if progress:
                        sys.stderr.write(line)
                        sys.stderr.flush()
            except DockerException as exc:
                raise BuildFailed(
                    f"build of {dockerfile} failed (exit {exc.return_code})", "\n".join(tail)
                ) from None
            except (FileNotFoundError, PermissionError, ClientNotFoundError) as exc:
                raise BuildFailed(f"cannot run the docker CLI: {exc}", "") from None
            return _image_id_from_metadata(metadata), tail

    def _export_cache(self, image_id: str, cache_to: str, cache_kind: str | None, push: bool,
                      on_cache_export: Callable[[CacheExport], None] | None) -> None:
        """Where the build's layer cache went: a registry cache, or (inline) the image pushed as the cache ref."""
        export = CacheExport(cache_to, "registry")
        if cache_kind == "inline" and push:
            raise BuildFailed("an inline cache needs the image in the engine's store: build with load", "")
        if cache_kind == "inline":  # the cache travels in the image's config: push the image as the cache ref
            self.tag(image_id, cache_to)
            export = CacheExport(cache_to, "inline", self.push(cache_to).digest)
        if on_cache_export is not None:
            on_cache_export(export)

    # -- images ----------------------------------------------------------------
    def image_exists(self, ref: str) -> bool:
        return bool(self.docker.image.exists(ref))

    def platform(self, ref: str) -> str:
        """The container platform of a local image: linux/amd64, linux/arm64."""
        return "{0.os}/{0.architecture}".format(self.docker.image.inspect(ref))

    def image_id(self, ref: str) -> str:
        return str(self.docker.image.inspect(ref).id)

    def local_image_id(self, ref: str) -> str | None:
        """A local image's id from one CLI call, without python-on-whales' import; None where it is absent."""
        try:
            proc = subprocess.run([*self._client_call, "image", "inspect", "--format", "{{.Id}}", ref],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return (proc.stdout.strip() or None) if proc.returncode == 0 else None

    def labels(self, ref: str) -> dict[str, str]:
        config = self.docker.image.inspect(ref).config
        return dict(config.labels or {}) if config is not None else {}

    def size(self, ref: str) -> int:
        """Uncompressed size in bytes, as the engine reports it."""
        return int(self.docker.image.inspect(ref).size or 0)

    def repo_digest(self, ref: str) -> str | None:
        """The registry digest (``sha256:...``) of ``ref``'s repository, if pushed or pulled."""
        repo = _repository(ref)
        for entry in self.docker.image.inspect(ref).repo_digests or []:
            name, _, digest = entry.partition("@")
            if name == repo:
                return digest
        return None

    def repo_digests(self, ref: str) -> tuple[str, ...]:
        """Every ``repository@sha256:...`` the engine holds for ``ref``'s image (pushed or pulled); () if none."""
        return tuple(str(d) for d in self.docker.image.inspect(ref).repo_digests or [])

    def tag(self, src: str, dst: str) -> None:
        self.docker.image.tag(src, dst)

    def layers(self, ref: str) -> tuple[str, ...]:
        """The diff ids (``sha256:...``) of ``ref``'s layers, bottom first."""
        rootfs = self.docker.image.inspect(ref).root_fs
        return tuple(str(layer) for layer in (rootfs.layers or [])) if rootfs is not None else ()

    def push(self, ref: str, on_event: Callable[[PushEvent], None] | None = None) -> PushResult:
        """Push ``ref`` to its registry; return the manifest digest and what each layer did.

        ``on_event`` sees every layer state change (preparing, waiting,
        pushing, pushed, exists, mounted, retrying) and the byte counts while
        a layer is pushing. The docker CLI reports bytes only to a terminal
        (python-on-whales' ``stream_logs`` carries only the state lines), so
        the CLI runs under a pseudo-terminal where the platform has one. The
        sizes in the result are the blobs' sizes in the registry's manifest
        when the CLI can read it back, else the uncompressed totals the
        progress showed.
        """
        diff_ids = self.layers(ref)
        states: dict[str, str] = {}
        totals: dict[str, int] = {}

        def seen(event: PushEvent) -> None:
            states[event.layer] = event.status
            if event.total:
                totals[event.layer] = event.total
            if on_event is not None:
                on_event(event)

        code, messages = self._run_push(ref, seen)
        if code != 0:
            reason = "; ".join(m for m in messages if not m.startswith("The push refers to")) or f"exit {code}"
            raise EngineError(f"push of {ref} failed: {reason}")
        digest = self.repo_digest(ref)
        if digest is None:
            raise EngineError(f"push of {ref} reported no digest")
        blobs = self._manifest_layers(ref, len(diff_ids))
        layers = []
        for index, diff_id in enumerate(diff_ids):
            short, blob = _short_id(diff_id), blobs[index] if blobs is not None else None
            # the classic store's push names a layer by its diff id, the containerd store's by its blob's digest
            state = states.get(short) or (states.get(_short_id(blob[0])) if blob else None) or "exists"
            layers.append(PushedLayer(diff_id, state, blob[1] if blob else totals.get(short)))
        return PushResult(ref, digest, tuple(layers), "registry" if blobs is not None else "progress")

    def push_index(self, ref: str, images: Sequence[str]) -> str:
        """Push one multi-platform index as ``ref``, of ``images`` (each already pushed to the same registry, one
        per platform); return its digest. With ``docker manifest`` (BuildKit v0.8 has no imagetools that reads
        a plain-HTTP registry); ``--insecure`` lets it talk to a loopback registry without TLS."""
        if not images:
            raise EngineError(f"index {ref}: no images to put in it")
        self._cli(f"index {ref}: docker manifest create failed", "manifest", "create", "--amend", "--insecure", ref,
                  *images)
        said = self._cli(f"index {ref}: docker manifest push failed", "manifest", "push", "--insecure", "--purge", ref)
        digest = said.strip().splitlines()[-1] if said.strip() else ""
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise EngineError(f"index {ref}: docker manifest push reported no digest ({digest!r})")
        return digest

    def _cli(self, what: str, *args: str, timeout: int = 600) -> str:
        """The docker CLI's stdout for ``args``; EngineError naming ``what`` and the CLI's last line if it fails."""
        try:
            proc = subprocess.run([*self._client_call, *args], capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EngineError(f"{what}: {exc}") from None
        if proc.returncode != 0:
            said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise EngineError(f"{what}: {said[-1] if said else f'exit {proc.returncode}'}")
        return proc.stdout

    def _run_push(self, ref: str, seen: Callable[[PushEvent], None]) -> tuple[int, list[str]]:
        """Run ``docker image push``; feed parsed layer events to ``seen``; return (exit code, other lines)."""
        command = [*self._client_call, "image", "push", ref]
        parser = _PushOutputParser(seen)
        try:
            code = _run_in_pty(command, parser.feed)
            if code is None:  # no pseudo-terminal here: the state lines without the byte counts
                proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
                assert proc.stdout is not None
                for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
                    parser.feed(chunk)
                code = proc.wait()
        except (FileNotFoundError, PermissionError) as exc:
            raise EngineError(f"cannot run the docker CLI: {exc}") from None
        parser.close()
        return code, parser.messages

    def _manifest_layers(self, ref: str, count: int) -> list[tuple[str, int]] | None:
        """The (digest, size) of each layer blob of ``ref``'s manifest in its registry, bottom first; None when
        unreadable."""
        command = [*self._client_call, "manifest", "inspect"]
        if _loopback_registry(ref):  # the engine trusts loopback registries without TLS; so must the CLI
            command.append("--insecure")
        try:
            proc = subprocess.run([*command, ref], capture_output=True, text=True, timeout=120)
            manifest = json.loads(proc.stdout) if proc.returncode == 0 else None
            images = [m for m in (manifest or {}).get("manifests") or []
                      if m.get("platform", {}).get("os") != "unknown"]
            if len(images) == 1:  # the containerd store pushes an index: the image beside its attestations
                proc = subprocess.run([*command, f"{_repository(ref)}@{images[0]['digest']}"], capture_output=True,
                                      text=True, timeout=120)
                manifest = json.loads(proc.stdout) if proc.returncode == 0 else None
        except (OSError, subprocess.SubprocessError, ValueError, AttributeError, KeyError, TypeError):
            return None
        layers = manifest.get("layers") if isinstance(manifest, dict) else None
        if not isinstance(layers, list) or len(layers) != count:
            return None
        try:
            return [(str(layer["digest"]), int(layer["size"])) for layer in layers]
        except (KeyError, TypeError, ValueError):
            return None

    def remove(self, ref: str, force: bool = False) -> bool:
        """Remove a tag or image; False when it did not exist."""
        if not self.image_exists(ref):
            return False
        self.docker.image.remove(ref, force=force)
        return True

    def save(self, ref: str, path: Path) -> Path:
        """Write ``docker save`` output for ``ref`` to ``path``."""
        self.docker.image.save(ref, output=Path(path))
        return Path(path)

    @contextlib.contextmanager
    def save_stream(self, ref: str) -> Iterator[IO[bytes]]:
        """``docker save`` of ``ref`` as a stream, written nowhere: a reader of a 30 GB base needs no 30 GB
        of scratch. A failed save raises EngineError with the CLI's last line, once the stream is read."""
        try:
            proc = subprocess.Popen([*self._client_call, "image", "save", ref], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except (FileNotFoundError, PermissionError) as exc:
            raise EngineError(f"cannot run the docker CLI: {exc}") from None
        assert proc.stdout is not None and proc.stderr is not None
        try:
            yield proc.stdout
            while proc.stdout.read(1 << 20):  # a reader that stopped early still lets the save finish
                pass
        except BaseException:
            # A reader that met a short or empty stream most often met a failed save (no room for the daemon's
            # export, a vanished image): its words say why.
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()  # the reader failed: a save blocked on a full pipe would never end
                proc.wait()
                raise
            if code != 0:
                raise EngineError(_save_failure(ref, code, proc.stderr.read())) from None
            raise
        code = proc.wait()
        if code != 0:
            raise EngineError(_save_failure(ref, code, proc.stderr.read()))

    def import_tarball(self, tarball: Path, ref: str, changes: Iterable[str] = (), platform: str | None = None) -> str:
        """``docker import`` a root filesystem tarball as ``ref``; return the image id. ``platform`` (linux/arm64)
        records the files' architecture: Docker 20.10's import ignores --platform outside experimental mode, so
        such an image is built instead (FROM scratch, the tarball ADDed at /, the same ``changes``)."""
        if platform is None:  # read back by the tag: the containerd image store prints an id that names nothing
            self._cli(f"docker import {ref}", "image", "import", *(f"--change={c}" for c in changes), str(tarball), ref,
                      timeout=1800)
            return self.image_id(ref)
        with tempfile.TemporaryDirectory(prefix="pinwheel-import-", dir=Path(tarball).parent) as tmp:
            context = Path(tmp)
            try:
                os.link(tarball, context / "rootfs.tar")
            except OSError:
                shutil.copyfile(tarball, context / "rootfs.tar")
            (context / "Dockerfile").write_text("\n".join(["FROM scratch", "ADD rootfs.tar /", *changes]) + "\n")
            return self.build(context, context / "Dockerfile", tags=[ref], platform=platform)

    # -- containers --------------------------------------------------------------
    def run(
        self,
        image: str,
        command: Sequence[str],
        gpus: bool = False,
        env: Mapping[str, str] | None = None,
        mounts: Sequence[Mount] = (),
        workdir: str | None = None,
        entrypoint: str | None = None,
        network: str | None = None,
        platform: str | None = None,
    ) -> RunResult:
        """Run ``command`` in a fresh container, wait, and return its exit code and output.

        A non-zero exit is a result, not an exception; the container is removed.
        """
        container = self.docker.container.create(
            image,
            list(command),
            gpus="all" if gpus else None,
            envs=dict(env or {}),
            volumes=[(m.source, m.target, "ro" if m.read_only else "rw") for m in mounts],
            workdir=workdir,
            entrypoint=entrypoint,
            networks=[network] if network else [],
            platform=platform,
        )
        try:
            self.docker.container.start(container)
            code = int(self.docker.container.wait(container))
            out: list[bytes] = []
            err: list[bytes] = []
            for source, chunk in self.docker.container.logs(container, stream=True):
                (out if source == "stdout" else err).append(chunk)
        finally:
            self.docker.container.remove(container, force=True)
        return RunResult(
            code,
            b"".join(out).decode(errors="replace"),
            b"".join(err).decode(errors="replace"),
        )


def _secret_specs(secrets: Mapping[str, Path] | None) -> list[str]:
    """buildx's --secret values; BuildFailed for a secret whose file is not one."""
    specs = [f"id={sid},src={Path(src).resolve()}" for sid, src in (secrets or {}).items()]
    for sid, src in (secrets or {}).items():
        if not Path(src).is_file():
            raise BuildFailed(f"secret {sid!r}: {src} is not a file", "")
    return specs


def _major_minor(version: str) -> tuple[int, int]:
    """(major, minor) of a version like 26.1.5+dfsg1 or 0.13.1; (0, 0) when it is not one."""
    found = re.match(r"(\d+)\.(\d+)", version.strip())
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _short_id(diff_id: str) -> str:
    return diff_id.split(":", 1)[-1][:12]


def _image_id_from_metadata(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    value = data.get("containerimage.config.digest")
    return str(value) if value else None


def _repository(ref: str) -> str:
    """``host:5000/a/b:tag`` -> ``host:5000/a/b``; digests stripped too."""
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    return name


def _is_docker_context(client_call: Sequence[str], name: str) -> bool:
    try:
        proc = subprocess.run([*client_call, "context", "inspect", name], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def _last_line(exc: BaseException) -> str:
    stderr = getattr(exc, "stderr", None)
    text = (stderr or str(exc)).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
