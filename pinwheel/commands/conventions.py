"""The command-line conventions people bring from uv, pip-tools and buildx: `--version`, `-q/-v` and
`--color` on every command, a `help` command, shell completion, no abbreviated options, and "did you
mean" for a mistyped command or option."""
from __future__ import annotations

import argparse
import re
import sys

from .common import EXIT_OK, UsageError, set_color

COLOR_MODES = ("auto", "always", "never")
SHELLS = ("bash", "zsh", "tcsh")


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations (``report --off`` is not ``--offline``), and with the nearest
    command or option named when one is mistyped. Subcommands' parsers are of this class too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        super().error(message + choice_hint(message))


def _near(word: str, choices) -> str | None:
    import difflib  # only a mistyped command or option needs it
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def choice_hint(message: str) -> str:
    """"; did you mean 'report'?" for argparse's invalid choice message, where one choice is near."""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not found:
        return ""
    choices = re.findall(r"'([^']*)'", found.group(2)) or [c.strip() for c in found.group(2).split(",")]
    near = _near(found.group(1), choices)
    return f"; did you mean {near!r}?" if near else ""


def option_hint(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """"; did you mean --offline?" for the first unknown option that is near one of ``parser``'s."""
    known = [o for o in parser._option_string_actions if o.startswith("--")]  # argparse keeps no public list
    for token in unknown:
        if token.startswith("--"):
            near = _near(token.split("=", 1)[0], known)
            if near:
                return f"; did you mean {near}?"
    return ""


def selected_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)command parser ``argv`` reaches: the one whose options a mistyped option is compared with."""
    current = parser
    for token in argv:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and token in subs[0].choices:
            current = subs[0].choices[token]
    return current


class DeprecatedAlias(argparse.Action):
    """An option's old name: it still works, and says the new one on stderr."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stderr.write(f"note: {option_string} is deprecated; it is {self.new} now\n")
        setattr(namespace, self.dest, values)


class _Version(argparse.Action):
    """--version: the installed distribution's version, read only when asked (importlib.metadata loads
    the email package, which nothing else on a plain run needs)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version
        try:
            text = version("pinwheel")
        except PackageNotFoundError:
            text = "unknown (not installed)"
        sys.stdout.write(f"pinwheel {text}\n")
        parser.exit()


def add_common_options(p: argparse.ArgumentParser, default=None) -> None:
    """--version, -q/-v and --color, on the top level (``default``) and on every command (SUPPRESS, so a
    value given before the command stands). A command that has its own -q or -v keeps it."""
    have = p._option_string_actions
    p.add_argument("--version", action=_Version, help="print pinwheel's version and exit")
    if "-q" not in have and "--quiet" not in have:
        p.add_argument("-q", "--quiet", action="store_true", default=default if default is not None else False,
                       help="no progress output (build log, push progress, report status); results and errors "
                            "still print")
    if "-v" not in have and "--verbose" not in have:
        p.add_argument("-v", "--verbose", action="store_true", default=default if default is not None else False,
                       help="more detail where the command has it (report, inspect: every package)")
    p.add_argument("--color", choices=COLOR_MODES, default=default if default is not None else "auto",
                   help="colour the output: auto (on a terminal, unless NO_COLOR is set), always, never")


def apply_common_options(args: argparse.Namespace) -> None:
    set_color(getattr(args, "color", "auto"))


def add_help_parsers(sub, root: argparse.ArgumentParser) -> None:
    hp = sub.add_parser("help", help="show the help of a command (`pinwheel help lock`)",
                        description="Print the help of COMMAND (and its subcommand, e.g. `help asset add`), or of "
                                    "pinwheel itself. Exit 0, or 2 for a command that does not exist.")
    hp.add_argument("topic", nargs="*", metavar="COMMAND")
    hp.set_defaults(func=lambda args: cmd_help(root, args.topic), needs_manifest=False)

    co = sub.add_parser("completion", help="print a shell completion script (bash, zsh, tcsh)",
                        description="Print the completion script for SHELL, made by shtab from this command line. "
                                    "bash: `pinwheel completion bash > ~/.local/share/bash-completion/completions/"
                                    "pinwheel`; zsh: write it as `_pinwheel` into a directory on $fpath. Exit 0.")
    co.add_argument("shell", choices=SHELLS)
    co.set_defaults(func=lambda args: cmd_completion(root, args.shell), needs_manifest=False)


def cmd_help(root: argparse.ArgumentParser, topic: list[str]) -> int:
    parser = root
    for word in topic:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            near = _near(word, subs[0].choices if subs else [])
            raise UsageError(f"help {' '.join(topic)}: no command {word!r}"
                             + (f"; did you mean {near!r}?" if near else "; `pinwheel help` lists them"))
        parser = subs[0].choices[word]
    sys.stdout.write(parser.format_help())
    return EXIT_OK


def cmd_completion(root: argparse.ArgumentParser, shell: str) -> int:
    import shtab  # only this command needs it

    sys.stdout.write(shtab.complete(root, shell=shell) + "\n")
    return EXIT_OK
