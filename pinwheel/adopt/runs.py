"""One RUN of a hand-written Dockerfile as manifest entries of today's step kinds, and what is left over.

Each simple command becomes part of an entry (apt, wheels, git, asset, remove,
a verify snippet) or a listed item with the instruction's line; housekeeping
that pinwheel's own rendering already does (apt lists, caches, /tmp) is
neither. A value import cannot know is written as a placeholder that loads,
with a TODO naming what to fill in.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import dockerfiles as df
from ..steps import ADOPT_APT_INSTALL, ADOPT_GIT_SOURCE, ADOPT_PIP_INSTALL, ADOPT_PIP_UNINSTALL, ADOPT_WHEEL_DOWNLOAD, \
    kind_adopting

ZERO_COMMIT = "0" * 40
ZERO_SHA256 = "0" * 64
TODO_VERSION = "0+todo"  # a PEP 440 version no index serves: the requirement loads and can never resolve
TODO_DEB = "0~todo"  # a Debian version below every real one
WHY = "TODO: why"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_GATE = re.compile(r"^\[\s*\$\{?(?P<arg>[A-Za-z_][A-Za-z0-9_]*)\}?\s*(?P<op>!?=)\s*(?P<value>\S+)\s*\]$")
_ARCH = re.compile(r"^\[\s*\$\(uname -m\)\s*=\s*(?P<arch>aarch64|arm64|x86_64)\s*\]$")
_GUARD = re.compile(r"\bls\s+(?P<glob>\S+\.whl)")
_HOUSEKEEPING = re.compile(r"^(cd|echo|printf|true|:|ls|set|ulimit|sleep)$")
_TMP = re.compile(r"^(/tmp/|/root/\.cache|/var/lib/apt/lists|/var/cache/apt|\$HOME/\.cache)")
_WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-"
                    r"(?P<plat>[^-]+)\.whl$")


@dataclass
class Gates:
    """The gates a file's conditions become: ARG switches on CUDA, and the architecture."""

    declared: dict[str, dict] = field(default_factory=dict)

    def of(self, cond: str, branch: bool, args: dict[str, str | None]) -> tuple[str | None, str | None]:
        """(gate name, None) for a condition a gate expresses; (None, why not) for one it cannot; the branch
        the ARG's default takes is (None, None) for a build switch that is not a target property."""
        arch = _ARCH.match(cond)
        if arch:
            arm = arch["arch"] in ("aarch64", "arm64")
            name = "ARCH_ARM64" if arm == branch else "ARCH_AMD64"
            self.declared.setdefault(name, {"when": "arch == arm64" if name == "ARCH_ARM64" else "arch == amd64",
                                            "why": f"from `{cond}`"})
            return name, None
        m = _GATE.match(cond)
        if not m:
            return None, f"runs under `{cond[:80]}`, which no gate expresses"
        arg, value = m["arg"], m["value"]
        holds = branch == (m["op"] == "=")
        cuda = re.search(r"CUDA_?(\d{2})", arg)
        if cuda and value == "1":
            major = int(cuda.group(1))
            name = arg if holds else f"{arg}_OFF"
            self.declared.setdefault(name, {"when": f"cuda >= {major}" if holds else f"cuda < {major}",
                                            "why": f"the `{arg}=1` branch of the file (ARG {arg}), for CUDA {major}"
                                            if holds else f"the else-branch of `{arg}=1` (ARG {arg})"})
            return name, None
        default = args.get(arg)
        if default is not None and (default == value) == holds:
            return None, None  # the branch the default build takes
        return None, f"runs only when {arg} is not its default ({arg}={default!r})"


@dataclass
class Todo:
    """A value import could not know: where it goes in a step, what to fill in, and how `--pin` finds it
    (("index", requirement), ("git", url, ref) or ("asset", url)), if it can."""

    step: dict
    key: str
    what: str
    pin: tuple = ()


