"""Audit a hand-written Dockerfile: every pip install per RUN, and the patterns that break images.

The file is read with BuildKit's own Dockerfile parser (the `dockerfile` package),
so continuation lines, JSON-form commands and parser directives are what the
engine sees; each RUN's shell is then split with shlex. Findings carry the line
of the instruction they are in.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

import dockerfile
from rich.console import Console
from rich.markup import escape
from rich.table import Table

SCHEMA = "pinwheel.audit/1"
_SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", "\n"}
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SECRET_ARG = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.I)
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_CHECKS = ("patch", "test", "[", "grep", "python", "python3", "pip", "git", "ls", "cmp", "diff")


@dataclass(frozen=True)
class Finding:
    line: int
    level: str  # error | warning
    rule: str
    message: str


@dataclass
class PipInstall:
    line: int
    stage: int
    command: str
    flags: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)


@dataclass
class Audit:
    path: str
    installs: list[PipInstall] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.level == "error")

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "path": self.path, "installs": [asdict(i) for i in self.installs],
                "findings": [asdict(f) for f in self.findings],
                "summary": {"installs": len(self.installs), "errors": self.errors,
                            "warnings": len(self.findings) - self.errors}}


def _segments(script: str) -> list[list[str]]:
    """The simple commands of a shell script, split at && || ; | and newlines (quotes respected)."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    out: list[list[str]] = [[]]
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        tokens = script.split()
    for tok in tokens:
        if tok in _SEPARATORS or set(tok) <= set(";&|()"):
            out.append([tok])  # keep the operator as its own segment, so `|| true` is visible
            out.append([])
        elif not out[-1] and tok in _KEYWORDS:
            continue  # `if ls x; then pip install x` holds the commands `ls x` and `pip install x`
        else:
            out[-1].append(tok)
    return [s for s in out if s]


def _pip_install(words: list[str]) -> list[str] | None:
    """The arguments after `install` when the command is pip install (pip, pip3, python -m pip, uv pip)."""
    w = [x for x in words if "=" not in x or not re.match(r"^[A-Z_][A-Z0-9_]*=", x)]  # drop VAR=value prefixes
    for i, tok in enumerate(w):
        base = tok.rsplit("/", 1)[-1]
        if base in ("pip", "pip3") or re.fullmatch(r"pip3\.\d+", base):
            rest = w[i + 1:]
        elif base.startswith("python") and w[i + 1:i + 3] == ["-m", "pip"]:
            rest = w[i + 3:]
        elif base == "uv" and w[i + 1:i + 2] == ["pip"]:
            rest = w[i + 2:]
        else:
            continue
        return rest[1:] if rest[:1] == ["install"] else None
    return None


_VALUE_FLAGS = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
                "-f", "--find-links", "--target", "-t", "--prefix", "--root", "--trusted-host", "--python"}


def parse_dockerfile(path: Path) -> tuple:
    """The file's instructions as BuildKit parses them; ValueError (with the reason) when it is not a Dockerfile."""
    try:
        Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text file (byte {exc.start} is not UTF-8)") from None
    try:
        commands = dockerfile.parse_file(str(path))
    except dockerfile.GoParseError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not any(c.cmd == "FROM" for c in commands):
        raise ValueError(f"{path}: not a Dockerfile (no FROM instruction)")
    return commands


def audit(path: Path) -> Audit:
    result = Audit(str(path))
    commands = parse_dockerfile(path)
    args: dict[str, str | None] = {}
    stage = -1
    for cmd in commands:
        if cmd.cmd == "FROM":
            stage += 1
        elif cmd.cmd == "ARG":
            for value in cmd.value:
                name, eq, default = value.partition("=")
                args[name] = default if eq else None
                if _SECRET_ARG.search(name):
                    result.findings.append(Finding(cmd.start_line, "error", "secret-build-arg",
                                                   f"ARG {name} looks like a secret: build args land in "
                                                   f"`docker history`; use RUN --mount=type=secret"))
        elif cmd.cmd == "RUN":
            _audit_run(result, cmd, stage, args)
    return result


