"""Each command's --help against docs/commands.md's command table: the same options, the same exit codes,
and every command in the table. The options every command has (--manifest, --version, -q/-v, --color)
and the engine options are described once, below the table."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from pinwheel import cli

ROOT = Path(__file__).resolve().parents[2]
COMMON = {"-h", "--help", "--manifest", "--version", "-q", "--quiet", "-v", "--verbose", "--color",
          "--builder", "--engine-host", "--engine-context"}


def parser() -> argparse.ArgumentParser:
    p = cli.build_parser()
    cli._global_options_after_subcommand(p)  # as main() does
    return p


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def readme_rows() -> dict[str, tuple[str, str]]:
    """command -> (its synopsis, its exit codes column), from docs/commands.md's command table."""
    rows = {}
    for line in (ROOT / "docs" / "commands.md").read_text().splitlines():
        found = re.match(r"^\| `([a-z]+)([^`]*)` \| (.*) \|\s*([^|]*?)\s*\|$", line.replace("\\|", "/"))
        if found:
            rows[found.group(1)] = (found.group(2), found.group(4))
    return rows


def options(p: argparse.ArgumentParser) -> set[str]:
    shown = {o for a in p._actions if a.help != argparse.SUPPRESS for o in a.option_strings}
    return shown - COMMON


def codes(text: str) -> set[int]:
    """The exit codes a text gives: each number that starts an item of an "Exit ..." sentence."""
    found: set[int] = set()
    for sentence in re.findall(r"(?:Exit|exit codes?:?)\s+(\d[^.]*)", text):
        found |= {int(n) for n in re.findall(r"(?:^|,\s*|\s)(\d)\s+[a-z(]", sentence)}
    return found


def test_every_command_is_in_the_readme_table():
    assert sorted(set(commands()) - set(readme_rows())) == []
    assert sorted(set(readme_rows()) - set(commands())) == []


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_readme_synopsis_names_the_options_of_the_command(name):
    synopsis = readme_rows()[name][0]
    written = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", synopsis)) - COMMON
    if written & {"--variant", "--cuda"}:  # one choice, written either way: --cuda 13 or --variant cu130
        written |= {"--variant", "--cuda"}
    assert sorted(written - options(commands()[name])) == [], "docs/commands.md names options the command lacks"
    assert sorted(options(commands()[name]) - written) == [], "the command has options docs/commands.md leaves out"


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_exit_codes_in_help_are_the_readmes(name):
    help_codes = codes(commands()[name].format_help().replace("\n", " "))
    table = {int(n) for n in re.findall(r"(?:^|,\s*)(\d)\s", readme_rows()[name][1].strip())}
    assert table <= help_codes, f"{name} --help does not give exit code(s) {sorted(table - help_codes)}"
    assert help_codes - {0, 2} <= table, f"docs/commands.md does not give {name}'s exit code(s) {sorted(help_codes - table - {0, 2})}"


@pytest.mark.parametrize("name", sorted(commands()))
def test_help_of_every_command_exits_0_and_help_command_prints_the_same(name, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([name, "--help"])
    assert info.value.code == 0
    direct = capsys.readouterr().out
    assert cli.main(["help", name]) == 0
    assert capsys.readouterr().out == direct


def test_commands_that_use_no_engine_list_no_engine_options():
    for name in ("render", "report", "lock", "bump", "init", "import", "audit", "help", "completion"):
        assert "--engine-host" not in commands()[name].format_help(), name
    assert "--engine-host" in commands()["build"].format_help()