@dataclass
class RunResult:
    line: int = 0
    entries: list[dict] = field(default_factory=list)  # steps, in order
    listed: list[str] = field(default_factory=list)
    todos: list[Todo] = field(default_factory=list)
    verifies: list[str] = field(default_factory=list)  # python -c snippets that check the image
    wheels_names: list[str] = field(default_factory=list)
    debs: list[str] = field(default_factory=list)


@dataclass
class _RunState:
    args: dict[str, str | None]
    line: int
    downloads: dict[str, str] = field(default_factory=dict)  # file name -> URL (wget/curl -o)
    clone: tuple[str, str, str | None] | None = None  # (url, dir, branch)
    checkout: str | None = None
    cwd_in_clone: str | None = None  # the path inside the clone that `cd` went to


def adopt_run(ins: df.Instruction, args: dict[str, str | None], gates: Gates) -> RunResult:
    result = RunResult(line=ins.line)
    state = _RunState(args, ins.line)
    wheels: dict[str | None, dict] = {}  # gate -> this RUN's wheels step for it
    under: dict[str, list[str]] = {}  # why not expressed -> the commands
    for cmd in df.commands(ins.script):
        gate, why_not = None, None
        for cond, branch in cmd.conds:
            g, problem = _condition(cond, branch, args, gates)
            if problem:
                why_not = problem
                break
            gate = g or gate
        words = [df.substitute(w, args)[0] for w in cmd.words]
        text = " ".join(words)[:100]
        if why_not:
            under.setdefault(why_not, []).append(text)
            continue
        _command(result, state, words, gate, wheels, cmd)
    result.listed += [f"`{'; '.join(texts)[:160]}`: {why}" for why, texts in under.items()]
    return result


def _condition(cond: str, branch: bool, args, gates: Gates) -> tuple[str | None, str | None]:
    if _GUARD.search(cond):
        return None, None  # a local wheel's guard: the install under it says what its policy is
    if cond.startswith(("for ", "while ", "until ", "case")):
        return None, f"runs inside `{cond[:60]}`, which no step kind expresses"
    if " && " in cond or " || " in cond:
        parts = [p.strip() for p in re.split(r"\s(?:&&|\|\|)\s", cond)]
        if branch and " || " not in cond:
            found = [gates.of(p, True, args) for p in parts]
            problems = [p for _, p in found if p]
            if problems:
                return None, problems[0]
            names = [g for g, _ in found if g]
            return (names[0] if len(names) == 1 else None), (None if len(names) <= 1 else "needs two gates at once")
        return None, f"runs under `{cond[:80]}`, which no gate expresses"
    return gates.of(cond, branch, args)


def _command(result: RunResult, state: _RunState, words: list[str], gate: str | None, wheels: dict,
             cmd: df.Command) -> None:
    head = words[0].rsplit("/", 1)[-1]
    text = " ".join(words)[:100]
    pip = df.pip_command(words)
    if pip and pip[0] == "install":
        _pip_install(result, state, pip[1], gate, wheels, cmd)
    elif pip and pip[0] == "uninstall":
        names = [w for w in pip[1] if not w.startswith("-")]
        step = kind_adopting(ADOPT_PIP_UNINSTALL).entry(WHY, packages=[{"name": n, "why": WHY} for n in names])
        result.entries.append(_gated(step, gate))
    elif head in ("apt-get", "apt") and words[1:2] and "install" in words:
        _apt(result, words, gate)
    elif head in ("apt-get", "apt") and set(words[1:]) & {"update", "clean", "autoremove"}:
        return  # pinwheel's apt partial updates and cleans in its own RUN
    elif head in ("python", "python3") and words[1:2] == ["-c"] and len(words) >= 3:
        if re.search(r"\bassert\b|importlib\.metadata|\bimport\b", words[2]) and len(words[2]) < 4000:
            result.verifies.append(words[2])
        else:
            result.listed.append(f"`{text}`: a Python command that is not a check")
    elif head == "git" and words[1:2] == ["clone"]:
        positional = _positional(words[2:], {"-b", "--branch", "--depth", "-c", "--config", "-o", "--origin"})
        branch = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-b", "--branch")), None)
        if positional:
            url = positional[0]
            state.clone = (url, positional[1] if len(positional) > 1 else url.rstrip("/").rsplit("/", 1)[-1]
                           .removesuffix(".git"), branch)
    elif head == "git" and words[1:2] == ["checkout"]:
        refs = [w for w in words[2:] if not w.startswith("-")]
        state.checkout = refs[0] if refs else None
    elif head == "git" and words[1:3] == ["submodule", "update"]:
        result.listed.append(f"`{text}`: git submodules (the git kind checks out no submodules yet)")
    elif head == "cd" and state.clone and len(words) > 1:
        target = words[1].rstrip("/")
        state.cwd_in_clone = "" if target.endswith(state.clone[1]) else target
    elif head in ("wget", "curl"):
        _download(result, state, words)
    elif head == "rm" and all(_TMP.match(w) or w.startswith("-") or w in state.downloads
                              for w in words[1:]):
        return  # temporary files: pinwheel's steps leave none in a layer
    elif head == "mkdir" and all(_TMP.match(w) or w.startswith("-") for w in words[1:]):
        return
    elif _HOUSEKEEPING.match(head) or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", head) and len(words) == 1:
        return
    else:
        result.listed.append(f"`{text}`: no step kind runs this")


