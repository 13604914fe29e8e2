"""A hand-written Dockerfile, read as the engine reads it: what `audit` and `import` share.

- the file is read within bounds (a regular file, at most MAX_BYTES and MAX_LINES),
  then parsed by BuildKit's own parser (the `dockerfile` package): continuation
  lines, JSON forms, heredocs and parser directives are what the engine sees;
- a RUN's shell text is its heredoc body where it has one, else its command;
- its simple commands are split with shlex at && || ; | and newlines;
- a pip install's arguments are parsed by pip's own option parser, so a flag
  pip refuses (`-no-build-isolation`) is found as pip would refuse it.
"""
from __future__ import annotations

import copy
import functools
import re
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

import dockerfile

# A real training image's Dockerfile is a few hundred lines; these bounds keep a
# hostile one from holding audit or import for minutes.
MAX_BYTES = 2 * 1024 * 1024
MAX_LINES = 20_000

SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", "\n"}
_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "for", "case", "esac"}
_ARG_REF = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-+])?(?P<word>[^}]*)\}|"
                      r"(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")


@dataclass(frozen=True)
class Instruction:
    cmd: str  # FROM, RUN, ENV, ... (upper case)
    line: int
    end_line: int
    original: str
    value: tuple[str, ...]
    flags: tuple[str, ...]
    heredocs: tuple[str, ...] = ()  # their bodies, in order

    @property
    def script(self) -> str:
        """A RUN's shell text: its heredoc body (the script BuildKit runs), else the command."""
        if self.heredocs and self.value and self.value[0].startswith("<<"):
            return "\n".join(self.heredocs)
        return " ".join(self.value)

    @property
    def first_line(self) -> str:
        """The instruction's first line, for messages."""
        return self.original.splitlines()[0] if self.original else self.cmd


@dataclass
class Stage:
    """One FROM: its base as written, the base followed through earlier stage names, and its name."""

    index: int
    line: int
    base: str
    image: str  # a real image reference (stage names followed), ARG defaults filled in
    name: str | None


class DockerfileError(ValueError):
    """The file cannot be read as a Dockerfile; the message names the file (and the line where known)."""


def read(path: Path) -> list[Instruction]:
    """The file's instructions as BuildKit parses them, within bounds; DockerfileError otherwise."""
    text = _bounded_text(Path(path))
    try:
        commands = dockerfile.parse_string(text)
    except dockerfile.GoParseError as exc:
        raise DockerfileError(f"{path}: {exc}") from None
    out = [Instruction(c.cmd.upper(), c.start_line, c.end_line, c.original, tuple(c.value), tuple(c.flags),
                       tuple(h.content for h in c.heredocs)) for c in commands]
    if not any(c.cmd == "FROM" for c in out):
        raise DockerfileError(f"{path}: not a Dockerfile (no FROM instruction)")
    return out


def _bounded_text(path: Path) -> str:
    try:
        st = path.stat()
    except OSError as exc:
        raise DockerfileError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DockerfileError(f"{path}: not a regular file")
    if st.st_size > MAX_BYTES:
        raise DockerfileError(f"{path}: {st.st_size} bytes; a Dockerfile may be at most {MAX_BYTES >> 20} MiB here")
    with path.open("rb") as fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise DockerfileError(f"{path}: over {MAX_BYTES >> 20} MiB; a Dockerfile may be at most that here")
    lines = data.count(b"\n") + 1
    if lines > MAX_LINES:
        raise DockerfileError(f"{path}: {lines} lines; a Dockerfile may have at most {MAX_LINES} here")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DockerfileError(f"{path}:{line}: not a text file (byte {exc.start} is not UTF-8)") from None


def substitute(text: str, args: dict[str, str | None]) -> tuple[str, list[str]]:
    """Text with each reference to a known ARG that has a value replaced by it; the names replaced.

    `${X:-word}` takes word where X is unset or empty, as the shell and BuildKit do. A
    reference to an ARG without a value, or to a shell variable, is left as written."""
    used: list[str] = []

    def value(m: re.Match) -> str:
        name = m["braced"] or m["bare"]
        known = args.get(name)
        if m["op"] in (":-", "-") and not known:
            used.append(name)
            return m["word"]
        if m["op"] or known is None or (name not in args):
            return m.group(0)
        used.append(name)
        return known

    return _ARG_REF.sub(value, text), used


