"""The conventions of uv, pip-tools and buildx: --version, -q/-v and --color on every command, `help`,
shell completion, no abbreviated options, "did you mean", and lock's --resolver (--engine deprecated)."""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from pinwheel import cli

ROOT = Path(__file__).resolve().parents[2]


def commands() -> list[str]:
    p = cli.build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("name", commands())
def test_version_quiet_verbose_and_color_on_every_command(name, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([name, "--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"pinwheel {version('pinwheel')}\n"
    parser = cli.build_parser()
    cli._global_options_after_subcommand(parser)  # as main() does
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    for option in ("-q", "--quiet", "-v", "--verbose", "--color"):
        assert option in sub._option_string_actions, (name, option)


def test_version_at_the_top_level(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.startswith("pinwheel ")


@pytest.mark.parametrize("argv, hint", [
    (["reprot"], "did you mean 'report'?"),
    (["report", "--offlin"], "did you mean --offline?"),
    (["report", "--off", "--js"], "did you mean --offline?"),
    (["lock", "--chek"], "did you mean --check?"),
    (["asset", "ad"], "did you mean 'add'?"),
])
def test_a_mistyped_command_or_option_names_the_nearest(argv, hint, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    message = capsys.readouterr().err
    assert hint in message and "Traceback" not in message


@pytest.mark.parametrize("argv", [["report", "--off"], ["report", "--js"], ["build", "--fresh"],
                                  ["lock", "--res", "uv"], ["publish", "--allow-float"]])
def test_no_option_is_abbreviated(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_help_command_of_a_nested_command_and_of_nothing(capsys):
    assert cli.main(["help", "asset", "add"]) == 0
    assert capsys.readouterr().out.startswith("usage: pinwheel asset add")
    assert cli.main(["help"]) == 0
    assert "Pipeline: manifest" in capsys.readouterr().out
    assert cli.main(["help", "lcok"]) == 2
    assert "did you mean 'lock'?" in capsys.readouterr().err


def test_bash_completion_completes_commands_and_options(capsys, tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.fail("bash is not installed")
    assert cli.main(["completion", "bash"]) == 0
    script = tmp_path / "pinwheel.bash"
    script.write_text(capsys.readouterr().out)
    probe = (f"source {script}\n"
             "COMP_WORDS=(pinwheel rep); COMP_CWORD=1; COMP_LINE='pinwheel rep'; COMP_POINT=${#COMP_LINE}\n"
             "_shtab_pinwheel; echo \"commands: ${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(pinwheel lock --res); COMP_CWORD=2; COMP_LINE='pinwheel lock --res'; "
             "COMP_POINT=${#COMP_LINE}\n"
             "_shtab_pinwheel; echo \"options: ${COMPREPLY[*]}\"\n")
    proc = subprocess.run([bash, "--norc", "-c", probe], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^commands: report\s*$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^options: --resolver\s*$", proc.stdout, re.M), proc.stdout


def test_color_never_and_always(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    run = lambda *a: subprocess.run([sys.executable, str(ROOT / "build.py"), *a], capture_output=True, text=True,
                                    env=env, timeout=60)
    always = run("--color", "always", "render")  # no project here: the error is coloured on request
    assert always.returncode == 2 and "\x1b[" in always.stderr
    never = run("render", "--color", "never")
    assert never.returncode == 2 and "\x1b[" not in never.stderr and "not a pinwheel project" in never.stderr
    plain = run("render")  # a pipe, auto: no colour
    assert "\x1b[" not in plain.stderr


def test_lock_engine_still_works_as_a_deprecated_alias_of_resolver(capsys):
    p = cli.build_parser()
    cli._global_options_after_subcommand(p)
    assert p.parse_args(["lock", "--resolver", "uv"]).resolver == "uv"
    assert p.parse_args(["lock", "--engine", "pip-compile"]).resolver == "pip-compile"
    assert "--engine is deprecated; it is --resolver now" in capsys.readouterr().err
    assert "--engine " not in p._subparsers._group_actions[0].choices["lock"].format_help()
