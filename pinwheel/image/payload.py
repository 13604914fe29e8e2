"""The smoke payload as the build ships it: the pinwheel.smoke package in one zipapp file.

The archive is deterministic: its members are the package's modules in sorted order, stored (not
compressed, so no zlib version changes a byte), each with one fixed timestamp and mode, so the same
sources give the same bytes, and the same payload digest, on every machine. Inside the archive the
package is `pinwheel_smoke` (its imports are relative), so it never stands in for an installed pinwheel
on the image's path; smoke/archive_main.py is the archive's __main__.py.
"""
from __future__ import annotations

import importlib.resources
import io
import zipapp
import zipfile

PACKAGE = "pinwheel.smoke"
ARCHIVE_PACKAGE = "pinwheel_smoke"  # the package's name inside the archive
ENTRY = "archive_main.py"  # the module that becomes the archive's __main__.py
INTERPRETER = "/usr/bin/env python3"
_DATE_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: no build time in the bytes
_MODE = 0o100644 << 16  # a regular file, rw-r--r--, as external_attr holds it


def _modules(folder, prefix: str = ""):
    """(path inside the package, bytes) of every module under `folder`, no __pycache__."""
    for item in folder.iterdir():
        if item.is_dir() and item.name != "__pycache__":
            yield from _modules(item, f"{prefix}{item.name}/")
        elif item.is_file() and item.name.endswith(".py"):
            yield f"{prefix}{item.name}", item.read_bytes()


def _member(name: str, data: bytes) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name, date_time=_DATE_TIME)
    info.external_attr = _MODE
    info.create_system = 3  # Unix, whatever machine builds it
    info.compress_type = zipfile.ZIP_STORED
    return info, data


def build() -> bytes:
    """The payload archive's bytes, from the pinwheel.smoke package this pinwheel was imported with."""
    modules = dict(_modules(importlib.resources.files(PACKAGE)))
    members = [_member("__main__.py", modules.pop(ENTRY))]
    members += [_member(f"{ARCHIVE_PACKAGE}/{path}", data) for path, data in sorted(modules.items())]
    plain = io.BytesIO()
    with zipfile.ZipFile(plain, "w") as archive:
        for info, data in members:
            archive.writestr(info, data)
    plain.seek(0)
    shipped = io.BytesIO()
    zipapp.create_archive(plain, shipped, interpreter=INTERPRETER)  # the zipapp's own #! line
    return shipped.getvalue()