def stages(instructions: list[Instruction]) -> list[Stage]:
    """Every FROM, with its base followed through stage names to an image, ARG defaults filled in."""
    global_args: dict[str, str | None] = {}
    out: list[Stage] = []
    by_name: dict[str, Stage] = {}
    for ins in instructions:
        if ins.cmd == "ARG" and not out:
            global_args.update(arg_values(ins))
        elif ins.cmd == "FROM":
            words = [w for w in ins.value if not w.startswith("--")]
            base = words[0] if words else ""
            name = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            ref, _ = substitute(base, global_args)
            image = by_name[ref.lower()].image if ref.lower() in by_name else ref
            stage = Stage(len(out), ins.line, base, image, name)
            out.append(stage)
            if name:
                by_name[name] = stage
    return out


def arg_values(ins: Instruction) -> dict[str, str | None]:
    """An ARG instruction's names and defaults (None: declared without a default)."""
    out: dict[str, str | None] = {}
    for value in ins.value:
        name, eq, default = value.partition("=")
        out[name] = _unquote(default) if eq else None
    return out


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


_REDIRECT = re.compile(r"(?<=\s)\d*>&\d+|(?<=\s)\d*>>?\s*/dev/null|(?<=\s)&>\s*/dev/null")


def _tokens(script: str) -> list[str]:
    """Shell words and operators; a newline is an operator (heredoc scripts are one command a line).

    A command substitution `$(...)` stays one word; redirections to /dev/null and `>&2` are dropped."""
    subs: list[str] = []

    def hold(m: re.Match) -> str:
        subs.append(m.group(0))
        return f"\x00{len(subs) - 1}\x00"

    text = _REDIRECT.sub(" ", _hold_substitutions(script.replace("\\\n", " "), hold))
    tokens = _split(text)
    return [re.sub(r"\x00(\d+)\x00", lambda m: subs[int(m.group(1))], t) for t in tokens]


def _hold_substitutions(text: str, hold) -> str:
    """Each `$(...)` (parentheses balanced, quotes inside respected) replaced by what hold returns for it."""
    out, i = [], 0
    while True:
        start = text.find("$(", i)
        if start < 0:
            return "".join(out) + text[i:]
        depth, j, quote = 0, start + 1, ""
        while j < len(text):
            c = text[j]
            if quote:
                quote = "" if c == quote else quote
            elif c in "'\"":
                quote = c
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out.append(text[i:start])
        out.append(hold(re.match(r"(?s).*", text[start:j + 1])))
        i = j + 1


def _split(script: str) -> list[str]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        tokens = script.split()
    out = []
    for tok in tokens:
        if tok and set(tok) <= set(";&|()\n"):
            tok = tok.replace("\n", "") or ";"
        out.append(tok)
    return out


def segments(script: str) -> list[list[str]]:
    """The simple commands of a shell script, split at && || ; | and newlines (quotes respected).

    Each operator is kept as a segment of its own, so `|| true` stays visible."""
    out: list[list[str]] = [[]]
    for tok in _tokens(script):
        if tok in SEPARATORS or set(tok) <= set(";&|()"):
            out.append([tok])
            out.append([])
        elif not out[-1] and tok in _KEYWORDS:
            continue  # `if ls x; then pip install x` holds the commands `ls x` and `pip install x`
        else:
            out[-1].append(tok)
    return [s for s in out if s]


@dataclass(frozen=True)
class Command:
    """A simple command with the conditions it runs under: (condition, True in its then-branch / False in
    its else-branch); a loop or a case is a condition too ("for p in ...", "case ...")."""

    words: tuple[str, ...]
    conds: tuple[tuple[str, bool], ...]
    after: str = ""  # the operator that follows it (`|`, `||`, `&&`, `;`), "" at the end or before a keyword


def commands(script: str) -> list[Command]:
    """The script's simple commands, each with the if/else branches, loops and cases it sits in."""
    out: list[Command] = []
    stack: list[list] = []  # [condition words, branch, collecting the condition]
    words: list[str] = []

    def flush(after: str = "") -> None:
        if words:
            if stack and stack[-1][2]:
                stack[-1][0].extend(words)
            else:
                out.append(Command(tuple(words), tuple((" ".join(f[0]), f[1]) for f in stack), after))
            words.clear()

    for tok in _tokens(script):
        if tok in SEPARATORS or set(tok) <= set(";&|()"):
            flush(tok)
            if stack and stack[-1][2] and tok in ("&&", "||"):
                stack[-1][0].append(tok)
            continue
        if not words and tok in ("if", "for", "while", "until", "case"):
            stack.append([[tok] if tok != "if" else [], True, True])
        elif not words and tok in ("then", "do") and stack:
            flush()
            stack[-1][2] = False
        elif not words and tok == "else" and stack:
            stack[-1][1] = False
        elif not words and tok == "elif" and stack:
            stack[-1] = [["elif"], True, True]
        elif not words and tok in ("fi", "done", "esac") and stack:
            stack.pop()
        elif not words and tok in ("{", "}", "!"):
            continue
        elif tok == "in" and stack and stack[-1][2] and stack[-1][0][:1] == ["case"]:
            stack[-1][0].append(tok)
            stack[-1][2] = False
        else:
            words.append(tok)
    flush()
    return out


