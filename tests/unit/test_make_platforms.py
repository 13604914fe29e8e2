"""`make image CUDA=13` builds the variant's own platform only; PLATFORMS=... builds each one listed.

`make -n` prints the commands without running them; the shipped manifest's cu130 lists both platforms.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest

from pinwheel import manifest
from pinwheel.commands.common import select_plan

ROOT = Path(__file__).resolve().parents[2]


def commands(target: str, *args: str, command: str = "build") -> list[str]:
    """The `build.py <command>` lines `make -n <target> CUDA=13 ARGS` would run."""
    if not shutil.which("make"):
        pytest.fail("make is not installed")
    proc = subprocess.run(["make", "-n", "-C", str(ROOT), target, "CUDA=13", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [c.strip() for line in proc.stdout.splitlines() if f"build.py {command}" in line
            for c in line.split("&&") if f"build.py {command}" in c]


def build_commands(*args: str) -> list[str]:
    return commands("image", *args)


def test_without_platforms_one_build_of_the_own_platform():
    assert build_commands() == [".venv/bin/python build.py build --cuda 13"]
    plan = select_plan(manifest.load(ROOT / "wheels_manifest.yaml"), argparse.Namespace(cuda="13", platform=None))
    assert (plan.container_platform, plan.platform_arch) == ("linux/amd64", None)
    assert plan.variant.container_platforms == ("linux/amd64", "linux/arm64")


def test_platforms_builds_each_listed_one():
    assert build_commands("PLATFORMS=linux/amd64,linux/arm64") == [
        ".venv/bin/python build.py build --cuda 13 --platform linux/amd64",
        ".venv/bin/python build.py build --cuda 13 --platform linux/arm64"]


@pytest.mark.parametrize("target,command,words", [("report", "report", []), ("bump", "bump", ["TORCH=2.14.1"])])
def test_report_and_bump_judge_every_platform_unless_platforms_names_one(target, command, words):
    (every,) = commands(target, *words, command=command)
    assert "--platform" not in every  # the CLI judges each of the variant's platforms
    (one,) = commands(target, *words, "PLATFORMS=linux/arm64", command=command)
    assert one == every + " --platform linux/arm64"
