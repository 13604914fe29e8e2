"""A plain HTTP file server on loopback: where asset, run-step, .deb and key downloads come from in the tests.

The host downloads these (pinwheel checks each digest before the engine starts), so loopback is enough.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def serve_files(root: Path) -> Iterator[str]:
    """Serve the files under `root` on 127.0.0.1 while the block runs; yields the base URL (no trailing slash)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
