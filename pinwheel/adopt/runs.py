"""One RUN of a hand-written Dockerfile as manifest entries of today's step kinds, and what is left over.

Each simple command becomes part of an entry (apt, wheels, git, asset, remove,
a verify snippet) or a listed item with the instruction's line; housekeeping
that pinwheel's own rendering already does (apt lists, caches, /tmp) is
neither. A value import cannot know is written as a placeholder that loads,
with a TODO naming what to fill in.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .. import dockerfiles as df
from ..steps import ADOPT_GIT_SOURCE, ADOPT_PIP_INSTALL, ADOPT_PIP_UNINSTALL, ADOPT_SDIST_BUILD, ADOPT_UV_SYNC, \
    ADOPT_WHEEL_DOWNLOAD, kind_adopting
from .debian import apt_hold, apt_install, apt_remove, dpkg, piped_key, source_line
from .shell import ShellCommand, fetch_of, rebuilt, whole_run
from .state import TODO_DEB, TODO_VERSION, WHY, ZERO_COMMIT, ZERO_SHA256, Context, RunResult, RunState, Todo, under

__all__ = ["TODO_DEB", "TODO_VERSION", "WHY", "ZERO_COMMIT", "ZERO_SHA256", "Context", "Gates", "RunResult", "Todo",
           "adopt_run"]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_GATE = re.compile(r"^\[\s*\$\{?(?P<arg>[A-Za-z_][A-Za-z0-9_]*)\}?\s*(?P<op>!?=)\s*(?P<value>\S+)\s*\]$")
_ARCH = re.compile(r"^\[\s*\$\(uname -m\)\s*=\s*(?P<arch>aarch64|arm64|x86_64)\s*\]$")
_GUARD = re.compile(r"\bls\s+(?P<glob>\S+\.whl)")
_HOUSEKEEPING = re.compile(r"^(cd|echo|printf|true|:|ls|set|ulimit|sleep)$")
_TMP = re.compile(r"^(/tmp/|/root/\.cache|/var/lib/apt/lists|/var/cache/apt|\$HOME/\.cache)")
# What torch's wheels pin: a later install of one of these replaces that pin.
_TORCH_PINS = re.compile(r"^(nvidia-(cuda-nvrtc|cuda-runtime|cuda-cupti|cudnn|cublas|cufft|curand|cusolver|cusparse|"
                         r"cusparselt|nccl|nvshmem|nvtx|nvjitlink|cufile)(-cu\d+)?|triton)$")
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


def adopt_run(ins: df.Instruction, args: dict[str, str | None], gates: Gates, ctx: Context | None = None) -> RunResult:
    result = RunResult(line=ins.line)
    ctx = ctx or Context()
    state = RunState(args, ins.line, ctx=ctx, cwd=ctx.workdir)
    wheels: dict[str | None, dict] = {}  # gate -> this RUN's wheels step for it
    under: dict[str, list[str]] = {}  # why not expressed -> the commands
    cmds = df.commands(ins.script)
    installs = any(_installs([df.substitute(w, args)[0] for w in c.words]) for c in cmds)
    for pos, cmd in enumerate(cmds):
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
        state.pos, state.raw, before = pos, cmd.words, len(result.entries)
        _command(result, state, words, gate, wheels, cmd)
        for entry in result.entries[before:]:
            entry.setdefault("_pos", pos)
    _shell(ins, result, state, installs, under, args)
    for entry in result.entries:
        entry.pop("_pos", None)
    return result


def _installs(words: list[str]) -> bool:
    """Whether a command installs or removes packages (a RUN that does is never one run step)."""
    pip = df.pip_command(words)
    head = words[0].rsplit("/", 1)[-1] if words else ""
    return bool(pip and pip[0] in ("install", "uninstall", "download", "wheel")) or \
        (head in ("apt-get", "apt") and "install" in words) or (head == "uv" and words[1:2] == ["sync"])


def _shell(ins: df.Instruction, result: RunResult, state: RunState, installs: bool, under: dict, args) -> None:
    """What the RUN's package kinds did not take: one run step of the whole RUN, rebuilt run steps beside the
    package entries, or listed items."""
    shell = state.shell
    if state.clone and not state.clone_used:
        shell.commands.append(ShellCommand(-1, df.Command(("git", "clone", state.clone[0]), ()), None, True))
    unused = [f for f in shell.fetches if not f.used]
    substantive = [c for c in shell.commands if c.substantive] or unused
    if not installs and not result.verifies and not result.entries and (substantive or under):
        entry, todos, why_not = whole_run(ins, shell, args, state.ctx.copied, state.ctx.workdir)
        if entry is not None:
            result.entries.append(entry)
            result.reads = set(entry.get("env", {})) | set(re.findall(r"^([A-Za-z_]\w*)=\"\"  # ARG", entry["script"], re.M))
            result.todos += [Todo(entry, key, what, pin) for key, what, pin in todos]
            return
        result.listed += [f"`{' '.join(c.command.words)[:100]}`: {why_not}" for c in shell.commands if c.substantive]
        result.listed += [f"`{' '.join(f.command.words)[:100]}`: {why_not}" for f in unused]
        result.listed += [f"`{'; '.join(texts)[:160]}`: {why}" for why, texts in under.items()]
        return
    if under or result.listed or unused:
        shell.blocked.append("runs in a RUN with something import does not express (listed at this line)")
    if state.clone and state.clone_used:
        shell.blocked.append("runs beside a checkout the git step builds in a stage of its own")
    made, listed = rebuilt(shell, args, state.ctx.copied, state.ctx.workdir)
    result.listed += [f"`{' '.join(f.command.words)[:100]}`: a download that is not a wheel, in a RUN that "
                      "installs packages too (write it as a run step's download)" for f in unused]
    result.listed += listed
    result.listed += [f"`{'; '.join(texts)[:160]}`: {why}" for why, texts in under.items()]
    for pos, entry, todos in made:
        result.reads |= set(entry.get("env", {}))
        at = next((i for i, e in enumerate(result.entries) if e.get("_pos", 0) > pos), len(result.entries))
        result.entries.insert(at, entry)
        result.todos += [Todo(entry, key, what, pin) for key, what, pin in todos]


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


def _command(result: RunResult, state: RunState, words: list[str], gate: str | None, wheels: dict,
             cmd: df.Command) -> None:
    head = words[0].rsplit("/", 1)[-1]
    pip = df.pip_command(words)
    apt = head in ("apt-get", "apt")
    if pip and pip[0] == "install":
        _prefix_env(state, words)
        _pip_install(result, state, pip[1], gate, wheels, cmd)
    elif pip and pip[0] == "uninstall":
        names = [w for w in pip[1] if not w.startswith("-")]
        step = kind_adopting(ADOPT_PIP_UNINSTALL).entry(WHY, packages=[{"name": n, "why": WHY} for n in names])
        result.entries.append(_gated(step, gate))
    elif apt and words[1:2] and "install" in words:
        apt_install(result, state, words, gate)
    elif apt and set(words[1:]) & {"update", "clean", "autoremove"}:
        return  # pinwheel's apt partial updates and cleans in its own RUN
    elif apt and set(words[1:]) & {"remove", "purge"} and apt_remove(result, state, words, gate):
        return
    elif head == "apt-mark" and words[1:2] == ["hold"] and apt_hold(state, words[2:]):
        return
    elif head == "dpkg" and "-i" in words and dpkg(result, state, words, gate):
        return
    elif head == "uv" and words[1:2] == ["sync"]:
        _uv_sync(result, state, words, gate)
    elif head in ("python", "python3") and words[1:2] == ["-c"] and len(words) >= 3 and \
            re.search(r"\bassert\b|importlib\.metadata|\bimport\b", words[2]) and len(words[2]) < 4000:
        result.verifies.append(words[2])
    elif head == "git" and _git(state, words):
        return
    elif head == "cd" and len(words) > 1:
        _cd(state, words[1], cmd, gate)
    elif head in ("wget", "curl"):
        _download(result, state, words, cmd)
    elif head == "echo" and source_line(state, words):
        return
    elif head in ("tee", "gpg") and state.shell.fetches and state.shell.fetches[-1].command.after == "|":
        piped_key(state, words)
    elif head == "rm" and all(_TMP.match(w) or w.startswith("-") or w in state.downloads or _fetched(state, w)
                              for w in words[1:]):
        return  # temporary files: pinwheel's steps leave none in a layer
    elif head == "mkdir" and all(_TMP.match(w) or w.startswith("-") for w in words[1:]):
        _keep(state, cmd, gate, False)
    elif head == "export" or (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", head) and len(words) == 1):
        for w in words[1:] if head == "export" else words:
            name, eq, value = w.partition("=")
            if eq and "$" not in value and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
                state.exports[name] = value
        _keep(state, cmd, gate, False)
    elif _HOUSEKEEPING.match(head):
        _keep(state, cmd, gate, False)
    else:
        _keep(state, cmd, gate, True)


def _git(state: RunState, words: list[str]) -> bool:
    """A clone, a checkout in it, or its submodules: what a pip install of the checkout builds from."""
    if words[1:2] == ["clone"]:
        positional = _positional(words[2:], {"-b", "--branch", "--depth", "-c", "--config", "-o", "--origin"})
        branch = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-b", "--branch")), None)
        if positional:
            url = positional[0]
            state.clone = (url, positional[1] if len(positional) > 1 else url.rstrip("/").rsplit("/", 1)[-1]
                           .removesuffix(".git"), branch)
            state.submodules = bool({"--recursive", "--recurse-submodules"} & set(words))
        return True
    if words[1:2] == ["checkout"] and state.clone:
        refs = [w for w in words[2:] if not w.startswith("-")]
        state.checkout = refs[0] if refs else None
        return True
    if words[1:3] == ["submodule", "update"] and state.clone:
        state.submodules = True
        return True
    return False


def _fetched(state: RunState, word: str) -> bool:
    """A file this RUN downloaded (its kind downloads it instead, and leaves none behind)."""
    return any(f.dest and word in (f.dest, f.dest.rsplit("/", 1)[-1]) for f in state.shell.fetches)


def _keep(state: RunState, cmd: df.Command, gate: str | None, substantive: bool) -> None:
    """A command left to the run kind (shell.py decides whether a run step takes it)."""
    state.shell.commands.append(ShellCommand(state.pos, df.Command(state.raw, cmd.conds, cmd.after), gate,
                                             substantive))


def _cd(state: RunState, target: str, cmd: df.Command, gate: str | None) -> None:
    if state.clone:
        target_dir = target.rstrip("/")
        state.cwd_in_clone = "" if target_dir.endswith(state.clone[1]) else target_dir
    state.cwd = target if target.startswith("/") else f"{state.cwd.rstrip('/')}/{target}"
    _keep(state, cmd, gate, False)


def _prefix_env(state: RunState, words: list[str]) -> None:
    for w in words:
        name, eq, value = w.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            break
        if "$" not in value and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            state.exports[name] = value


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


def _download(result: RunResult, state: RunState, words: list[str], cmd: df.Command) -> None:
    for fetch in fetch_of(words, state.raw, state.cwd, state.pos, cmd):
        name = fetch.url.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        file = (fetch.dest or name).rsplit("/", 1)[-1]
        if file.endswith(".whl"):
            state.downloads[file] = fetch.url
        elif fetch.dest and fetch.dest.startswith(("/usr/share/keyrings/", "/etc/apt/")) and "$" not in fetch.url:
            state.ctx.keys[fetch.dest] = fetch.url
            fetch.used = True
        else:
            state.shell.fetches.append(fetch)


def _uv_sync(result: RunResult, state: RunState, words: list[str], gate: str | None) -> None:
    """`uv sync` of a project the Dockerfile copied in: a uv-project entry for that directory of the context."""
    where = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--project", "--directory")), None)
    project = (where if where and where.startswith("/") else f"{state.cwd.rstrip('/')}/{where or ''}").rstrip("/")
    source = next((src for srcs, dest in state.ctx.copies for src in srcs
                   if dest.rstrip("/") == project and (src in (".", "./") or src.endswith(("pyproject.toml", "/"))
                                                        or src.rstrip("/") == project.rsplit("/", 1)[-1])), None)
    if source is None or "$" in project:
        result.listed.append(f"`{' '.join(words)[:100]}`: syncs {project}, which no COPY from the build context "
                             "fills (a uv-project step reads its pyproject.toml and uv.lock)")
        return
    context_dir = source.rsplit("/", 1)[0] if source.endswith("pyproject.toml") and "/" in source else \
        ("." if source.endswith("pyproject.toml") else source.rstrip("/") or ".")
    extras = [w for w in words if w.startswith(("--extra", "--all-extras", "--group", "--all-groups"))]
    if extras:
        result.listed.append(f"`{' '.join(extras)}`: a uv-project step syncs the project's own dependencies only")
    if state.ctx.project_base:
        context_dir = os.path.relpath(state.ctx.project_base[0] / context_dir, state.ctx.project_base[1])
    result.entries.append(kind_adopting(ADOPT_UV_SYNC).adopted_entry(context_dir, "--no-install-project" not in words, WHY, gate))
    state.ctx.venv = state.ctx.venv or f"{project}/.venv"


def _pip_install(result: RunResult, state: RunState, args: list[str], gate: str | None, wheels: dict,
                 cmd: df.Command) -> None:
    parsed = df.parse_pip_install(args)
    if isinstance(parsed, str):
        result.listed.append(f"`pip install {' '.join(args)[:80]}`: pip refuses it ({parsed})")
        return
    from_files = [req for file in parsed.requirement_files for req in _requirements_file(result, state, file)]
    state.index = _index(result, state, parsed)
    guarded = any(_GUARD.search(c) and b for c, b in cmd.conds)
    fallback_branch = any(_GUARD.search(c) and not b for c, b in cmd.conds)
    for req in [*parsed.requirements, *from_files]:
        _requirement(result, state, req, parsed, gate, wheels, guarded, fallback_branch)
    for editable in parsed.editables:
        _source(result, state, editable, parsed, gate, editable=True)


REQUIREMENTS_FILE_LIMIT = 1 << 20


def _requirements_file(result: RunResult, state: RunState, file: str) -> list[str]:
    """The requirements of a `-r` file the Dockerfile COPYs in from the build context, in its order; each
    line that is not one (an option, a nested -r) is listed. A file not found in the context is listed whole."""
    from ..fsutil import UnreadableFile, read_regular_text

    dest = under(state.cwd, file)
    source = next((src for srcs, to in state.ctx.copies for src in srcs
                   if to == dest or (to.endswith("/") and to + src.rsplit("/", 1)[-1] == dest)), None)
    context = state.ctx.context
    try:
        text = read_regular_text(Path(context) / source, REQUIREMENTS_FILE_LIMIT, "requirements file") \
            if source and context is not None else None
    except UnreadableFile:
        text = None
    if text is None:
        where = f"copied from {source}, not in the build context given" if source else "not copied in by this file"
        result.listed.append(f"`-r {file}` ({where}): a requirements file (list its pins in a wheels step, or "
                             "give the build context)")
        return []
    found = []
    for n, line in df.requirements_lines(text):
        if line.startswith("-"):
            result.listed.append(f"{source}:{n}: `{line[:80]}`: an option inside a requirements file")
        else:
            found.append(line)
    return found


def _index(result: RunResult, state: RunState, parsed: df.PipInstall) -> tuple[str, str | None] | None:
    """The named index this install's index packages come from, and a TODO where pip read pip's default
    index too (--extra-index-url, -f): (name, what to check) or None."""
    found = [(u, False, True) for u in (parsed.index_url,) if u] + \
        [(u, False, False) for u in parsed.extra_index_urls] + [(u, True, False) for u in parsed.find_links]
    named: list[tuple[str, bool]] = []
    for url, flat, only in found:
        if "$" in url or not re.fullmatch(r"https?://[A-Za-z0-9][A-Za-z0-9._~:@%+/=-]*", url):
            result.listed.append(f"pip install from {url}: a URL the build computes, or not one an index is "
                                 "named by")
            continue
        name = next((n for n, i in state.ctx.indexes.items() if i["url"] == url), None) or _index_name(state, url)
        state.ctx.indexes.setdefault(name, {"url": url, "why": WHY, **({"flat": True} if flat else {})})
        named.append((name, only))
    if not named:
        return None
    name, only = named[0]
    if only and len(named) == 1:
        return name, None
    urls = ", ".join(state.ctx.indexes[n]["url"] for n, _ in named)
    return name, (f"pip read {urls} for this install, and its default index too: keep `index: {name}` only where "
                  f"{name} serves the package")


def _index_name(state: RunState, url: str) -> str:
    host, _, path = url.split("://", 1)[1].partition("/")
    labels = [l for l in host.split(".")[:-1] if l not in ("www", "download", "files", "pypi", "repo")] or ["index"]
    tail = [p for p in path.split("/") if p and p not in ("simple", "whl", "nightly")]
    base = re.sub(r"[^a-z0-9-]+", "-", "-".join(labels[:1] + tail[-1:]).lower()).strip("-")[:36] or "index"
    name, n = base, 2
    while name in state.ctx.indexes:
        name, n = f"{base}-{n}", n + 1
    return name


def _wheels_step(result: RunResult, wheels: dict, gate: str | None) -> dict:
    if gate not in wheels:
        wheels[gate] = _gated(kind_adopting(ADOPT_PIP_INSTALL).entry(WHY, packages=[]), gate)
        result.entries.append(wheels[gate])
    return wheels[gate]


def _requirement(result: RunResult, state: RunState, req: str, parsed: df.PipInstall, gate, wheels, guarded,
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
        if fallback_branch:
            _prebuilt_of(result, result.entries[-1])
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
    if fallback_branch and _attach_fallback(result, parsed_req, req if exact else None, no_deps,
                                            parsed.no_build_isolation):
        return
    extras = f"[{','.join(sorted(parsed_req.extras))}]" if parsed_req.extras else ""
    pin = req if exact else f"{parsed_req.name}{extras}=={TODO_VERSION}"
    step = _wheels_step(result, wheels, gate)
    package: dict = {"requirement": pin, **no_deps}
    step["packages"].append(package)
    name = canonicalize_name(parsed_req.name)
    result.wheels_names.append(name)
    at = f"packages[{len(step['packages']) - 1}]"
    state.ctx.torch = state.ctx.torch or name == "torch"
    if state.index:
        package["index"] = state.index[0]
        if state.index[1]:
            result.todos.append(Todo(step, f"{at}.index", state.index[1]))
    if _TORCH_PINS.match(name) and not state.ctx.torch:
        package.update(override=True, why=WHY)
        result.todos.append(Todo(step, f"{at}.why", f"{name} is one torch's wheels pin: say whose pin this "
                                                    "replaces and why (drop `override: true` if it replaces none)"))
    if not exact:
        result.todos.append(Todo(step, f"{at}.requirement",
                                 f"`{req}` is {'a range' if spec else 'unpinned'} in the Dockerfile: pin it "
                                 "(`build.py import --pin` writes today's version)", ("index", req)))


def _prebuilt_of(result: RunResult, built: dict) -> None:
    """A source build in the else-branch of a local wheel's guard of the same distribution: the wheel becomes
    the build's `prebuilt:` (taken when the context holds it), and leaves its wheel set."""
    name = canonicalize_name(built["package"].split("[")[0].split("==")[0])
    for step in [s for s in result.entries if s is not built]:
        for i, p in enumerate(step.get("packages", ())):
            if isinstance(p, dict) and p.get("local") and "fallback" not in p and \
                    canonicalize_name(p["requirement"].split("==")[0]) == name:
                built["prebuilt"] = {"glob": p["local"]["glob"], "why": WHY}
                del step["packages"][i]
                key = f"packages[{i}]."
                result.todos[:] = [t for t in result.todos if not (t.step is step and t.key.startswith(key))]
                if not step["packages"]:
                    result.entries.remove(step)
                    result.todos[:] = [t for t in result.todos if t.step is not step]
                return


