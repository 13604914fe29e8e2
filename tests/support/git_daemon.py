"""Local git repositories and `git daemon` serving them: what git steps and `import --pin` fetch from.

A build step reaches the host on the Docker bridge address, not on loopback, so the real-engine tests serve
on that address (tests.support.pipeline.bridge_address); the others serve on 127.0.0.1.
"""
from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

IDENTITY = {"GIT_AUTHOR_NAME": "pinwheel", "GIT_AUTHOR_EMAIL": "pinwheel@invalid",
            "GIT_COMMITTER_NAME": "pinwheel", "GIT_COMMITTER_EMAIL": "pinwheel@invalid"}


def git(repo: Path, *args: str) -> str:
    """git in `repo` with a fixed identity and none of the user's configuration; its stdout, stripped."""
    env = {**IDENTITY, "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env,
                          timeout=60).stdout.strip()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (a git URL on it is one no server answers)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _wait_listening(host: str, port: int, daemon: subprocess.Popen) -> str | None:
    """None once the daemon accepts connections (bounded: it listens within a second or two), else why not."""
    for _ in range(100):
        if daemon.poll() is not None:
            return f"git daemon exited with status {daemon.returncode}"
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return None
        except OSError:
            time.sleep(0.05)
    return "git daemon did not listen within 5 s"


@contextlib.contextmanager
def serve_git(root: Path, host: str = "127.0.0.1", *,
              unavailable: Callable[[str], object] = pytest.fail) -> Iterator[str]:
    """Serve every repository under `root` with `git daemon` on `host` while the block runs; yields the base
    URL, git://host:port (a repository root/x.git is at <base>/x.git). A daemon that never listens is handed
    to `unavailable` with the reason (the real-engine tests skip there, or fail in CI)."""
    port = free_port(host)
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--informative-errors",
                               f"--base-path={root}", f"--listen={host}", f"--port={port}", str(root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        reason = _wait_listening(host, port, daemon)
        if reason is not None:
            unavailable(f"{reason} on {host}:{port}")
        yield f"git://{host}:{port}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
