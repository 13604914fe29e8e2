"""Audit a hand-written Dockerfile: every pip install per RUN, and the patterns that break images.

The file is read by pinwheel.dockerfiles (bounded, BuildKit's own parser,
heredoc bodies as the script they are); each pip install's arguments are read
by pip's own option parser. Each finding carries the line of its instruction,
a rule id, a severity and a one-line fix.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import dockerfiles as df

if TYPE_CHECKING:  # rich loads for the printed views only: `report --json` judges run scripts without it
    from rich.console import Console

SCHEMA = "pinwheel.audit/1"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SECRET_ARG = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.I)
_CHECKS = ("patch", "test", "[", "grep", "python", "python3", "pip", "git", "ls", "cmp", "diff")
# Commands whose failure means the image is not what the file says: a build, an install, a fetch.
_BUILDS = ("pip", "pip3", "make", "cmake", "ninja", "cargo", "maturin", "apt-get", "apt", "dpkg", "curl", "wget",
           "git", "tar", "bash", "sh", "python", "python3", "uv", "conda", "patch")
# A `#sha256=` fragment on a curl or wget URL checks nothing: only pip reads it.
_CHECKSUM = re.compile(r"\b(sha256sum|sha512sum|shasum|md5sum|gpg)\b|--checksum")
# A shell loop: `for x in ...; do BODY; done` or `while ...; do BODY; done`, at the start of a command.
_LOOP = re.compile(r"(?:^|[;&|({]|\bthen|\bdo|\belse)\s*(?:for\s+\w+\s+in\b|while\b).+?\bdo\b(?P<body>.+?)"
                   r"\bdone\b(?P<after>.*)", re.S)
_PIP_PATHLIKE = re.compile(r"^(\.|/|\$|~)|\.(whl|tar\.gz|zip|tgz)$")


@dataclass(frozen=True)
class Finding:
    line: int
    level: str  # error | warning
    rule: str
    message: str
    fix: str = ""


@dataclass
class PipInstall:
    line: int
    stage: int
    command: str
    flags: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    no_deps: bool = False


@dataclass
class Audit:
    path: str
    installs: list[PipInstall] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.level == "error")

    def add(self, line: int, level: str, rule: str, message: str, fix: str) -> None:
        self.findings.append(Finding(line, level, rule, message, fix))

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "path": self.path, "installs": [asdict(i) for i in self.installs],
                "findings": [asdict(f) for f in sorted(self.findings, key=lambda f: (f.line, f.rule))],
                "summary": {"installs": len(self.installs), "errors": self.errors,
                            "warnings": len(self.findings) - self.errors}}


@dataclass
class _Run:
    """What one RUN's rules read: its line, stage, script, simple commands and the ARGs in scope."""

    line: int
    stage: int
    script: str
    words: list[list[str]]
    args: dict[str, str | None]


def audit(path: Path, context: Path | None = None) -> Audit:
    """Every rule over the file. `context`: the build context, where `-r` files copied in are read from."""
    result = Audit(str(path))
    instructions = df.read(path)
    args: dict[str, str | None] = {}
    copies: dict[str, str] = {}  # destination in the image -> source in the context
    stage = -1
    for ins in instructions:
        if ins.cmd == "FROM":
            stage += 1
        elif ins.cmd == "ARG":
            for name, default in df.arg_values(ins).items():
                args[name] = default
                if _SECRET_ARG.search(name):
                    result.add(ins.line, "error", "secret-build-arg", f"ARG {name} looks like a secret: build args "
                               "land in `docker history`", "pass it with RUN --mount=type=secret")
        elif ins.cmd in ("COPY", "ADD"):
            _copy(result, ins, copies)
        elif ins.cmd == "RUN":
            run = _Run(ins.line, stage, ins.script, df.segments(ins.script), dict(args))
            _audit_run(result, run, copies, context or Path(path).parent)
    return result


def audit_script(script: str, line: int) -> list[Finding]:
    """The RUN rules over one shell script written outside a Dockerfile (a manifest's run step): its findings,
    each at ``line``. No file is copied in by it, so a `-r` file it names is reported unread, never read."""
    result = Audit("")
    _audit_run(result, _Run(line, 0, script, df.segments(script), {}), {}, Path("."))
    return sorted(result.findings, key=lambda f: (f.rule, f.message))


