"""Shell commands of a RUN that no package kind expresses, as run steps (a make build, a binary download, a
symlink, update-alternatives, a locale): the kind's builder (pinwheel.steps.run) writes each entry.

A RUN that installs no package becomes one run step with its own script, as written: its if/else branches
and loops run as the Dockerfile runs them, the ARGs it reads passed in `env` at their defaults (empty where
the file gives none, as a build without --build-arg has them). A RUN that also installs packages keeps
those in their own kinds; its other commands are rebuilt, one a line, into a run step of their gate. Each
download becomes a `downloads:` entry (a TODO sha256, the `dest` the file was written to) and leaves the
script. What cannot be expressed so stays listed, with why: a download whose URL the build computes, a
pipe into a shell, a file from the build context, commands that follow something not expressed.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from .. import dockerfiles as df
from ..steps import ADOPT_SHELL, kind_adopting

AUTOMATIC_ARGS = {"TARGETARCH": "amd64", "TARGETPLATFORM": "linux/amd64", "TARGETOS": "linux",
                  "BUILDARCH": "amd64", "BUILDPLATFORM": "linux/amd64"}  # the variant's platform is x86_64
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./*?~^-]+$")
_REF = re.compile(r"\$\{?(?P<name>[A-Za-z_][A-Za-z0-9_]*)")
_ASSIGN = re.compile(r"(?:^|[\s;&|(])(?:export\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=")
_LEAD = re.compile(r"^(cd|set|ulimit|export)$|^[A-Za-z_][A-Za-z0-9_]*=")  # what a rebuilt script keeps before
_WHEEL_GUARD = re.compile(r"\bls\s+\S+\.whl")  # `if ls /tmp/wheels/x-*.whl ...; then`
_END = re.compile(r"(?<!\\)\n|&&|\|\||;|\|")


@dataclass
class Fetch:
    """A download of a file that is not a wheel: where it was written (None: unknown, or piped)."""

    pos: int
    url: str  # ARG defaults filled in; may still hold `$` (a value the build computes)
    raw_url: str  # as written
    dest: str | None
    command: df.Command
    used: bool = False  # taken by another kind (a .deb, a signing key)


@dataclass
class ShellCommand:
    pos: int
    command: df.Command
    gate: str | None
    substantive: bool  # a command of its own (make, ln); else kept only before one (cd, export, X=...)
    why_listed: str = "no step kind runs this"


@dataclass
class Shell:
    """What a RUN left to the run kind."""

    commands: list[ShellCommand] = field(default_factory=list)
    fetches: list[Fetch] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # why no run step may take this RUN's commands


def fetch_of(words: list[str], raw: tuple[str, ...], cwd: str, pos: int, cmd: df.Command) -> list[Fetch]:
    """curl/wget's downloads: the URL and the file it is written to (-o/-O, else wget's own name)."""
    head = words[0].rsplit("/", 1)[-1]
    out_file = next((words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--output", "-O")
                     and not (head == "curl" and w == "-O")), None)
    found = []
    for i, w in enumerate(words):
        if not w.startswith(("http://", "https://")):
            continue
        name = out_file or (w.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
                            if head == "wget" or "-O" in words or "--remote-name" in words else None)
        dest = None
        if name and cmd.after != "|":
            dest = name if name.startswith("/") else f"{cwd.rstrip('/')}/{name}"
        found.append(Fetch(pos, w, raw[i] if i < len(raw) else w, dest, cmd))
    return found


def quote(word: str) -> str:
    """A shell word: as it is where safe, in double quotes where it expands something, else single quotes."""
    if _SAFE.match(word):
        return word
    if "$" in word:
        return '"' + re.sub(r'(["\\`])', r"\\\1", word) + '"'
    return shlex.quote(word)


def arg_env(text: str, args: dict[str, str | None]) -> tuple[dict[str, str], list[str]]:
    """The ARGs a script reads, at the values a default build gives them (each name the script does not set
    itself, in the order it first appears): (env, the names with no value, which the script sets empty)."""
    assigned = {m["name"] for m in _ASSIGN.finditer(text)}
    env: dict[str, str] = {}
    empty: list[str] = []
    for m in _REF.finditer(text):
        name = m["name"]
        if name in assigned or name in env or name in empty:
            continue
        if args.get(name):
            env[name] = str(args[name])
        elif name in args:
            empty.append(name)
        elif name in AUTOMATIC_ARGS:
            env[name] = AUTOMATIC_ARGS[name]
    return env, empty


def _with_args(script: str, args: dict[str, str | None]) -> tuple[str, dict[str, str]]:
    """The script and its env: an ARG without a value is set empty in its first lines, as a build without
    --build-arg leaves it (the run kind runs bash with `set -u`)."""
    env, empty = arg_env(script, args)
    head = "".join(f'{name}=""  # ARG {name}: no default in the Dockerfile\n' for name in empty)
    return head + script, env


def _without_downloads(script: str, fetches: list[Fetch]) -> str | None:
    """The script with each download command replaced by `true` (the run kind downloads and checks the file
    before the script runs); None where a download's text cannot be found."""
    for f in fetches:
        at = script.find(f.raw_url)
        if at < 0:
            return None
        starts = [m.start() for m in re.finditer(r"\b(?:curl|wget)\b", script[:at])]
        if not starts or _END.search(script, starts[-1], at):
            return None
        end = _END.search(script, at + len(f.raw_url))
        script = script[:starts[-1]] + "true" + (" " + script[end.start():] if end else "")
    return script


