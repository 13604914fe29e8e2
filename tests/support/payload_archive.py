"""The smoke payload as the build ships it: the zipapp pinwheel.image.payload builds from this checkout's
pinwheel.smoke, built once per test process. The smoke tests run this archive, as an image does, and
import the payload's functions from it (load), never from the source tree."""
from __future__ import annotations

import atexit
import importlib
import importlib.util
import shutil
import sys
import tempfile
import zipimport
from pathlib import Path

from pinwheel.image import payload
from pinwheel.workspace import InContext

_DIR = Path(tempfile.mkdtemp(prefix="pinwheel-payload-"))
atexit.register(shutil.rmtree, _DIR, True)
PAYLOAD = _DIR / InContext.SMOKE_PAYLOAD
PAYLOAD.write_bytes(payload.build())


def load(module: str = ""):
    """A module of the payload (`checks.dsa_forward`, or the package itself), imported from the archive."""
    if payload.ARCHIVE_PACKAGE not in sys.modules:
        spec = zipimport.zipimporter(str(PAYLOAD)).find_spec(payload.ARCHIVE_PACKAGE)
        package = importlib.util.module_from_spec(spec)
        sys.modules[payload.ARCHIVE_PACKAGE] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"{payload.ARCHIVE_PACKAGE}.{module}" if module else payload.ARCHIVE_PACKAGE)
