"""A hostile package index on 127.0.0.1 for tests: it drips, floods and lies. And a way to run the CLI against it
within a memory bound and a time bound.

    with HostileIndex() as ix:
        ix.route("/simple/app/", Drip(page, every=1.0))
        url = ix.url                      # http://127.0.0.1:<port>/simple/
        proc = run_bounded(["--manifest", str(path), "report", "--json", "--index-url", url])

Every answer is bounded: a drip sends at most its body, a flood at most its
count of units, each loop also ends when the client goes away or the server
closes, and the server closes by itself after ``lifetime`` seconds.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
HTML = "text/html"
JSON = "application/vnd.pypi.simple.v1+json"


@dataclass
class Static:
    """A body sent at once; with ``ranges``, single Range requests are honoured (for a wheel read by range)."""

    body: bytes
    content_type: str = "application/octet-stream"
    ranges: bool = False

    def chunks(self, stop: threading.Event) -> Iterator[bytes]:
        yield self.body

    def length(self) -> int | None:
        return len(self.body)


@dataclass
class Drip:
    """A body sent ``size`` bytes every ``every`` seconds, its Content-Length announced up front."""

    body: bytes
    every: float = 1.0
    size: int = 1
    content_type: str = HTML
    ranges: bool = False

    def chunks(self, stop: threading.Event) -> Iterator[bytes]:
        for i in range(0, len(self.body), self.size):
            if stop.wait(self.every):
                return
            yield self.body[i:i + self.size]

    def length(self) -> int | None:
        return len(self.body)


@dataclass
class Flood:
    """head + unit.format(i=i) for i < count + tail, generated as it is sent (never held whole); chunked
    (no Content-Length) unless ``announce``."""

    head: bytes
    unit: str
    count: int
    tail: bytes = b""
    content_type: str = HTML
    announce: bool = False
    ranges: bool = False
    batch: int = 2000

    def chunks(self, stop: threading.Event) -> Iterator[bytes]:
        yield self.head
        for start in range(0, self.count, self.batch):
            if stop.is_set():
                return
            yield "".join(self.unit.format(i=i) for i in range(start, min(start + self.batch, self.count))).encode()
        yield self.tail

    def length(self) -> int | None:
        if not self.announce:
            return None
        return len(self.head) + len(self.tail) + sum(len(self.unit.format(i=i).encode()) for i in range(self.count))


@dataclass
class DripHeaders:
    """A status line, then one header dripped a byte every ``every`` seconds, ``count`` bytes at most."""

    every: float = 1.0
    count: int = 600


@dataclass
class HostileIndex:
    lifetime: float = 300.0
    routes: dict = field(default_factory=dict)
    requests: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        index = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                index.requests.append((path, self.headers.get("Range")))
                answer = index.routes.get(path)
                if answer is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    index._send(self, answer)
                except (BrokenPipeError, ConnectionResetError, TimeoutError):
                    pass  # the client gave up: what a hostile server is for

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return self.base + "/simple/"

    def route(self, path: str, answer) -> None:
        self.routes[path] = answer

    def _send(self, handler: BaseHTTPRequestHandler, answer) -> None:
        if isinstance(answer, DripHeaders):
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(answer.count):
                if self._stop.wait(answer.every):
                    return
                handler.wfile.write(b"x")
                handler.wfile.flush()
            return
        wanted = handler.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", wanted or "") if answer.ranges and isinstance(answer, Static) else None
        if m:
            size = len(answer.body)
            start, end = m.groups()
            first, last = (size - int(end), size - 1) if not start else (int(start), int(end) if end else size - 1)
            first, last = max(first, 0), min(last, size - 1)
            body = answer.body[first:last + 1]
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            handler.send_header("Content-Type", answer.content_type)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", answer.content_type)
        length = answer.length()
        if length is None:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(length))
        handler.end_headers()
        for chunk in answer.chunks(self._stop):
            if not chunk:
                continue
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if length is None else chunk)
            handler.wfile.flush()
        if length is None:
            handler.wfile.write(b"0\r\n\r\n")

    def close(self) -> None:
        self._stop.set()
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "HostileIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def html_page(links: dict[str, str]) -> bytes:
    """A PEP 503 page: file name -> href."""
    anchors = "".join(f'<a href="{href}">{name}</a><br/>\n' for name, href in links.items())
    return f"<!DOCTYPE html><html><body>\n{anchors}</body></html>\n".encode()


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float

    def document(self) -> dict:
        """stdout as the one JSON document --json promises (json.loads refuses anything more or less)."""
        return json.loads(self.stdout)


def run_bounded(args: list[str], cwd: Path, *, memory_mib: int = 1024, timeout: float = 180,
                env: dict[str, str] | None = None) -> Run:
    """The CLI in a subprocess under `ulimit -v` (address space) that must finish within ``timeout``: a hang
    or a blow-up fails the test, while speed is left to bench/."""
    import os

    started = time.monotonic()
    proc = subprocess.run(["bash", "-c", f'ulimit -v {memory_mib * 1024}; exec "$@"', "bash",
                           sys.executable, str(ROOT / "build.py"), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})
    return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def assert_no_traceback(run: Run) -> None:
    assert "Traceback" not in run.stderr + run.stdout, run.stderr[-3000:]
    assert "MemoryError" not in run.stderr + run.stdout, run.stderr[-3000:]


def reasons(run: Run) -> str:
    """Why a report could not judge, each reason checked to be one printable line, joined with " | "."""
    doc = run.document()
    found = [doc["could_not_judge"]] if "could_not_judge" in doc else [u["reason"] for u in doc["unjudged"]]
    assert found, run.stdout[-2000:]
    for why in found:
        assert why.isprintable(), why  # one line, nothing a terminal would act on
    return " | ".join(found)

