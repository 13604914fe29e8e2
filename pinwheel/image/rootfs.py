"""Root filesystems made into images: a directory or a tarball imported into the engine (bootstrap bases,
the tests' own bases)."""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Iterable

from .engine import Engine, EngineError


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
