"""The core metadata of a release published only as an sdist, for the lock and the report.

pip and uv install such a release by building it, so a lock may pin it by its sdist's sha256 (uv's resolve
already read its metadata by preparing it). What the lock's slicing and the report need is the same document
a built wheel would carry:

- a PKG-INFO of Metadata-Version 2.2 or later that marks none of Requires-Dist, Provides-Extra and
  Requires-Python Dynamic is that document already (PEP 643): it is taken as it is, nothing is run;
- anything else (an older PKG-INFO, a dynamic field, no PKG-INFO) is prepared the way pip and uv prepare it:
  the PEP 517 hook `prepare_metadata_for_build_wheel` of its build backend, in an isolated environment of the
  sdist's `build-system.requires` (setuptools' legacy backend where it declares none), made by uv.

The sdist's bytes were checked against the index's sha256 before it is opened; the answer is cached under
the file's key like a wheel's METADATA, so the next run reads it without building.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.version import InvalidVersion, Version

from ..fsutil import find_uv
from .errors import MetadataUnavailable

# What the host may spend preparing one sdist's metadata (environment and hook together).
PREPARE_TIMEOUT = 600
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
LEGACY_REQUIRES = ("setuptools>=40.8.0",)
STATIC_FROM = Version("2.2")


def static_pkg_info(text: str) -> bool:
    """Is this PKG-INFO the metadata a wheel of it would carry (PEP 643: 2.2 or later, requirements not Dynamic)?"""
    import email.parser

    msg = email.parser.Parser().parsestr(text, headersonly=True)
    try:
        if Version(msg.get("Metadata-Version", "0")) < STATIC_FROM:
            return False
    except InvalidVersion:
        return False
    dynamic = {d.strip().lower() for d in msg.get_all("Dynamic") or ()}
    return not dynamic & {"requires-dist", "provides-extra", "requires-python"}


def _unpack(sdist: Path, into: Path) -> Path:
    """The sdist's top directory, unpacked (tar with the data filter, or zip); one located error otherwise."""
    name = sdist.name
    try:
        if name.endswith(".zip"):
            import zipfile

            with zipfile.ZipFile(sdist) as zf:
                zf.extractall(into)
        else:
            import tarfile

            with tarfile.open(sdist) as tf:
                tf.extractall(into, filter="data")
    except Exception as exc:  # noqa: BLE001 - an unreadable archive is a verdict on this file
        raise MetadataUnavailable(f"{name}: not a readable sdist ({exc})") from None
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise MetadataUnavailable(f"{name}: an sdist has one top directory, this one has {len(tops)}")
    return tops[0]


def _build_system(src: Path) -> tuple[str, tuple[str, ...], list[str]]:
    """(backend, requires, backend-path) of the source tree, with setuptools' legacy defaults."""
    pyproject = src / "pyproject.toml"
    if not pyproject.is_file():
        return LEGACY_BACKEND, LEGACY_REQUIRES, []
    import tomllib

    try:
        table = tomllib.loads(pyproject.read_text()).get("build-system") or {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MetadataUnavailable(f"{src.name}: its pyproject.toml does not parse ({exc})") from None
    if "build-backend" not in table:
        return LEGACY_BACKEND, tuple(table.get("requires") or LEGACY_REQUIRES), []
    return str(table["build-backend"]), tuple(table.get("requires") or ()), list(table.get("backend-path") or [])


def _run(cmd: list[str], what: str, env: dict[str, str], cwd: Path | None = None) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=PREPARE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise MetadataUnavailable(f"{what}: took longer than {PREPARE_TIMEOUT}s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-12:])
        raise MetadataUnavailable(f"{what} failed (exit {proc.returncode}):\n{tail}")


_HOOK = """\
import sys
from pyproject_hooks import BuildBackendHookCaller
src, backend, out, python = sys.argv[1:5]
paths = sys.argv[5:]
caller = BuildBackendHookCaller(src, backend, backend_path=paths or None, python_executable=python)
print(caller.prepare_metadata_for_build_wheel(out, _allow_fallback=True))
"""


def uv_bin() -> str:
    """The uv that makes the isolated environment."""
    found = find_uv()
    if not found:
        raise MetadataUnavailable("uv is not installed (pip install uv): an sdist's metadata cannot be prepared")
    return found


def prepared_metadata(sdist: Path, index_url: str, ca: str | None = None) -> bytes:
    """The METADATA of an sdist: its static PKG-INFO, else what its backend's metadata hook prepares."""
    with tempfile.TemporaryDirectory(prefix="pinwheel-sdist-") as tmp:
        work = Path(tmp)
        src = _unpack(sdist, work / "src")
        pkg_info = src / "PKG-INFO"
        if pkg_info.is_file() and static_pkg_info(pkg_info.read_text(errors="replace")):
            return pkg_info.read_bytes()
        backend, requires, backend_path = _build_system(src)
        env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") and k != "PYTHONPATH"}
        env.update({"UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never", "UV_INDEX_URL": index_url})
        if ca:
            env["SSL_CERT_FILE"] = ca
        uv = uv_bin()
        what = f"preparing the metadata of {sdist.name}"
        venv = work / "env"
        _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], what, env)
        python = str(venv / "bin" / "python")
        if requires:
            _run([uv, "pip", "install", "--quiet", "--python", python, *requires], what, env)
        out = work / "out"
        out.mkdir()
        hook = [sys.executable, "-c", _HOOK, str(src), backend, str(out), python, *backend_path]
        _run(hook, what, {**env, "PYTHONSAFEPATH": "1"}, cwd=work)
        found = sorted(out.glob("*.dist-info/METADATA"))
        if not found:
            raise MetadataUnavailable(f"{what}: its backend wrote no *.dist-info/METADATA")
        return found[0].read_bytes()