def whole_run(ins: df.Instruction, shell: Shell, args: dict[str, str | None], copied: list[str], cwd: str
              ) -> tuple[dict | None, list, str | None]:
    """The RUN as one run step with its own script: (entry, its TODOs, None), or (None, [], why not)."""
    problem = _problem(ins, shell, copied, cwd)
    if problem:
        return None, [], problem
    script = _without_downloads(ins.script, shell.fetches)
    if script is None:
        return None, [], "a download whose command import cannot take out of the script"
    cache = [f.split("target=", 1)[1].split(",", 1)[0] for f in ins.flags if "type=cache" in f and "target=" in f]
    first = next((c.command.words[0] for c in shell.commands if c.substantive),
                 next((w for c in df.commands(ins.script) for w in c.words[:1]), "script"))
    script, env = _with_args(script, args)
    entry, todos = kind_adopting(ADOPT_SHELL).adopted_entry(_name(first), script, "TODO: why", [(f.url, f.dest) for f in shell.fetches],
                                          env, [c for c in cache if kind_adopting(ADOPT_SHELL).expressible_path(c)], None, "0" * 64)
    return entry, todos, None


def rebuilt(shell: Shell, args: dict[str, str | None], copied: list[str], cwd: str) -> tuple[list[tuple[int, dict, list]], list[str]]:
    """The substantive commands of a RUN that installs packages too, per gate, each group rebuilt a command a
    line (with the cd, export and assignments before it): [(position, entry, TODOs)], and what stays listed."""
    listed: list[str] = []
    groups: dict[str | None, list[ShellCommand]] = {}
    for c in shell.commands:
        groups.setdefault(c.gate, []).append(c)
    out = []
    for gate, cmds in groups.items():
        last = max((i for i, c in enumerate(cmds) if c.substantive), default=-1)
        if last < 0:
            continue
        kept = [c for c in cmds[:last + 1] if c.substantive or _LEAD.match(c.command.words[0])]
        texts = [" ".join(c.command.words)[:100] for c in kept if c.substantive]
        piped = any(c.command.after in ("|", "||") for c in kept)
        guarded = any(_WHEEL_GUARD.search(cond) for c in kept for cond, _ in c.command.conds)
        reads = next((p for c in kept for p in _context_reads(c.command.words, copied, cwd)), None)
        if piped or reads or guarded or shell.blocked:
            why = shell.blocked[0] if shell.blocked else (f"reads {reads}, a file the Dockerfile COPYs from its "
                                                          "build context (a run step has only its downloads)"
                                                          if reads else "runs only where a local wheel is present"
                                                          if guarded else "a pipe or `||` between commands")
            listed += [f"`{t}`: {why}" for t in texts]
            continue
        script, env = _with_args("\n".join(" ".join(quote(w) for w in c.command.words) for c in kept), args)
        first = next(c for c in kept if c.substantive).command.words[0]
        entry, todos = kind_adopting(ADOPT_SHELL).adopted_entry(_name(first), script, "TODO: why", [], env, [], gate, "0" * 64)
        out.append((kept[0].pos, entry, todos))
    return out, listed


def _problem(ins: df.Instruction, shell: Shell, copied: list[str], cwd: str) -> str | None:
    if shell.blocked:
        return shell.blocked[0]
    for f in ins.flags:
        if "--mount" in f and "type=cache" not in f:
            return f"its `{f[:60]}` mounts what a run step does not have (it has its downloads)"
    for f in shell.fetches:
        if f.used:
            return f"downloads {f.url[:80]} for the apt step, next to commands of its own"
        if "$" in f.url or not kind_adopting(ADOPT_SHELL).expressible_url(f.url):
            return f"downloads {f.url[:80]}, a URL the build computes or a run step cannot fetch"
        if f.dest is None or not kind_adopting(ADOPT_SHELL).expressible_path(f.dest):
            return f"downloads {f.url[:80]} into a pipe or a path import cannot follow"
    reads = next((p for c in shell.commands for p in _context_reads(c.command.words, copied, cwd)), None) or \
        next((c.rstrip("/") for c in copied if c.rstrip("/") in ins.script), None)
    if reads:
        return f"reads {reads}, a file the Dockerfile COPYs from its build context (a run step has only its downloads)"
    return None


def _context_reads(words, copied: list[str], cwd: str = "/") -> list[str]:
    """The words that name a file copied in from the build context (a relative one read from ``cwd``)."""
    paths = [(w, w if w.startswith("/") else f"{cwd.rstrip('/')}/{w.removeprefix('./')}") for w in words
             if not w.startswith("-") and (w.startswith("/") or "/" in w or "." in w)]  # a path, not a command
    return [w for w, p in paths for c in copied if p == c or (c.endswith("/") and p.startswith(c))]


def _name(first: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", first.rsplit("/", 1)[-1].lower()).strip("-")[:30] or "script"
    return f"run-{base}"