def _copy(result: Audit, ins: df.Instruction, copies: dict[str, str]) -> None:
    words = [w for w in ins.value if not w.startswith("--")]
    if len(words) >= 2 and not ins.heredocs:
        for src in words[:-1]:
            dest = words[-1]
            copies[dest.rstrip("/") + "/" + src.rsplit("/", 1)[-1] if dest.endswith("/") else dest] = src
    if ins.cmd == "ADD" and any(w.startswith(("http://", "https://")) for w in words[:-1]) \
            and not any(f.startswith("--checksum") for f in ins.flags):
        result.add(ins.line, "error", "download-without-checksum", "ADD of a URL with no checksum: the layer holds "
                   "whatever the server sends", "pin it: ADD --checksum=sha256:<digest> (or an asset step)")


def _audit_run(result: Audit, run: _Run, copies: dict[str, str], context: Path) -> None:
    guarded: set[str] = set()
    for i, words in enumerate(run.words):
        head = words[0].rsplit("/", 1)[-1]
        if head in ("ls", "test", "[", "compgen") or words[:1] == ["set"] and "--" in words:
            guarded.update(w for w in words if "*" in w or "?" in w)
        if words == ["||"] and i + 1 < len(run.words):
            _masked(result, run, i)
        if head == "git":
            _git_command(result, run, words)
        pip = df.pip_command(words)
        if pip and pip[0] == "install":
            _pip(result, run, words, pip[1], guarded, copies, context)
    _downloads(result, run)
    _loops(result, run)


def _masked(result: Audit, run: _Run, i: int) -> None:
    """`X || true` and `X || echo ...`: a failure of X becomes success."""
    after = run.words[i + 1]
    if after[0] not in ("true", ":", "echo", "printf"):
        return
    for words in run.words[i + 1:]:  # `|| { echo ...; exit 1; }` does fail
        if words in (["&&"], ["||"]):
            break
        if words[0] == "false" or words[0] == "exit" and words[1:2] != ["0"]:
            return
    before = next((w for w in reversed(run.words[:i]) if w[0] not in df.SEPARATORS), [])
    head = before[0].rsplit("/", 1)[-1] if before else ""
    command = " ".join(before)[:80]
    if head in ("python", "python3") and "-c" in before or head in ("test", "[", "grep", "cmp", "diff"):
        result.add(run.line, "error", "check-or-true", f"`{command} || {after[0]}` turns a failed check into success",
                   "drop the `|| ...`: a check that cannot fail checks nothing")
    elif head in _BUILDS or df.pip_command(before):
        result.add(run.line, "error", "failure-masked", f"`{command} || {after[0]}` turns a failed build or install "
                   "into success: the image ships without it", "drop the `|| ...`, or guard what may be absent")


def _pip(result: Audit, run: _Run, words: list[str], args: list[str], guarded: set[str], copies: dict[str, str],
         context: Path) -> None:
    parsed = df.parse_pip_install(args)
    flags = df.pip_flags(args)
    if isinstance(parsed, str):
        result.add(run.line, "error", "pip-bad-option", f"pip install {' '.join(args)[:80]}: pip refuses it: {parsed}",
                   "spell the option as `pip install --help` lists it")
        result.installs.append(PipInstall(run.line, run.stage, " ".join(words)[:300], flags, []))
        return
    pip = PipInstall(run.line, run.stage, " ".join(words)[:300], flags,
                     list(parsed.requirements) + [f"-e {e}" for e in parsed.editables], parsed.no_deps)
    result.installs.append(pip)
    if parsed.force_reinstall:
        result.add(run.line, "warning", "force-reinstall", "--force-reinstall replaces what earlier layers installed, "
                   "dependencies included", "install the exact pin once, in one place")
    if parsed.no_deps:
        names = ", ".join(parsed.requirements + parsed.editables)[:120] or "(requirement files)"
        result.add(run.line, "warning", "no-deps-install", f"--no-deps install of {names}: its declared requirements "
                   "are not installed or checked", "say why, and check what it drops (audit --replay names them)")
    for req in parsed.requirements:
        _requirement(result, run, req, guarded)
    for editable in parsed.editables:
        if "git+" in editable:
            _git_url(result, run, editable)
    for file in parsed.requirement_files:
        _requirements_file(result, run, file, copies, context)


def _requirement(result: Audit, run: _Run, req: str, guarded: set[str]) -> None:
    line = run.line
    if req.endswith(".whl") and ("*" in req or "?" in req):
        if req not in guarded:
            result.add(line, "error", "unguarded-wheel-glob", f"{req}: no existence guard; a missing wheel fails the "
                       "build, or the literal glob reaches pip", "guard it (`if ls <glob>`) or make it a local wheel")
    elif "git+" in req:
        _git_url(result, run, req)
    elif req.startswith(("http://", "https://")):
        if "#sha256=" not in req:
            result.add(line, "error", "download-without-checksum", f"{req[:100]}: a URL with no hash",
                       "append #sha256=<digest>, or make it an asset step")
    elif _PIP_PATHLIKE.search(req) or "[" in req and _PIP_PATHLIKE.search(req.split("[", 1)[0]):
        return
    elif "==" not in req and "@" not in req:
        loose = any(op in req for op in (">", "<", "~=", "!="))
        result.add(line, "warning", "version-range" if loose else "unpinned",
                   f"{req}: {'a version range' if loose else 'no version'}; the image changes with the index",
                   "pin it exactly (name==version); `import --pin` writes today's version")


