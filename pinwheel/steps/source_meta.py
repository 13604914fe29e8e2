"""A source package's requirements read on the host, before the build: from PKG-INFO or pyproject.toml.

Source builds (git steps, sdist steps) are installed --no-deps, so the resolver
judges their Requires-Dist like any other package's, when the host can read
them without building: a PKG-INFO of Metadata-Version 2.2 or later that does
not list Requires-Dist as Dynamic, or a pyproject.toml whose [project] table
declares its dependencies (not in `dynamic`). Anything else (setup.py, a
dynamic field, an older PKG-INFO) is not guessed: the reason comes back, the
edges are unchecked, and the built wheel's own metadata is judged by the
build's invariant (`pip check`).
"""
from __future__ import annotations

import io
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..index.metadata import DistMetadata

if TYPE_CHECKING:
    import tarfile
# email, tarfile, tomllib and tempfile are imported where a source's metadata is read: a manifest that only
# names these steps, or a report from the lock, reads none.

# What reading may take; a source this large is not read on the host.
MAX_MEMBER = 1 << 20
GIT_TIMEOUT = 120


class Unreadable(Exception):
    """Why a source's requirements cannot be read without building it."""


def _metadata(name: str, version: str, requires: list[str], extras: list[str], python: str | None,
              how: str) -> DistMetadata:
    try:
        reqs = tuple(Requirement(r) for r in requires)
        spec = SpecifierSet(python) if python else None
        return DistMetadata(canonicalize_name(name), Version(version), reqs, spec,
                            tuple(canonicalize_name(e) for e in extras), source=how)
    except (InvalidRequirement, InvalidSpecifier, InvalidVersion) as exc:
        raise Unreadable(f"its {how} does not parse: {exc}") from None


def from_pkg_info(text: str, name: str, version: str) -> DistMetadata:
    """Static requirements of a PKG-INFO (Metadata-Version >= 2.2, Requires-Dist not Dynamic)."""
    import email.parser

    msg = email.parser.Parser().parsestr(text, headersonly=True)
    try:
        meta_version = Version(msg.get("Metadata-Version", "0"))
    except InvalidVersion:
        meta_version = Version("0")
    if meta_version < Version("2.2"):
        raise Unreadable(f"its PKG-INFO is Metadata-Version {msg.get('Metadata-Version', 'unknown')}, which cannot "
                         "say whether its requirements are static (2.2 or later can)")
    dynamic = {d.strip().lower() for d in msg.get_all("Dynamic") or ()}
    if dynamic & {"requires-dist", "provides-extra", "requires-python"}:
        raise Unreadable("its PKG-INFO marks its requirements Dynamic: only the build knows them")
    return _metadata(name, version, msg.get_all("Requires-Dist") or [], msg.get_all("Provides-Extra") or [],
                     msg.get("Requires-Python"), "PKG-INFO")


def _with_extra(requirement: str, extra: str) -> str:
    """An optional dependency as the Requires-Dist line a wheel would carry for it."""
    try:
        req = Requirement(requirement)
    except InvalidRequirement as exc:
        raise Unreadable(f"its pyproject.toml does not parse: {exc}") from None
    marker = f"({req.marker}) and extra == {extra!r}" if req.marker else f"extra == {extra!r}"
    req.marker = None
    return f"{req} ; {marker}"


def from_pyproject(text: str, name: str, version: str) -> DistMetadata:
    """Static requirements of a pyproject.toml's [project] table."""
    import tomllib

    try:
        project = tomllib.loads(text).get("project")
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(f"its pyproject.toml does not parse: {exc}") from None
    if not isinstance(project, dict):
        raise Unreadable("its pyproject.toml has no [project] table: its requirements come from running its build")
    dynamic = set(project.get("dynamic") or ())
    if dynamic & {"dependencies", "optional-dependencies", "requires-python"}:
        raise Unreadable("its pyproject.toml lists its requirements in `dynamic`: only the build knows them")
    requires = list(project.get("dependencies") or [])
    extras = []
    for extra, reqs in sorted((project.get("optional-dependencies") or {}).items()):
        extras.append(extra)
        requires += [_with_extra(r, extra) for r in reqs]
    return _metadata(name, version, requires, extras, project.get("requires-python"), "pyproject.toml")


def _member(tf: tarfile.TarFile, path: str) -> str | None:
    try:
        info = tf.getmember(path)
    except KeyError:
        return None
    if not info.isfile() or info.size > MAX_MEMBER:
        return None
    fh = tf.extractfile(info)
    return fh.read().decode("utf-8", "replace") if fh else None


def sdist_metadata(data: bytes, name: str, version: str) -> DistMetadata:
    """An sdist's static requirements: its PKG-INFO, else its pyproject.toml."""
    import tarfile

    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
            tops = {m.split("/", 1)[0] for m in tf.getnames()}
            if len(tops) != 1:
                raise Unreadable("the sdist is not one top-level directory")
            top = tops.pop()
            pkg_info, pyproject = _member(tf, f"{top}/PKG-INFO"), _member(tf, f"{top}/pyproject.toml")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise Unreadable(f"the sdist cannot be opened: {exc}") from None
    return _from_files(pkg_info, pyproject, name, version)


def _from_files(pkg_info: str | None, pyproject: str | None, name: str, version: str) -> DistMetadata:
    problems = []
    for text, read in ((pkg_info, from_pkg_info), (pyproject, from_pyproject)):
        if text is None:
            continue
        try:
            return read(text, name, version)
        except Unreadable as exc:
            problems.append(str(exc))
    if not problems:
        raise Unreadable("it has neither PKG-INFO nor pyproject.toml: its requirements come from running setup.py")
    raise Unreadable("; ".join(problems))


def git_metadata(url: str, rev: str, subdirectory: str | None, name: str, version: str) -> DistMetadata:
    """The static requirements of a commit's project: exactly that commit is fetched (depth 1) into a
    scratch repository, and its PKG-INFO or pyproject.toml read from the commit's tree."""
    import tempfile

    where = f"{subdirectory}/" if subdirectory else ""
    with tempfile.TemporaryDirectory(prefix="pinwheel-git-") as tmp:
        def git(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(["git", "-C", tmp, *args], capture_output=True, timeout=GIT_TIMEOUT,
                                  env={"PATH": "/usr/bin:/bin", "HOME": tmp, "GIT_TERMINAL_PROMPT": "0"})
        try:
            git("init", "-q")
            fetched = git("fetch", "-q", "--depth", "1", url, rev)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unreadable(f"cannot fetch commit {rev} from {url} on the host: {exc}") from None
        if fetched.returncode != 0:
            raise Unreadable(f"cannot fetch commit {rev} from {url} on the host: "
                             f"{fetched.stderr.decode(errors='replace').strip()[-300:]}")
        files = {}
        for member in ("PKG-INFO", "pyproject.toml"):
            shown = git("show", f"{rev}:{where}{member}")
            files[member] = (shown.stdout.decode("utf-8", "replace")
                             if shown.returncode == 0 and len(shown.stdout) <= MAX_MEMBER else None)
    return _from_files(files["PKG-INFO"], files["pyproject.toml"], name, version)


def read_or_reason(read) -> tuple[DistMetadata | None, str]:
    """(metadata, "") or (None, why it was not read)."""
    try:
        return read(), ""
    except Unreadable as exc:
        return None, str(exc)


def temporary_download(client, f) -> bytes:
    """The bytes of one index file, downloaded and sha256-checked by the client into a scratch file."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pinwheel-sdist-") as tmp:
        path = Path(tmp) / f.filename
        client.download(f, path)
        return path.read_bytes()
