"""The container engine adapter: the one module that talks to Docker.

Everything goes through python-on-whales (the docker CLI plus the buildx
plugin). Nothing happens at import time; python-on-whales itself is imported
on first use, so render and resolve code and their tests never need it.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence, cast

if TYPE_CHECKING:  # pragma: no cover
    from python_on_whales import DockerClient

__all__ = [
    "BuildFailed",
    "Engine",
    "EngineError",
    "Mount",
    "RunResult",
    "import_rootfs",
    "write_rootfs_tar",
]


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


class Engine:
    """A Docker engine reached through the docker CLI and buildx.

    ``client_call`` is the command that runs the CLI (default ``["docker"]``,
    taken from PATH when used).
    """

    def __init__(self, client_call: Sequence[str] = ("docker",), log_tail_lines: int = 80) -> None:
        self._client_call = list(client_call)
        self._log_tail_lines = log_tail_lines
        self._client: DockerClient | None = None

    # -- plumbing ---------------------------------------------------------
    @property
    def docker(self) -> DockerClient:
        if self._client is None:
            from python_on_whales import DockerClient

            self._client = DockerClient(client_call=self._client_call)
        return self._client

    @staticmethod
    def _errors() -> tuple[type[BaseException], ...]:
        from python_on_whales.client_config import ClientNotFoundError
        from python_on_whales.exceptions import DockerException

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
        return None

    def available(self) -> bool:
        """True when a daemon answers and buildx works."""
        return self.unavailable_reason() is None

    def server_version(self) -> str:
        return str(self.docker.version().server.version)

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
    ) -> str:
        """Build with buildx into the local image store; return the image id.

        ``secrets`` maps a BuildKit secret id to a host file (used with
        ``RUN --mount=type=secret,id=...``); secrets never land in a layer.
        With ``progress`` the plain build log streams to stderr. On failure
        raises :class:`BuildFailed` carrying the tail of the log.
        """
        from python_on_whales.client_config import ClientNotFoundError
        from python_on_whales.exceptions import DockerException

        secret_specs = [f"id={sid},src={Path(src).resolve()}" for sid, src in (secrets or {}).items()]
        for sid, src in (secrets or {}).items():
            if not Path(src).is_file():
                raise BuildFailed(f"secret {sid!r}: {src} is not a file", "")
        tail: collections.deque[str] = collections.deque(maxlen=self._log_tail_lines)
        with tempfile.TemporaryDirectory(prefix="pinwheel-build-") as tmp:
            metadata = Path(tmp) / "metadata.json"
            try:
                lines = self.docker.buildx.build(
                    Path(context),
                    file=Path(dockerfile),
                    tags=list(tags),
                    labels=dict(labels or {}),
                    build_args=dict(build_args or {}),
                    secrets=secret_specs,
                    target=target,
                    load=True,
                    cache=cache,
                    progress="plain",
                    metadata_file=metadata,
                    stream_logs=True,
                )
                for line in cast("Iterator[str]", lines):
                    tail.append(line.rstrip("\n"))
                    if progress:
                        sys.stderr.write(line)
                        sys.stderr.flush()
            except DockerException as exc:
                raise BuildFailed(
                    f"build of {dockerfile} failed (exit {exc.return_code})", "\n".join(tail)
                ) from None
            except (FileNotFoundError, PermissionError, ClientNotFoundError) as exc:
                raise BuildFailed(f"cannot run the docker CLI: {exc}", "") from None
            image_id = _image_id_from_metadata(metadata)
        if image_id is None:
            if not tags:
                raise BuildFailed("build finished but reported no image id", "\n".join(tail))
            image_id = self.image_id(tags[0])
        return image_id

    # -- images ----------------------------------------------------------------
    def image_exists(self, ref: str) -> bool:
        return bool(self.docker.image.exists(ref))

    def image_id(self, ref: str) -> str:
        return str(self.docker.image.inspect(ref).id)

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

    def tag(self, src: str, dst: str) -> None:
        self.docker.image.tag(src, dst)

    def push(self, ref: str) -> str:
        """Push ``ref`` to its registry and return the manifest digest."""
        from python_on_whales.exceptions import DockerException

        try:
            self.docker.image.push(ref, quiet=True)
        except DockerException as exc:
            raise EngineError(f"push of {ref} failed: {(exc.stderr or '').strip() or exc}") from None
        digest = self.repo_digest(ref)
        if digest is None:
            raise EngineError(f"push of {ref} reported no digest")
        return digest

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

    def import_tarball(self, tarball: Path, ref: str, changes: Iterable[str] = ()) -> str:
        """``docker import`` a root filesystem tarball as ``ref``; return the image id."""
        image = self.docker.image.import_(Path(tarball), tag=ref, changes=list(changes))
        return str(image.id)

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


def import_rootfs(source: Path, ref: str, engine: Engine, changes: Iterable[str] = ()) -> str:
    """Import a root filesystem (a directory or a tarball) as image ``ref``; return its id."""
    source = Path(source)
    if source.is_file():
        return engine.import_tarball(source, ref, changes)
    if not source.is_dir():
        raise EngineError(f"{source}: no such root filesystem")
    with tempfile.TemporaryDirectory(prefix="pinwheel-rootfs-") as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        write_rootfs_tar(source, tarball)
        return engine.import_tarball(tarball, ref, changes)


def write_rootfs_tar(root: Path, tarball: Path) -> Path:
    """Tar ``root``'s contents with numeric owners into ``tarball`` (written atomically)."""
    tarball = Path(tarball)
    tmp = tarball.with_name(tarball.name + ".part")
    proc = subprocess.run(
        ["tar", "-C", str(root), "--numeric-owner", "-cf", str(tmp), "."],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise EngineError(f"tar of {root} failed: {proc.stderr.strip()}")
    tmp.replace(tarball)
    return tarball


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


def _last_line(exc: BaseException) -> str:
    stderr = getattr(exc, "stderr", None)
    text = (stderr or str(exc)).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