def _audit_run(result: Audit, cmd, stage: int, args: dict[str, str | None]) -> None:
    script = " ".join(cmd.value)
    segments = _segments(script)
    line = cmd.start_line
    strict = bool(re.search(r"\bset\s+-[a-z]*e", script)) or "pipefail" in script
    guarded_globs = set()
    for i, words in enumerate(segments):
        if words[0] in ("ls", "test", "[", "compgen") or words[:1] == ["set"] and "--" in words:
            guarded_globs.update(w for w in words if "*" in w or "?" in w)
        if words == ["||"] and i + 1 < len(segments) and segments[i + 1][:1] in (["true"], [":"]):
            before = segments[i - 1] if i else []
            if before and before[0].rsplit("/", 1)[-1] in _CHECKS:
                result.findings.append(Finding(line, "error", "check-or-true",
                                               f"`{' '.join(before)[:80]} || true` turns a failed check into success"))
        install = _pip_install(words)
        if install is None:
            continue
        pip = PipInstall(line, stage, " ".join(words)[:300])
        skip_next = False
        for tok in install:
            if skip_next:
                pip.flags[-1] += f" {tok}"
                skip_next = False
            elif tok.startswith("-"):
                pip.flags.append(tok)
                skip_next = tok in _VALUE_FLAGS
            else:
                pip.requirements.append(tok)
        result.installs.append(pip)
        _judge_install(result, pip, guarded_globs, args)
    loop = re.search(r"\bfor\b.+?\bdo\b(?P<body>.+?)\bdone\b", script, re.S)
    if loop and re.search(r"\b(patch|git apply|test|grep|python3? -c)\b", loop["body"]) and not strict \
            and not re.search(r"\|\|\s*(exit\s+[1-9]|false|return\s+[1-9])", loop["body"]):
        result.findings.append(Finding(line, "error", "loop-without-failure",
                                       "a loop over patches or checks without `set -e` or an explicit failure: "
                                       "a failing iteration is swallowed"))


def _judge_install(result: Audit, pip: PipInstall, guarded: set[str], args: dict[str, str | None]) -> None:
    line = pip.line
    if "--force-reinstall" in pip.flags:
        result.findings.append(Finding(line, "warning", "force-reinstall",
                                       "--force-reinstall replaces what earlier layers installed, deps included"))
    for req in pip.requirements:
        if req.endswith(".whl") and ("*" in req or "?" in req) and req not in guarded:
            result.findings.append(Finding(line, "error", "unguarded-wheel-glob",
                                           f"{req}: no existence guard; a missing wheel fails the build, or the "
                                           f"literal glob reaches pip"))
        elif req.startswith("git+") or "git+" in req:
            _judge_git(result, line, req, args)
        elif req.endswith((".whl", ".tar.gz", ".zip")) or req.startswith((".", "/", "$")):
            continue
        elif "==" not in req and "@" not in req:
            loose = any(op in req for op in (">", "<", "~=", "!="))
            result.findings.append(Finding(line, "warning", "version-range" if loose else "unpinned",
                                           f"{req}: {'a version range' if loose else 'no version'}; "
                                           f"the image changes with the index"))


def _judge_git(result: Audit, line: int, req: str, args: dict[str, str | None]) -> None:
    url = req.split("git+", 1)[1]
    ref = url.rsplit("@", 1)[1].split("#", 1)[0] if "@" in url.split("//", 1)[-1] else ""
    arg = re.fullmatch(r"\$\{?(\w+)\}?", ref or "")
    if arg:
        default = args.get(arg.group(1))
        if not default:
            result.findings.append(Finding(line, "error", "empty-commit-arg",
                                           f"{req}: build arg {arg.group(1)} has no default, so the ref can be empty "
                                           f"(pip then takes the default branch)"))
            return
        ref = default
    if not ref:
        result.findings.append(Finding(line, "error", "git-without-commit", f"{req}: no commit; a layer cache serves "
                                                                             f"whatever the branch was once"))
    elif not _COMMIT.match(ref):
        result.findings.append(Finding(line, "error", "git-branch", f"{req}: @{ref} is a branch or tag, not a commit"))


def print_audit(a: Audit, console: Console) -> None:
    table = Table(title=f"pip installs in {a.path}")
    for col in ("line", "stage", "flags", "requirements"):
        table.add_column(col, overflow="fold")
    for i in a.installs:
        table.add_row(str(i.line), str(i.stage), escape(" ".join(i.flags)), escape(" ".join(i.requirements)))
    console.print(table)
    for f in sorted(a.findings, key=lambda f: (f.line, f.level)):
        colour = "red" if f.level == "error" else "yellow"
        console.print(f"  line {f.line}: [{colour}]{f.level}[/{colour}] {f.rule}: {escape(f.message)}")
    console.print(f"{len(a.installs)} pip installs; {a.errors} errors, {len(a.findings) - a.errors} warnings")


def print_replay(replay: dict, console: Console) -> None:
    console.print("\n[bold]Replayed as plain pip would run it[/bold] (pinned installs, in order)")
    if replay.get("error"):
        console.print(f"  [yellow]could not replay: {escape(replay['error'])}[/yellow]")
        return
    for h in replay["hazards"]:
        console.print(f"  [red]{escape(h['package'])} {escape(h['before'])} → {escape(h['after'])}[/red]: "
                      f"installed by {escape(h['earlier_step'])}, changed by {escape(h['step'])} ({escape(h['cause'])})")
    for e in replay["suppressed"]:
        extra = f" [{e['extra']}]" if e["extra"] else ""
        console.print(f"  --no-deps drops {escape(e['parent'])}{escape(extra)}: {escape(e['requirement'])} "
                      f"({escape(e['detail'])})")
    if replay["unchecked"]:
        console.print(f"  [yellow]{replay['unchecked']} could not be judged[/yellow]")