def pip_command(words: list[str]) -> tuple[str, list[str]] | None:
    """(subcommand, its arguments) when the command runs pip (pip, pip3, python -m pip, uv pip), else None.

    pip's general options before the subcommand (`pip -v install`) are skipped, as pip skips them."""
    w = list(words)
    while w and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w[0]):
        w.pop(0)  # VAR=value prefixes set the command's environment
    for i, tok in enumerate(w):
        base = tok.rsplit("/", 1)[-1]
        if base in ("pip", "pip3") or re.fullmatch(r"pip3\.\d+", base):
            rest = w[i + 1:]
        elif re.fullmatch(r"python(\d(\.\d+)?)?", base) and w[i + 1:i + 3] == ["-m", "pip"]:
            rest = w[i + 3:]
        elif base == "uv" and w[i + 1:i + 2] == ["pip"]:
            rest = w[i + 2:]
        else:
            continue
        while rest and rest[0].startswith("-"):
            rest = rest[1:]
        return (rest[0], rest[1:]) if rest else None
    return None


@dataclass(frozen=True)
class PipInstall:
    """A pip install's arguments as pip's own parser reads them."""

    requirements: tuple[str, ...]  # positional: names, specifiers, paths, URLs
    editables: tuple[str, ...]
    requirement_files: tuple[str, ...]
    constraint_files: tuple[str, ...]
    no_deps: bool
    no_build_isolation: bool
    force_reinstall: bool
    upgrade: bool
    index_url: str | None
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    verbose: bool
    config_settings: tuple[tuple[str, str], ...] = ()  # -C / --config-settings, in order


def requirements_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each line of a requirements file that says something: blank lines and comments
    left out (a ` #` comment after a requirement too), options such as `-c` or `--prefer-binary` kept as written."""
    found = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            found.append((n, line))
    return found


def parse_pip_install(args: list[str]) -> PipInstall | str:
    """The install's arguments, or pip's own error message for them ("no such option: -n")."""
    parser, defaults = _install_parser()
    try:
        options, positional = parser.parse_args(list(args), copy.deepcopy(defaults))
    except _PipUsage as exc:
        return str(exc)
    index_url = options.index_url if options.index_url != defaults.index_url else None

    def given(name: str) -> tuple[str, ...]:  # what the command line says, not the machine's own pip config
        return tuple(x for x in getattr(options, name) if x not in getattr(defaults, name))

    return PipInstall(tuple(positional), given("editables"), given("requirements"), given("constraints"), bool(options.ignore_dependencies), not options.build_isolation,
                      bool(options.force_reinstall), bool(options.upgrade), index_url,
                      given("extra_index_urls"), given("find_links"), options.verbose > 0,
                      _settings(options.config_settings))


def _settings(found) -> tuple[tuple[str, str], ...]:
    """pip's config settings dict (a key given twice holds a list) as (key, value) pairs."""
    out: list[tuple[str, str]] = []
    for key, value in (found or {}).items():
        out += [(key, v) for v in (value if isinstance(value, list) else [value])]
    return tuple(out)


class _PipUsage(Exception):
    pass


@functools.cache
def _install_parser():
    """pip's install parser and its defaults; built on first use (pip's internals are slow to import)."""
    from pip._internal.commands import create_command  # only a Dockerfile with a pip install pays for it

    parser = create_command("install", isolated=True).parser

    def refuse(message: str) -> None:
        raise _PipUsage(message)

    parser.error = refuse  # optparse would print the usage and exit
    return parser, parser.get_default_values()


def pip_flags(args: list[str]) -> list[str]:
    """The options of a pip install, each with its value ("-r /tmp/req.txt"), as pip's parser reads them."""
    parser, _ = _install_parser()
    out: list[str] = []
    take = False
    for tok in args:
        if take:
            out[-1] += f" {tok}"
            take = False
        elif tok.startswith("-"):
            out.append(tok)
            opt = parser._long_opt.get(tok) if tok.startswith("--") else parser._short_opt.get(tok[:2])
            take = bool(opt and opt.takes_value() and "=" not in tok and (tok.startswith("--") or len(tok) == 2))
    return out
