"""Debian packages a RUN installs, removes or holds, .debs it downloaded and apt sources it signed, as apt
entries written by the apt kind's builder (pinwheel.steps.apt)."""
from __future__ import annotations

import re
from typing import Any

from ..steps import ADOPT_APT_INSTALL, kind_adopting
from .state import TODO_DEB, WHY, ZERO_SHA256, RunResult, RunState, Todo

_DEB_FILE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]+)_(?P<version>[0-9][A-Za-z0-9.+~:-]*)_(?P<arch>[a-z0-9]+)\.deb$")
_SOURCE_LINE = re.compile(r"^deb\s+\[(?P<opts>[^\]]*)\]\s+(?P<uri>\S+)\s+(?P<suite>\S+)(?P<comps>(?:\s+[a-z0-9-]+)*)\s*$")

def apt_install(result: RunResult, state: RunState, words: list[str], gate: str | None) -> None:
    names = [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    packages: list[tuple[str, str | None]] = []
    debs: list[tuple[str, str, str]] = []
    for n in names:
        name, eq, version = n.partition("=")
        if n.endswith(".deb"):
            deb = _deb(state, n)
            if deb:
                debs.append(deb)
                continue
        if "$" in n or "/" in n or not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name):
            result.listed.append(f"`{n}`: not a Debian package name with a known value (a .deb by path, or an ARG "
                                 "the file never sets)")
            continue
        if name in result.debs or name in state.ctx.apt_of:
            continue
        result.debs.append(name)
        packages.append((name, version if eq else None))
    if packages or debs:
        _apt_entry(result, state, kind_adopting(ADOPT_APT_INSTALL).adopted(packages, debs, [], [], []), gate)


def _apt_entry(result: RunResult, state: RunState, found: Any, gate: str | None) -> dict:
    """An apt entry from the apt kind's builder, with the sources waiting for one."""
    found.sources += [source for _, source in state.ctx.sources]
    state.ctx.sources.clear()
    entry, todos = kind_adopting(ADOPT_APT_INSTALL).adopted_entry(found, WHY, gate, TODO_DEB, ZERO_SHA256)
    result.entries.append(entry)
    result.todos += [Todo(entry, key, what, pin) for key, what, pin in todos]
    for name, *_ in found.packages + found.debs:
        state.ctx.apt_of[name] = entry
    return entry


def _deb(state: RunState, path: str) -> tuple[str, str, str] | None:
    """A .deb this RUN downloaded, named name_version_arch.deb: (name, version, url)."""
    file = path.rsplit("/", 1)[-1]
    m = _DEB_FILE.match(file)
    fetch = next((f for f in state.shell.fetches if f.dest and f.dest.rsplit("/", 1)[-1] == file), None)
    if not m or fetch is None or "$" in fetch.url or not kind_adopting(ADOPT_APT_INSTALL).deb_url(fetch.url):
        return None
    fetch.used = True
    return m["name"], m["version"], fetch.url


def dpkg(result: RunResult, state: RunState, words: list[str], gate: str | None) -> bool:
    files = [w for w in words[1:] if not w.startswith("-")]
    debs = [_deb(state, f) for f in files]
    if not files or None in debs:
        return False
    _apt_entry(result, state, kind_adopting(ADOPT_APT_INSTALL).adopted([], [d for d in debs if d], [], [], []), gate)
    return True


def apt_remove(result: RunResult, state: RunState, words: list[str], gate: str | None) -> bool:
    names = [w for w in words[2:] if not w.startswith("-")]
    if not names or any("$" in n or not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", n) for n in names):
        return False  # a name the build computes: a run step runs it as written
    _apt_entry(result, state, kind_adopting(ADOPT_APT_INSTALL).adopted([], [], [], names, []), gate)
    return True


def apt_hold(state: RunState, names: list[str]) -> bool:
    """`apt-mark hold` of packages the manifest installs: the apt entry that installs them holds them."""
    names = [n for n in names if not n.startswith("-")]
    if not names or any(n not in state.ctx.apt_of for n in names):
        return False
    for n in names:
        state.ctx.apt_of[n].setdefault("hold", []).append(n)
    return True


def piped_key(state: RunState, words: list[str]) -> None:
    """`curl KEY | gpg --dearmor -o PATH` (or `| tee PATH`): the key is written to PATH."""
    fetch = state.shell.fetches[-1]
    out = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--output")), None) or \
        next((w for w in words[1:] if w.startswith("/")), None)
    if out and "$" not in fetch.url:
        state.ctx.keys[out] = fetch.url
        fetch.used = True
        state.shell.fetches.remove(fetch)


def source_line(state: RunState, words: list[str]) -> bool:
    """`echo "deb [signed-by=KEY] URI SUITE COMPONENTS" > FILE`: an apt source, its key downloaded earlier."""
    text = " ".join(w for w in words[1:] if not w.startswith(">")).split(">", 1)[0].strip()
    text = re.sub(r"\s/etc/apt/\S+$", "", text)
    m = _SOURCE_LINE.match(text)
    if not m:
        return False
    opts = dict(o.split("=", 1) for o in m["opts"].split() if "=" in o)
    key = state.ctx.keys.get(opts.get("signed-by", ""))
    uri = m["uri"].rstrip("/") + "/" if m["suite"].endswith("/") else m["uri"]
    if key is None or not kind_adopting(ADOPT_APT_INSTALL).source_url(uri) or not kind_adopting(ADOPT_APT_INSTALL).source_url(key):
        return False
    name = re.sub(r"[^a-z0-9-]+", "-", opts["signed-by"].rsplit("/", 1)[-1].split(".")[0].lower()).strip("-")[:40]
    state.ctx.sources.append((state.line, {"name": name or "extra", "uris": uri, "suites": m["suite"],
                                           "components": m["comps"].strip(), "key_url": key}))
    return True