def _positional(args: list[str], valued: set[str]) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


def _gated(step: dict, gate: str | None) -> dict:
    if gate:
        step = {**step, "gate": gate}
    return step


def _apt(result: RunResult, words: list[str], gate: str | None) -> None:
    names = [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    packages, todo = [], []
    for n in names:
        name, eq, version = n.partition("=")
        if "$" in n or "/" in n or not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", name):
            result.listed.append(f"`{n}`: not a Debian package name with a known value (a .deb by path, or an ARG "
                                 "the file never sets)")
            continue
        if name in result.debs:
            continue
        result.debs.append(name)
        packages.append({"name": name, "version": version if eq else TODO_DEB, "why": WHY})
        if not eq:
            todo.append(len(packages) - 1)
    if packages:
        step = _gated(kind_adopting(ADOPT_APT_INSTALL).entry(WHY, packages=packages), gate)
        result.entries.append(step)
        for i in todo:
            result.todos.append(Todo(step, f"packages[{i}].version",
                                     f"{packages[i]['name']} is unpinned in the Dockerfile: write the version "
                                     "`apt-cache policy` shows for the base"))


def _download(result: RunResult, state: _RunState, words: list[str]) -> None:
    urls = [w for w in words if w.startswith(("http://", "https://"))]
    out = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "-O", "--output")), None)
    for url in urls:
        name = (out or url.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]).rsplit("/", 1)[-1]
        if name.endswith(".whl"):
            state.downloads[name] = url
        else:
            result.listed.append(f"`{' '.join(words)[:100]}`: a download that is not a wheel (no step kind "
                                 "fetches binaries or .deb files yet)")


def _pip_install(result: RunResult, state: _RunState, args: list[str], gate: str | None, wheels: dict,
                 cmd: df.Command) -> None:
    parsed = df.parse_pip_install(args)
    if isinstance(parsed, str):
        result.listed.append(f"`pip install {' '.join(args)[:80]}`: pip refuses it ({parsed})")
        return
    if parsed.requirement_files:
        result.listed.append(f"`-r {' '.join(parsed.requirement_files)}`: a requirements file (list its pins in a "
                             "wheels step)")
    if parsed.index_url or parsed.extra_index_urls or parsed.find_links:
        result.listed.append(f"pip install from {', '.join((parsed.index_url or '',) + parsed.extra_index_urls + parsed.find_links).strip(', ')}: "
                             "the manifest's index is pip's configuration (a variant's torch_index_env for torch)")
    guarded = any(_GUARD.search(c) and b for c, b in cmd.conds)
    fallback_branch = any(_GUARD.search(c) and not b for c, b in cmd.conds)
    for req in parsed.requirements:
        _requirement(result, state, req, parsed, gate, wheels, guarded, fallback_branch)
    for editable in parsed.editables:
        _source(result, state, editable, parsed, gate, editable=True)