def _requirements_file(result: Audit, run: _Run, file: str, copies: dict[str, str], context: Path) -> None:
    source = copies.get(file)
    path = (context / source) if source else None
    if path is None or not path.is_file() or path.stat().st_size > 1 << 20:
        where = f"copied from {source}" if source else "not copied in by this file"
        result.add(run.line, "warning", "requirements-unread", f"-r {file} ({where}): not in the context given, so "
                   "its pins were not checked", "audit with --context <the build context>")
        return
    for n, text in df.requirements_lines(path.read_text(encoding="utf-8", errors="replace")):
        if text.startswith("-"):
            continue  # options inside the file apply to it as a whole
        before = len(result.findings)
        _requirement(result, run, text, set())
        for j in range(before, len(result.findings)):
            f = result.findings[j]
            result.findings[j] = Finding(f.line, f.level, f.rule, f"{source}:{n}: {f.message}", f.fix)


def _git_url(result: Audit, run: _Run, req: str) -> None:
    url = req.split("git+", 1)[1]
    tail = url.split("//", 1)[-1]
    ref = tail.rsplit("@", 1)[1].split("#", 1)[0] if "@" in tail.split("/", 1)[-1] else ""
    _ref(result, run, req[:100], ref, "pip takes the default branch")


def _ref(result: Audit, run: _Run, what: str, ref: str, empty_means: str) -> None:
    arg = re.fullmatch(r"\$\{?(\w+)\}?", ref or "")
    if arg:
        default = run.args.get(arg.group(1))
        if arg.group(1) not in run.args:
            result.add(run.line, "error", "empty-commit-arg", f"{what}: {arg.group(1)} is not declared (no ARG), so "
                       f"the ref is empty ({empty_means})", f"declare ARG {arg.group(1)} with a full commit id")
            return
        if not default:
            result.add(run.line, "error", "empty-commit-arg", f"{what}: build arg {arg.group(1)} has no default, so "
                       f"the ref can be empty ({empty_means})", f"give ARG {arg.group(1)} a full commit id as default")
            return
        ref = default
    if not ref:
        result.add(run.line, "error", "git-without-commit", f"{what}: no commit; a layer cache serves whatever the "
                   "branch was once", "pin a full commit id (a git step); `import --pin` finds it")
    elif not _COMMIT.match(ref):
        result.add(run.line, "error", "git-branch", f"{what}: {ref} is a branch or tag, not a commit",
                   f"pin the commit `git ls-remote <url> {ref}` names")


def _git_command(result: Audit, run: _Run, words: list[str]) -> None:
    """`git clone` at a branch or HEAD with no commit checked out after it; `git checkout <ARG>` not a commit."""
    if words[1:2] == ["clone"]:
        url = df.substitute((_clone_positional(words[2:]) or ["?"])[0], run.args)[0]
        branch = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-b", "--branch")), None)
        checkout = any(w[1:2] == ["checkout"] for w in run.words if w[0] == "git")
        if not checkout:
            what = f"git clone {url}"
            if branch:
                _ref(result, run, what, branch, "git clones the default branch")
            else:
                result.add(run.line, "error", "git-without-commit", f"{what}: cloned at HEAD, no commit checked out",
                           "check out a full commit id after the clone (or make it a git step)")
    elif words[1:2] == ["checkout"]:
        refs = [w for w in words[2:] if not w.startswith("-")]
        if refs and refs[0] not in ("FETCH_HEAD",):
            _ref(result, run, f"git checkout {refs[0]}", refs[0], "the checkout keeps whatever was cloned")


