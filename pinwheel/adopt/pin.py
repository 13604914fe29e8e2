"""`import --pin`: fill in the TODOs the network can answer; whatever cannot be reached stays a TODO.

- an unpinned or range index requirement gets the newest version its specifier
  allows on the index today (no pre-releases unless the specifier names one),
  noted in its why as pinned by import on that date;
- a git branch, tag or HEAD becomes the commit `git ls-remote` names for it
  (an annotated tag's peeled commit);
- an asset's sha256 is read by downloading it into the asset cache.
"""
from __future__ import annotations

import datetime
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from . import Adopted
from .runs import Todo

GIT_TIMEOUT_S = 30
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class Pinned:
    done: list[str] = field(default_factory=list)  # "steps[3].rev: 0123… (branch main)"
    left: list[str] = field(default_factory=list)  # "steps[4].url.sha256: cannot download …"


def pin(adopted: Adopted, versions: Callable[[str], list] | None, asset_cache: Path | None,
        today: datetime.date | None = None, only: tuple[str, ...] = ("index", "git", "asset"),
        installed: Mapping[str, str] | None = None) -> Pinned:
    """Fill in each TODO that says how (`Todo.pin`), of the kinds in `only`; versions(name) lists the index's
    versions of a project. ``installed`` (name -> version, the base's): a requirement that one satisfies is
    pinned to it, since pip keeps what is installed (a replay's answer, not import's)."""
    today = today or datetime.date.today()
    result = Pinned()
    keep: list[Todo] = []
    for todo in adopted.todos:
        how = todo.pin[0] if todo.pin and todo.pin[0] in only else None
        try:
            if how == "index" and versions is not None:
                done = _index(todo, versions, today, installed or {})
            elif how == "git":
                done = _git(todo)
            elif how == "asset" and asset_cache is not None:
                done = _asset(todo, asset_cache)
            else:
                keep.append(todo)
                continue
        except _Unreachable as exc:
            result.left.append(f"{todo.step['name']}.{todo.key}: {exc}")
            keep.append(todo)
            continue
        result.done.append(f"{todo.step['name']}.{todo.key}: {done}")
    adopted.todos = keep
    adopted.refresh_todo()
    return result


class _Unreachable(Exception):
    pass


def _index(todo: Todo, versions: Callable[[str], list], today: datetime.date, installed: Mapping[str, str]) -> str:
    original = todo.pin[1]
    req = Requirement(original)
    kept = installed.get(canonicalize_name(req.name))
    if kept is not None and req.specifier.contains(kept, prereleases=True):
        _write_pin(todo, req, kept, f"pip keeps the installed {kept}", original)
        return f"{kept} (installed, and {original!r} accepts it: pip keeps it)"
    try:
        found = versions(req.name)
    except Exception as exc:  # an index client error of any kind: this TODO stays
        raise _Unreachable(f"the index did not answer for {req.name}: {str(exc).splitlines()[0][:160]}") from None
    allowed = sorted(req.specifier.filter(found))
    if not allowed:
        raise _Unreachable(f"no version of {req.name} on the index matches {original!r}")
    version = allowed[-1]
    _write_pin(todo, req, version, f"pinned by import on {today.isoformat()}", original)
    return f"{version} (newest of {original!r} on {today.isoformat()})"


def _write_pin(todo: Todo, req: Requirement, version: str, how: str, original: str) -> None:
    package = todo.step["packages"][int(re.search(r"\[(\d+)\]", todo.key).group(1))]
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    package["requirement"] = f"{canonicalize_name(req.name)}{extras}=={version}"
    package["why"] = f"TODO: why ({how}: the Dockerfile said {original!r})"


def _git(todo: Todo) -> str:
    url, ref = todo.pin[1], todo.pin[2]
    if not url.startswith(("https://", "http://", "git://", "ssh://")):
        raise _Unreachable(f"{url} is not a URL git ls-remote is given")
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        proc = subprocess.run(["git", "ls-remote", url, ref, f"{ref}^{{}}"], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _Unreachable(f"git ls-remote {url} {ref}: {exc}") from None
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise _Unreachable(f"git ls-remote {url} {ref}: {said}")
    refs = {}
    for line in proc.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if _SHA.match(sha):
            refs[name] = sha
    wanted = [f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref]
    sha = next((refs[w] for w in wanted if w in refs), None)
    if sha is None:
        raise _Unreachable(f"git ls-remote {url} names no {ref}")
    todo.step["rev"] = sha
    return f"{sha} ({ref} on {url})"


def _asset(todo: Todo, cache: Path) -> str:
    from ..steps.downloads import DownloadError as AssetError, download  # the asset cache's verified download, only when pinning

    url = todo.pin[1]
    try:
        sha256, _ = download(url, cache)
    except AssetError as exc:
        raise _Unreachable(str(exc)) from None
    _set(todo.step, todo.key, sha256)
    return f"sha256 {sha256} of {url}"


def _set(step: dict, key: str, value: str) -> None:
    """Set the value at a TODO's key in its step ("url.sha256", "downloads[0].sha256")."""
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", key)]
    node = step
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