def _wheels_step(result: RunResult, wheels: dict, gate: str | None) -> dict:
    if gate not in wheels:
        wheels[gate] = _gated(kind_adopting(ADOPT_PIP_INSTALL).entry(WHY, packages=[]), gate)
        result.entries.append(wheels[gate])
    return wheels[gate]


def _requirement(result: RunResult, state: _RunState, req: str, parsed: df.PipInstall, gate, wheels, guarded,
                 fallback_branch) -> None:
    no_deps = {"no_deps": True, "why": WHY} if parsed.no_deps else {}
    file = req.rsplit("/", 1)[-1]
    if file.endswith(".whl") and ("*" in file or "?" in file):
        name = re.split(r"[-*?]", file, maxsplit=1)[0].replace("_", "-").lower()
        entry = {"requirement": f"{name}=={TODO_VERSION}", "why": WHY, **no_deps,
                 "local": {"glob": file, "if_missing": "skip" if guarded else "fail",
                           "how_to_provide": f"TODO: how to build {file} and put it in wheels/"}}
        step = _wheels_step(result, wheels, gate)
        step["packages"].append(entry)
        result.todos.append(Todo(step, f"packages[{len(step['packages']) - 1}].requirement",
                                 f"the version of the local wheel {file}"))
        return
    if file.endswith(".whl") and file in state.downloads:
        _asset(result, state, file, gate)
        return
    if "git+" in req:
        _source(result, state, req, parsed, gate, editable=False)
        return
    if req.startswith((".", "/", "$", "~")) or file.endswith((".whl", ".tar.gz", ".zip")):
        if req.startswith(".") and state.clone:
            _source(result, state, req, parsed, gate, editable=False)
        else:
            result.listed.append(f"`{req}`: a path pinwheel cannot follow (a file made earlier in the build)")
        return
    try:
        parsed_req = Requirement(req)
    except InvalidRequirement:
        result.listed.append(f"`{req}`: not a PEP 508 requirement")
        return
    if parsed_req.marker or parsed_req.url:
        result.listed.append(f"`{req}`: a marker or URL requirement (use a gate, or an asset step)")
        return
    spec = list(parsed_req.specifier)
    exact = len(spec) == 1 and spec[0].operator == "==" and "*" not in spec[0].version
    if fallback_branch and _attach_fallback(result, parsed_req, req if exact else None, no_deps):
        return
    extras = f"[{','.join(sorted(parsed_req.extras))}]" if parsed_req.extras else ""
    pin = req if exact else f"{parsed_req.name}{extras}=={TODO_VERSION}"
    step = _wheels_step(result, wheels, gate)
    step["packages"].append({"requirement": pin, **no_deps})
    result.wheels_names.append(canonicalize_name(parsed_req.name))
    if not exact:
        result.todos.append(Todo(step, f"packages[{len(step['packages']) - 1}].requirement",
                                 f"`{req}` is {'a range' if spec else 'unpinned'} in the Dockerfile: pin it "
                                 "(`build.py import --pin` writes today's version)", ("index", req)))


def _attach_fallback(result: RunResult, req: Requirement, exact: str | None, no_deps: dict) -> bool:
    """An index install in the else-branch of a local wheel's guard is that wheel's fallback: the local entry
    of the same distribution, else the first one of this RUN that has none."""
    name = canonicalize_name(req.name)
    locals_ = [(step, p) for step in result.entries for p in step.get("packages", ())
               if isinstance(p, dict) and p.get("local") and "fallback" not in p]
    same = [(s, p) for s, p in locals_ if canonicalize_name(p["requirement"].split("==")[0]) == name]
    if not exact or not locals_:
        return False
    step, p = (same or locals_)[0]
    local = p["local"]
    if same:
        # One distribution from a local wheel, else from the index: the manifest lists a package once,
        # so the wheel is required and the else-branch is listed.
        local["if_missing"] = "fail"
        p["requirement"] = exact
        result.listed.append(f"`{exact}`: the else-branch of the local wheel {local['glob']} (one distribution "
                             "from two sources: no kind expresses it yet; the wheel is required)")
        key = f"packages[{step['packages'].index(p)}].requirement"
        result.todos[:] = [t for t in result.todos if not (t.step is step and t.key == key)]
    else:
        local["if_missing"] = "fallback"
        p["fallback"] = {"requirement": exact, "why": WHY, **no_deps}
    return True