def _clone_positional(args: list[str]) -> list[str]:
    """`git clone`'s positional arguments (the URL, the directory): option values skipped."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-b", "--branch", "--depth", "-c", "--config", "-o", "--origin", "--reference", "-j", "--jobs"):
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


def _downloads(result: Audit, run: _Run) -> None:
    checked = bool(_CHECKSUM.search(run.script))
    for i, words in enumerate(run.words):
        head = words[0].rsplit("/", 1)[-1]
        if head not in ("curl", "wget"):
            continue
        urls = [w for w in words if w.startswith(("http://", "https://")) or "://" in w and "$" in w.split("://")[0]]
        piped = i + 2 < len(run.words) and run.words[i + 1] == ["|"] and \
            run.words[i + 2][0].rsplit("/", 1)[-1] in ("sh", "bash", "zsh")
        if piped:
            result.add(run.line, "error", "curl-pipe-shell", f"{head} {' '.join(urls)[:80]} | "
                       f"{run.words[i + 2][0]}: runs a script nobody pinned", "download it, check its sha256, run it")
        elif urls and not checked:
            result.add(run.line, "error", "download-without-checksum", f"{head} {' '.join(urls)[:100]}: no checksum "
                       "is checked", "check the download with sha256sum -c (or make it an asset step)")


def _loops(result: Audit, run: _Run) -> None:
    strict = bool(re.search(r"\bset\s+-[a-z]*e", run.script)) or "pipefail" in run.script
    for loop in _LOOP.finditer(run.script):
        body = loop["body"]
        fails = re.search(r"(\|\||&&|then|;)\s*(\{.*?)?\b(exit\s+[1-9]|false|return\s+[1-9])", body, re.S)
        if re.search(r"&&\s*break\b", body):
            after = loop["after"][:200]
            if not re.search(r"\b(exit\s+[1-9]|false)\b", after) and not re.search(r"\|\|", after[:40]):
                result.add(run.line, "error", "retry-swallows-failure", "a retry loop (`... && break`) that ends "
                           "without failing when every attempt failed: the build goes on without it",
                           "fail after the loop when no attempt succeeded (`|| exit 1` or a check)")
        elif re.search(r"\b(patch|git apply|test|grep|python3? -c)\b", body) and not strict and not fails:
            result.add(run.line, "error", "loop-without-failure", "a loop over patches or checks without `set -e` or "
                       "an explicit failure: a failing iteration is swallowed",
                       "end the body with `|| exit 1`, or `set -e` first")


def print_audit(a: Audit, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"pip installs in {a.path}")
    for col in ("line", "stage", "flags", "requirements"):
        table.add_column(col, overflow="fold")
    for i in a.installs:
        table.add_row(str(i.line), str(i.stage), escape(" ".join(i.flags)), escape(" ".join(i.requirements)))
    console.print(table)
    for f in sorted(a.findings, key=lambda f: (f.line, f.level, f.rule)):
        colour = "red" if f.level == "error" else "yellow"
        console.print(f"  line {f.line}: [{colour}]{f.level}[/{colour}] {f.rule}: {escape(f.message)}"
                      + (f"\n      fix: {escape(f.fix)}" if f.fix else ""))
    console.print(f"{len(a.installs)} pip installs; {a.errors} errors, {len(a.findings) - a.errors} warnings")


def print_replay(replay: dict, console: Console) -> None:
    from rich.markup import escape

    console.print("\n[bold]Replayed as plain pip would run it[/bold] (installs in order)")
    for note in replay.get("notes", ()):
        console.print(f"  [dim]{escape(note)}[/dim]")
    if replay.get("error"):
        console.print(f"  [yellow]could not replay: {escape(replay['error'])}[/yellow]")
        return
    for h in replay["hazards"]:
        console.print(f"  [red]{escape(h['package'])} {escape(h['before'])} → {escape(h['after'])}[/red]: "
                      f"installed by {escape(h['earlier_step'])}, changed by {escape(h['step'])} ({escape(h['cause'])})"
                      + (f" (Dockerfile line {h['dockerfile_line']})" if h.get("dockerfile_line") else ""))
    for h in replay.get("replacements", ()):
        console.print(f"  {escape(h['step'])} (line {h.get('dockerfile_line')}) replaces {escape(h['earlier_step'])}'s "
                      f"{escape(h['package'])} {escape(h['before'])} → {escape(h['after'])}")
    for o in replay.get("overrides", ()):
        console.print(f"  [red]--no-deps {escape(o['package'])} {escape(o['version'])}[/red] (line {o['line']}) "
                      f"is outside {escape(o['required_by'])}'s {escape(o['specifier'])}")
    for e in replay["suppressed"]:
        extra = f" [{e['extra']}]" if e["extra"] else ""
        console.print(f"  --no-deps drops {escape(e['parent'])}{escape(extra)}: {escape(e['requirement'])} "
                      f"({escape(e['detail'])})")
    if replay["unchecked"]:
        console.print(f"  [yellow]{replay['unchecked']} could not be judged[/yellow]")
    if not (replay["hazards"] or replay.get("overrides")):
        console.print("  no moved pin and no --no-deps install outside a declared pin")