def _attach_fallback(result: RunResult, req: Requirement, exact: str | None, no_deps: dict,
                     parsed_build: bool = False) -> bool:
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
    if same and parsed_build:
        # The local wheel, else a build of the index's sdist: one sdist step that takes the wheel when
        # the context holds it (prebuilt:).
        entry = kind_adopting(ADOPT_SDIST_BUILD).entry(WHY, package=exact, sha256=ZERO_SHA256, isolation=False)
        result.entries.append(_gated(entry, step.get("gate")))
        result.todos.append(Todo(entry, "sha256", f"the sha256 of {exact}'s sdist, as the index lists it"))
        _prebuilt_of(result, entry)
    elif same:
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


def _asset(result: RunResult, state: RunState, file: str, gate: str | None) -> None:
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


def _source(result: RunResult, state: RunState, req: str, parsed: df.PipInstall, gate, editable: bool) -> None:
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
        state.clone_used = True
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
    if state.submodules and "git+" not in req:
        step["submodules"] = True
    if parsed.config_settings:
        settings: dict[str, str] = {}
        for key, value in parsed.config_settings:  # setuptools splits a repeated --build-option at spaces
            settings[key] = f"{settings[key]} {value}" if key in settings else value
        step["config_settings"] = settings
    if state.exports:
        step["env"] = dict(state.exports)
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
