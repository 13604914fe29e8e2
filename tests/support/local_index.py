"""A small package index for tests: wheels built on the fly, served on 127.0.0.1.

    index = LocalIndex(tmp_path)
    index.add("flashinfer-python", "0.6.15.post1", requires=["nvidia-cudnn-frontend>=1.13.0"])
    index.add("nvidia-cudnn-frontend", "1.26.0",
              extras={"cutedsl": ["nvidia-cutlass-dsl[cu13]==4.5.0"]}, metadata_file=False)
    url = index.serve()          # http://127.0.0.1:<port>/simple/
    ...
    index.close()

Layout on disk (under ``root``)::

    files/<wheel>                       the wheels (and sdists)
    files/<wheel>.metadata              PEP 658 metadata, only where metadata_file=True
    simple/index.html                   PEP 503 root
    simple/<project>/index.html         PEP 503 project page (data-core-metadata where present)
    simple/<project>/index.json         PEP 691 project page

The server picks JSON or HTML from the Accept header (``formats`` limits it),
honours single ``Range`` requests (``ignore_range`` turns that off), can fail
the next N requests with a 5xx (``fail_next``), and logs every request.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import os
import re
import threading
import zipfile
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _with_extra(req: str, extra: str) -> str:
    parsed = Requirement(req)
    marker = f'extra == "{extra}"'
    if parsed.marker is not None:
        marker = f"({parsed.marker}) and {marker}"
    parsed.marker = None
    return f"{parsed}; {marker}"


def metadata_text(
    name: str,
    version: str,
    requires: Sequence[str] = (),
    extras: Mapping[str, Sequence[str]] | None = None,
    requires_python: str | None = None,
    extra_headers: Sequence[tuple[str, str]] = (),
) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", "Summary: test package"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    for key, value in extra_headers:
        lines.append(f"{key}: {value}")
    for req in requires:
        lines.append(f"Requires-Dist: {req}")
    for extra, reqs in (extras or {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for req in reqs:
            lines.append(f"Requires-Dist: {_with_extra(req, extra)}")
    return "\n".join(lines) + "\n\n"


def build_wheel(
    directory: Path,
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    extras: Mapping[str, Sequence[str]] | None = None,
    tags: str = "py3-none-any",
    requires_python: str | None = None,
    build: str | None = None,
    ext_module: bool = False,
    payload_size: int = 0,
    metadata: str | None = None,
    dist_info_first: bool = False,
    module_source: str | None = None,
    files: Mapping[str, bytes] | None = None,
) -> Path:
    """Write a small valid wheel and return its path.

    ``tags`` is the wheel's tag triple (compressed sets allowed, e.g.
    ``cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64``).  ``payload_size``
    adds an incompressible data file so that reading the whole wheel costs more
    than reading its central directory.  ``metadata`` replaces the generated
    METADATA text verbatim.  ``dist_info_first`` puts the .dist-info members at
    the start of the archive (far from the central directory) instead of the end.
    ``files`` adds members by their path in the wheel: a top-level ``.pth``, or
    ``<dist>-<version>.dist-info/entry_points.txt`` for console scripts.
    """
    dist = re.sub(r"[-_.]+", "_", canonicalize_name(name))
    module = dist.lower()
    parts = [dist, version] + ([build] if build else []) + [tags]
    path = Path(directory) / ("-".join(parts) + ".whl")
    dist_info = f"{dist}-{version}.dist-info"
    meta = metadata if metadata is not None else metadata_text(name, version, requires, extras, requires_python)
    py, abi, plat = tags.split("-")
    wheel_lines = ["Wheel-Version: 1.0", "Generator: pinwheel-tests", f"Root-Is-Purelib: {'true' if abi == 'none' else 'false'}"]
    for p in py.split("."):
        for a in abi.split("."):
            for pl in plat.split("."):
                wheel_lines.append(f"Tag: {p}-{a}-{pl}")
    if build:
        wheel_lines.append(f"Build: {build}")
    members: list[tuple[str, bytes]] = [
        (f"{module}/__init__.py", (module_source or f'__version__ = "{version}"\n').encode()),
    ]
    if ext_module:
        suffix = ".abi3.so" if abi == "abi3" else f".{abi}-x86_64-linux-gnu.so" if abi.startswith("cp") else ".so"
        members.append((f"{module}/_C{suffix}", b"\x7fELF placeholder, not a real extension\n"))
    if payload_size:
        members.append((f"{module}/payload.bin", os.urandom(payload_size)))
    members.extend((files or {}).items())
    members.append((f"{dist_info}/METADATA", meta.encode()))
    members.append((f"{dist_info}/WHEEL", ("\n".join(wheel_lines) + "\n").encode()))
    record = [f"{n},{_record_hash(d)},{len(d)}" for n, d in members] + [f"{dist_info}/RECORD,,"]
    members.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    if dist_info_first:
        members.sort(key=lambda m: not m[0].startswith(dist_info))
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members:
            compress = zipfile.ZIP_STORED if member.endswith("payload.bin") else zipfile.ZIP_DEFLATED
            zf.writestr(zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0)), data, compress_type=compress)
    return path


_UV_WHEELS: dict[str, Path] = {}  # this process's uv wheel, built once (it holds a 40 MB binary)
_UV_SHA256: dict[str, str] = {}


def uv_wheel(directory: Path) -> Path:
    """A wheel of the uv pinwheel runs (its real binary, under .data/scripts as uv's own wheels have it),
    so that a test index can serve what an image's installer stage installs. Built once per process."""
    import platform
    import shutil
    import tempfile
    from importlib.metadata import version

    from uv import find_uv_bin

    ver = version("uv")
    key = f"{ver}-{platform.machine()}"
    if key not in _UV_WHEELS or not _UV_WHEELS[key].exists():
        binary = Path(find_uv_bin()).read_bytes()
        out = Path(tempfile.mkdtemp(prefix="pinwheel-test-uv-"))
        path = out / f"uv-{ver}-py3-none-manylinux_2_17_{platform.machine()}.whl"
        info = f"uv-{ver}.dist-info"
        members = [
            (f"uv-{ver}.data/scripts/uv", binary, 0o755),
            (f"{info}/METADATA", f"Metadata-Version: 2.1\nName: uv\nVersion: {ver}\n".encode(), 0o644),
            (f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: pinwheel-tests\nRoot-Is-Purelib: false\n"
                               f"Tag: py3-none-manylinux_2_17_{platform.machine()}\n").encode(), 0o644),
        ]
        record = [f"{n},{_record_hash(d)},{len(d)}" for n, d, _ in members] + [f"{info}/RECORD,,"]
        members.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
        with zipfile.ZipFile(path, "w") as zf:
            for name, data, mode in members:
                zi = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                zi.external_attr = (0o100000 | mode) << 16
                zf.writestr(zi, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
        _UV_WHEELS[key] = path
    target = Path(directory) / _UV_WHEELS[key].name
    if not target.exists():
        try:
            os.link(_UV_WHEELS[key], target)
        except OSError:
            shutil.copyfile(_UV_WHEELS[key], target)
    return target


class QuietServer(ThreadingHTTPServer):
    """A client that hangs up (a closed keep-alive connection, a thread pool at exit) is no error of the
    index's: socketserver would print its traceback to stderr, into the output a test reads."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            super().handle_error(request, client_address)


@dataclass
class _Entry:
    project: str
    filename: str
    sha256: str
    size: int
    requires_python: str | None
    metadata_sha256: str | None  # None: no .metadata file
    advertise_metadata: bool
    yanked: bool | str
    listed_sha256: str | None  # what the page claims (may be wrong on purpose)


@dataclass
class Request:
    method: str
    path: str
    accept: str | None
    range: str | None
    status: int
    body_bytes: int


class LocalIndex:
    """Builds wheels and a PEP 503/691 index under ``root``; serves it over HTTP."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.files_dir = self.root / "files"
        self.simple_dir = self.root / "simple"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self.simple_dir.mkdir(parents=True, exist_ok=True)
        self._entries: dict[str, list[_Entry]] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # server behaviour, changeable while serving
        self.formats: tuple[str, ...] = ("json", "html")
        self.ignore_range = False
        self.page_max_age: int | None = None  # pages say Cache-Control: max-age=N, as a real index's do
        self._fail: list[list] = []  # [count, status, path substring or None]
        self.requests: list[Request] = []
        self._write_root()
        self.add_uv()  # every lock of a manifest with `installer: uv` (the default) pins it

    def add_uv(self) -> Path:
        """Publish the uv pinwheel runs (uv_wheel): what a lock pins as the image's installer."""
        path = uv_wheel(self.files_dir)
        if path.name not in _UV_SHA256:
            _UV_SHA256[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        self._publish(_Entry(project="uv", filename=path.name, sha256=_UV_SHA256[path.name],
                             size=path.stat().st_size, requires_python=None, metadata_sha256=None,
                             advertise_metadata=False, yanked=False, listed_sha256=None))
        return path

    # -- content -----------------------------------------------------------

    def add(
        self,
        name: str,
        version: str,
        requires: Sequence[str] = (),
        extras: Mapping[str, Sequence[str]] | None = None,
        *,
        metadata_file: bool = True,
        advertise_metadata: bool | None = None,
        tags: str = "py3-none-any",
        requires_python: str | None = None,
        build: str | None = None,
        ext_module: bool = False,
        payload_size: int = 0,
        yanked: bool | str = False,
        listed_sha256: str | None = None,
        metadata: str | None = None,
        dist_info_first: bool = False,
        module_source: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> Path:
        """Build a wheel, publish it on the index, return the wheel's path.

        ``metadata_file`` writes ``<wheel>.metadata`` (PEP 658); the page
        advertises it unless ``advertise_metadata`` says otherwise (set it True
        with ``metadata_file=False`` for an advertised file that answers 404).
        ``listed_sha256`` makes the page claim a different hash than the file has.
        """
        path = build_wheel(
            self.files_dir,
            name,
            version,
            requires=requires,
            extras=extras,
            tags=tags,
            requires_python=requires_python,
            build=build,
            ext_module=ext_module,
            payload_size=payload_size,
            metadata=metadata,
            dist_info_first=dist_info_first,
            module_source=module_source,
            files=files,
        )
        data = path.read_bytes()
        meta_sha = None
        with zipfile.ZipFile(path) as zf:
            meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            meta_bytes = zf.read(meta_name)
        meta_path = path.with_name(path.name + ".metadata")
        if metadata_file:
            meta_path.write_bytes(meta_bytes)
            meta_sha = hashlib.sha256(meta_bytes).hexdigest()
        elif meta_path.exists():
            meta_path.unlink()
        self._publish(
            _Entry(
                project=canonicalize_name(name),
                filename=path.name,
                sha256=hashlib.sha256(data).hexdigest(),
                size=len(data),
                requires_python=requires_python,
                metadata_sha256=meta_sha,
                advertise_metadata=metadata_file if advertise_metadata is None else advertise_metadata,
                yanked=yanked,
                listed_sha256=listed_sha256,
            )
        )
        return path

    def add_sdist(self, name: str, version: str, files: Mapping[str, bytes] | None = None) -> Path:
        """Publish an sdist: a minimal PKG-INFO, or ``files`` (path inside its top directory -> bytes)."""
        dist = re.sub(r"[-_.]+", "_", canonicalize_name(name))
        path = self.files_dir / f"{dist}-{version}.tar.gz"
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for member, data in (files or {"PKG-INFO": metadata_text(name, version).encode()}).items():
                info = tarfile.TarInfo(f"{dist}-{version}/{member}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        path.write_bytes(buf.getvalue())
        self._publish(
            _Entry(
                project=canonicalize_name(name),
                filename=path.name,
                sha256=hashlib.sha256(buf.getvalue()).hexdigest(),
                size=len(buf.getvalue()),
                requires_python=None,
                metadata_sha256=None,
                advertise_metadata=False,
                yanked=False,
                listed_sha256=None,
            )
        )
        return path

    def _publish(self, entry: _Entry) -> None:
        with self._lock:
            entries = self._entries.setdefault(entry.project, [])
            entries[:] = [e for e in entries if e.filename != entry.filename] + [entry]
            self._write_project(entry.project)
            self._write_root()

    def _write_root(self) -> None:
        links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(self._entries))
        (self.simple_dir / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"
        )

    def _write_project(self, project: str) -> None:
        pdir = self.simple_dir / project
        pdir.mkdir(parents=True, exist_ok=True)
        anchors = []
        files = []
        for e in self._entries[project]:
            sha = e.listed_sha256 or e.sha256
            href = f"../../files/{e.filename}#sha256={sha}"  # relative on purpose
            attrs = [f'href="{html.escape(href)}"']
            if e.requires_python:
                attrs.append(f'data-requires-python="{html.escape(e.requires_python)}"')
            if e.advertise_metadata:
                value = f"sha256={e.metadata_sha256}" if e.metadata_sha256 else "true"
                attrs.append(f'data-core-metadata="{value}"')
                attrs.append(f'data-dist-info-metadata="{value}"')
            if e.yanked:
                attrs.append(f'data-yanked="{html.escape(e.yanked) if isinstance(e.yanked, str) else ""}"')
            anchors.append(f"<a {' '.join(attrs)}>{html.escape(e.filename)}</a><br/>")
            item: dict = {
                "filename": e.filename,
                "url": f"../../files/{e.filename}",
                "hashes": {"sha256": sha},
                "requires-python": e.requires_python,
                "size": e.size,
                "yanked": e.yanked,
            }
            if e.advertise_metadata:
                core = {"sha256": e.metadata_sha256} if e.metadata_sha256 else True
                item["core-metadata"] = core
                item["dist-info-metadata"] = core
            files.append(item)
        (pdir / "index.html").write_text(
            "<!DOCTYPE html>\n<html><head><title>Links for {0}</title></head><body>\n<h1>Links for {0}</h1>\n{1}\n"
            "</body></html>\n".format(project, "\n".join(anchors))
        )
        (pdir / "index.json").write_text(
            json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}, indent=1)
        )

    # -- behaviour ---------------------------------------------------------

    def fail_next(self, count: int, status: int = 500, path_contains: str | None = None) -> None:
        """Answer the next ``count`` matching requests with ``status``."""
        with self._lock:
            self._fail.append([count, status, path_contains])

    def _take_failure(self, path: str) -> int | None:
        with self._lock:
            for rule in self._fail:
                count, status, needle = rule
                if count > 0 and (needle is None or needle in path):
                    rule[0] = count - 1
                    return status
        return None

    def requests_for(self, needle: str) -> list[Request]:
        return [r for r in self.requests if needle in r.path]

    # -- serving -----------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("LocalIndex is not serving; call serve()")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/simple/"

    def serve(self) -> str:
        """Start serving (idempotent); returns the index URL."""
        if self._server is None:
            index = self

            class Handler(_IndexHandler):
                local_index = index

            self._server = QuietServer(("127.0.0.1", 0), Handler)
            self._server.daemon_threads = True
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="local-index", daemon=True
            )
            self._thread.start()
        return self.url

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LocalIndex:
        self.serve()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _IndexHandler(BaseHTTPRequestHandler):
    local_index: LocalIndex
    protocol_version = "HTTP/1.1"
    # headers and body go out in two sends; with Nagle's algorithm the body waits for the client's delayed ACK
    # (40 ms a request), which a real index does not make its clients wait
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep test output quiet
        pass

    def _log(self, status: int, nbytes: int) -> None:
        self.local_index.requests.append(
            Request(
                self.command,
                urlsplit(self.path).path,
                self.headers.get("Accept"),
                self.headers.get("Range"),
                status,
                nbytes,
            )
        )

    def _send(self, status: int, body: bytes, ctype: str = "text/plain", headers: Iterable[tuple[str, str]] = ()) -> None:
        # log before anything goes out: a client that gives up on the status line alone (a 502 it retries)
        # must find the entry, however slowly this thread runs on a loaded machine
        self._log(status, len(body) if self.command != "HEAD" else 0)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        index = self.local_index
        path = unquote(urlsplit(self.path).path)
        failure = index._take_failure(path)
        if failure is not None:
            self._send(failure, b"injected failure\n")
            return
        if path.startswith("/simple/"):
            self._page(path)
        elif path.startswith("/files/"):
            self._file(path)
        else:
            self._send(404, b"not found\n")

    def _page(self, path: str) -> None:
        index = self.local_index
        rel = path[len("/simple/") :].strip("/")
        pdir = index.simple_dir / rel if rel else index.simple_dir
        if rel and (not pdir.is_dir() or "/" in rel or rel.startswith(".")):
            self._send(404, b"no such project\n")
            return
        accept = self.headers.get("Accept", "")
        want_json = JSON_TYPE in accept and "json" in index.formats and rel
        if not want_json and "html" not in index.formats:
            self._send(406, b"only JSON is served\n")
            return
        if want_json:
            body = (pdir / "index.json").read_bytes()
            ctype = JSON_TYPE
        else:
            body = (pdir / "index.html").read_bytes()
            ctype = "text/html"
        mtime = formatdate((pdir / "index.html").stat().st_mtime, usegmt=True)
        etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'  # of the bytes served, as a real index's
        if self.headers.get("If-None-Match") == etag:
            self._send(304, b"", ctype, [("ETag", etag), ("Last-Modified", mtime)])
            return
        headers = [("ETag", etag), ("Last-Modified", mtime)]
        if index.page_max_age is not None:
            headers.append(("Cache-Control", f"max-age={index.page_max_age}, public"))
        self._send(200, body, ctype, headers)

    def _file(self, path: str) -> None:
        index = self.local_index
        name = path[len("/files/") :]
        target = index.files_dir / name
        if "/" in name or name.startswith(".") or not target.is_file():
            self._send(404, b"no such file\n")
            return
        data = target.read_bytes()
        ctype = "application/octet-stream" if not name.endswith(".metadata") else "text/plain"
        rng = self.headers.get("Range")
        if rng and not index.ignore_range:
            span = _parse_range(rng, len(data))
            if span is None:
                self._send(416, b"", headers=[("Content-Range", f"bytes */{len(data)}")])
                return
            start, end = span
            self._send(
                206,
                data[start : end + 1],
                ctype,
                [("Content-Range", f"bytes {start}-{end}/{len(data)}"), ("Accept-Ranges", "bytes")],
            )
            return
        headers = [] if index.ignore_range else [("Accept-Ranges", "bytes")]
        self._send(200, data, ctype, headers)


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """A single ``bytes=`` range -> (start, end inclusive), or None if unsatisfiable."""
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if not m or (not m.group(1) and not m.group(2)) or size == 0:
        return None
    first, last = m.group(1), m.group(2)
    if not first:  # suffix
        n = int(last)
        if n == 0:
            return None
        return max(0, size - n), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)