def _asset(result: RunResult, state: _RunState, file: str, gate: str | None) -> None:
    url = state.downloads[file]
    m = _WHEEL.match(file)
    if not m:
        result.listed.append(f"`{file}`: a downloaded file whose name is not a wheel's")
        return
    digest = re.search(r"#sha256=([0-9a-f]{64})", url)
    step = _gated(kind_adopting(ADOPT_WHEEL_DOWNLOAD).entry(
        WHY, package=f"{m['name'].replace('_', '-').lower()}=={m['version']}",
        url={"url": url.split("#", 1)[0], "sha256": digest.group(1) if digest else ZERO_SHA256}), gate)
    result.entries.append(step)
    if not digest:
        result.todos.append(Todo(step, "url.sha256", f"the sha256 of {url} (`build.py asset add URL` prints it)",
                                 ("asset", url.split("#", 1)[0])))


def _source(result: RunResult, state: _RunState, req: str, parsed: df.PipInstall, gate, editable: bool) -> None:
    """A git URL, or a checkout this RUN cloned: a git step at a full commit, else a placeholder and a TODO."""
    if "git+" in req:
        url = req.split("git+", 1)[1]
        tail = url.split("//", 1)[-1]
        rev = tail.rsplit("@", 1)[1].split("#", 1)[0] if "@" in tail.split("/", 1)[-1] else ""
        url = url[: len(url) - len(rev) - 1] if rev else url.split("#", 1)[0]
        subdirectory = None
    elif state.clone:
        url, rev = state.clone[0], state.checkout or state.clone[2] or ""
        sub = req.split("[", 1)[0].strip("./") or state.cwd_in_clone or ""
        subdirectory = sub or None
    else:
        result.listed.append(f"`{req}`: an editable path pinwheel cannot follow")
        return
    if "$" in url or not url.startswith(("https://", "http://", "ssh://", "git://")):
        result.listed.append(f"`{req}`: its URL {url} holds an ARG the file never sets")
        return
    unset = re.search(r"\$\{?(\w+)", rev or "")
    if unset:  # an ARG the file never gives a value: there is no ref to look up
        result.listed.append(f"`{req}`: its ref names {unset.group(1)}, an ARG with no value in the file")
        rev = ""
    name = re.sub(r"[^a-z0-9-]+", "-", url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git").lower()).strip("-")
    extras = re.search(r"\[([^\]]+)\]", req)
    step = kind_adopting(ADOPT_GIT_SOURCE).entry(
        WHY, package=f"{name}{'[' + extras.group(1) + ']' if extras else ''}=={TODO_VERSION}",
        url=url, rev=rev if _COMMIT.match(rev or "") else ZERO_COMMIT)
    if subdirectory:
        step["subdirectory"] = subdirectory
    if parsed.no_build_isolation:
        step["isolation"] = False
    if editable:
        step["editable"] = True
        where = state.clone[1] if state.clone and "git+" not in req else name
        step["checkout"] = where if where.startswith("/") else f"/opt/{where}"
    step = _gated(step, gate)
    result.entries.append(step)
    result.todos.append(Todo(step, "package", f"the distribution name and version {url} builds"))
    if not _COMMIT.match(rev or ""):
        at = f"`git ls-remote {url} {rev}`" if rev else f"`git ls-remote {url} HEAD`"
        result.todos.append(Todo(step, "rev", f"{'branch or tag ' + rev if rev else 'no commit'} in the Dockerfile: "
                                              f"write the full commit {at} names", ("git", url, rev or "HEAD")))
