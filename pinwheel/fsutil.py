"""File writes that never leave a half-written file behind, and file hashes."""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator


_files_written = 0  # files this process put in place through atomic_open, see files_written()


def files_written() -> int:
    """How many files this process has put in place through atomic_open: a digest of a directory tree taken
    when this was N is still current for this process's own writes while it is N."""
    return _files_written


@contextlib.contextmanager
def atomic_open(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write that appears at `path` whole when the block ends, and not at all on an error."""
    global _files_written
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, path)
        _files_written += 1
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory and a rename."""
    with atomic_open(path) as fh:
        fh.write(data)


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
