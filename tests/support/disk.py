"""The test run's disk budget.

`make test` builds tens of GB of images on up to three engines (the main one, the second 20.10 engine, the
modern one), and Docker 20.10's `docker save` first writes the whole image under its data root's tmp/ before
streaming it, so reading a 10 GB base's inventory needs 10 GB free. On a machine with about 80 GB free, a run
that keeps everything it built runs out of space part way (the daemon's export then fails).

So, before each module that uses an engine, when the data roots' filesystem has less than the floor free,
what the tests can rebuild is reclaimed, cheapest first, until the floor holds: build caches and dangling
images on every engine, then images under the tests' own repositories, then the example images (never the
bootstrap base, which debootstrap makes). With workers (`make test` runs two), the budget runs once, before
they start: a worker reclaiming mid-run could remove the base or cache the other is building on. Each engine's
use is measured at the start and the end of the run and printed in the run's summary.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

GIB = 1 << 30
# A cold run from an empty engine took free space from 79 to 30 GB, its largest module (an example's base and
# image, a pip cache and one `docker save` of the base) about 15 GB of it: 25 GB leaves that module room, and
# leaves a warm engine's images alone.
FLOOR_BYTES = int(float(os.environ.get("PINWHEEL_TEST_DISK_FLOOR_GB", "25")) * GIB)

# The engines `make test` starts: (name, DOCKER_HOST or None for the default).
ENGINES = (
    ("main", None),
    ("second", os.environ.get("PINWHEEL_ENGINE2_HOST", "unix:///run/pinwheel-engine2.sock")),
    ("modern", os.environ.get("PINWHEEL_MODERN_ENGINE_HOST", "unix:///run/pinwheel-engine-modern.sock")),
)
TEST_REPOSITORIES = ("pinwheel-test/", "pinwheel-e2e/", "127.0.0.1:", "localhost:")
KEPT_REPOSITORIES = ("pinwheel/base",)  # the bootstrap base: debootstrap, minutes, and every engine test's FROM


@dataclass
class DiskLedger:
    """What the budget did in this run: each engine's use at the start and end, and what it reclaimed."""

    start: dict[str, str] = field(default_factory=dict)
    end: dict[str, str] = field(default_factory=dict)
    reclaims: list[str] = field(default_factory=list)
    when: str = "before each engine module"  # or, with workers, "before the run"

    def summary(self) -> list[str]:
        lines = [f"disk: {free_gib():.1f} GiB free at the end; floor {FLOOR_BYTES / GIB:.0f} GiB {self.when}"]
        for name in self.end or self.start:
            lines.append(f"disk: engine {name}: {self.start.get(name, '-')} at the start, "
                         f"{self.end.get(name, '-')} at the end")
        lines += [f"disk: reclaimed {r}" for r in self.reclaims] or ["disk: nothing reclaimed"]
        return lines


def _docker(host: str | None, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if host:
        env["DOCKER_HOST"] = host
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, env=env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(["docker", *args], 1, "", str(exc))


def answering_engines() -> list[tuple[str, str | None]]:
    if shutil.which("docker") is None:
        return []
    return [(name, host) for name, host in ENGINES
            if _docker(host, "version", "--format", "{{.Server.Version}}", timeout=20).returncode == 0]


def data_root(host: str | None) -> Path | None:
    proc = _docker(host, "info", "--format", "{{.DockerRootDir}}", timeout=20)
    root = proc.stdout.strip()
    return Path(root) if proc.returncode == 0 and root else None


@functools.lru_cache(maxsize=1)
def data_roots() -> tuple[Path, ...]:
    """Where the engines keep their data, asked once a run: six CLI calls before each of about 80 modules
    would cost minutes."""
    return tuple(r for r in (data_root(h) for _, h in answering_engines()) if r is not None and r.exists())


def free_bytes() -> int:
    return min((shutil.disk_usage(r).free for r in data_roots()), default=shutil.disk_usage(Path.cwd()).free)


def free_gib() -> float:
    return free_bytes() / GIB


def usage(host: str | None) -> str:
    """`docker system df` of one engine in a line: images, build cache (and what of each is reclaimable)."""
    proc = _docker(host, "system", "df", "--format", "{{json .}}", timeout=120)
    if proc.returncode != 0:
        return "not measured (" + (proc.stderr.strip().splitlines() or ["no answer"])[-1] + ")"
    parts = []
    for line in proc.stdout.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("Type") in ("Images", "Build Cache"):
            parts.append(f"{row['Type'].lower()} {row.get('Size', '?')} (reclaimable {row.get('Reclaimable', '?')})")
    return ", ".join(parts) or "nothing"


def _images(host: str | None) -> list[str]:
    proc = _docker(host, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", timeout=60)
    return [ref for ref in proc.stdout.split() if not ref.startswith("<none>")] if proc.returncode == 0 else []


def _remove(host: str | None, refs: list[str]) -> None:
    for start in range(0, len(refs), 50):
        _docker(host, "image", "rm", "--force", *refs[start:start + 50])


def _reclaim_steps(engines: list[tuple[str, str | None]]):
    """(what, action) pairs, cheapest to rebuild first."""
    def caches() -> None:
        for _, host in engines:
            _docker(host, "container", "prune", "--force")
            _docker(host, "builder", "prune", "--all", "--force")
            _docker(host, "image", "prune", "--force")

    def test_images() -> None:
        for _, host in engines:
            _remove(host, [r for r in _images(host) if r.startswith(TEST_REPOSITORIES)])

    def built_images() -> None:
        for _, host in engines:
            _remove(host, [r for r in _images(host) if not r.startswith(KEPT_REPOSITORIES)])
            _docker(host, "builder", "prune", "--all", "--force")

    return (("build caches and dangling images", caches),
            ("the tests' own images", test_images),
            ("built images but the bootstrap base", built_images))


def keep_floor(ledger: DiskLedger, before: str) -> None:
    """Reclaim, cheapest first, until the floor is free (or nothing more can go)."""
    if free_bytes() >= FLOOR_BYTES:
        return
    engines = answering_engines()
    for what, action in _reclaim_steps(engines):
        was = free_bytes()
        action()
        now = free_bytes()
        ledger.reclaims.append(f"{(now - was) / GIB:.1f} GiB of {what} before {before} "
                               f"({was / GIB:.1f} -> {now / GIB:.1f} GiB free)")
        if now >= FLOOR_BYTES:
            return
