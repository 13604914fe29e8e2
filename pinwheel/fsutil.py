"""File writes that never leave a half-written file behind, bounded reads of the files pinwheel reads back,
and file hashes."""
from __future__ import annotations

import contextlib
import hashlib
import os
import stat
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


class UnreadableFile(ValueError):
    """A file pinwheel reads back (a lock file, a smoke record) that is not a regular file of bounded size.

    str() is one line that names the path; the CLI prints it and exits 2."""

    def __init__(self, path: Path | str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = Path(path)
        self.message = message


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


def _size(n: int) -> str:
    return f"{n // (1 << 20)} MiB" if n % (1 << 20) == 0 else f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def read_regular(path: Path | str, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, else UnreadableFile naming the path.

    A FIFO would block and a device such as /dev/zero never ends (a symlink to one looks like a file by
    name), so the file is checked before opening and again on the open descriptor, opened without
    blocking, and never more than limit + 1 bytes are read."""
    def check(st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, f"is a {_kind(st.st_mode)}, not a regular file; a {what} is read from files only")
        if st.st_size > limit:
            raise UnreadableFile(path, f"{st.st_size} bytes; a {what} may be at most {_size(limit)}")

    try:
        check(os.stat(path))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnreadableFile(path, f"cannot be read: {exc.strerror or exc}") from None
    try:
        check(os.fstat(fd))  # the file opened is the file checked
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UnreadableFile(path, f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > limit:
        raise UnreadableFile(path, f"more than {_size(limit)}; a {what} may be at most that")
    return b"".join(chunks)


def read_regular_text(path: Path | str, limit: int, what: str = "file") -> str:
    """read_regular as UTF-8 text; bytes that are not UTF-8 are an UnreadableFile too."""
    data = read_regular(path, limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(path, f"is not UTF-8 text (byte {exc.start})") from None


def find_uv() -> str | None:
    """The uv binary pinwheel runs: the uv package's, else one on PATH; None where there is none."""
    try:
        # the uv package is optional (a uv on PATH serves as well): imported only where uv runs
        from uv import find_uv_bin  # type: ignore[import-not-found]

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    import shutil

    return shutil.which("uv")
