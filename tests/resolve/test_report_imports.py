"""Each command loads only what it runs: `--help` and an offline `report --json` never import the table
view (rich), the network (requests), the templates (jinja2), the engine (python-on-whales) or pip; nor what
only a cache miss, a lock run or an error message needs (LAZY): the ELF reader, the zip, HTML, email, tar
and TOML readers, difflib, the lock maker, statistics (the smoke payload's CUDA timer), and the step kinds
its manifest does not use (this one has wheel sets only).

The modules a real process ends with are read from `sys.modules`, in a fresh interpreter per case; a
structural check, not a timed one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pinwheel import cli

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("rich", "requests", "urllib3", "jinja2", "python_on_whales", "pip")
LAZY = ("elftools", "zipfile", "html", "email", "tarfile", "tomllib", "difflib", "pinwheel.lock.make", "statistics",
        "pinwheel.steps.apt", "pinwheel.steps.remove", "pinwheel.steps.git", "pinwheel.steps.asset",
        "pinwheel.steps.patch", "pinwheel.steps.sdist", "pinwheel.steps.source_meta")

MANIFEST = """\
manifest_version: 1
image: {name: lazy, repository: pinwheel/lazy}
variants:
  t: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_28_x86_64,
      base: "pinwheel/base:bookworm-py311", tag: "t-{date}"}
wheel_sets:
  - name: one
    why: "the app"
    packages:
      - {requirement: "app==1.0"}
"""

PROBE = """\
import sys
from pinwheel.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
print("\\n--modules--\\n" + "\\n".join(sorted(sys.modules)))
sys.exit(code or 0)
"""


def run_probe(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, set[str]]:
    """(exit code, output, modules imported: each top-level package, and pinwheel's modules by full name) of
    `pinwheel ARGS` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    output, _, modules = proc.stdout.partition("\n--modules--\n")
    names = modules.split()
    return proc.returncode, output, {m.split(".")[0] for m in names} | {m for m in names if m.startswith("pinwheel.")}


def probe_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PYTHONPATH"] = str(ROOT)
    env["PINWHEEL_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def test_help_imports_no_view_network_template_or_engine_library(tmp_path):
    code, output, modules = run_probe(["--help"], tmp_path, probe_env(tmp_path))
    assert code == 0 and "Pipeline: manifest" in output
    assert "pinwheel" in modules and "argparse" in modules  # the probe sees what the process imported
    assert "pinwheel.cli" in modules
    assert sorted(modules & set(HEAVY + LAZY)) == []


def test_offline_json_report_imports_none_of_them_and_the_table_view_does(local_index, tmp_path, capsys,
                                                                          monkeypatch):
    local_index.add("app", "1.0", requires=["lib>=1"])
    local_index.add("lib", "1.2")
    url = local_index.serve()
    (tmp_path / "wheels_manifest.yaml").write_text(MANIFEST)
    env = probe_env(tmp_path)
    monkeypatch.setenv("PINWHEEL_CACHE_DIR", env["PINWHEEL_CACHE_DIR"])
    args = ["--manifest", str(tmp_path / "wheels_manifest.yaml"), "report", "--variant", "t", "--index-url", url]
    assert cli.main(args + ["--json"]) == 0  # online, in this process: the cache is filled
    online = json.loads(capsys.readouterr().out)

    code, output, modules = run_probe(args + ["--json", "--offline"], tmp_path, env)
    assert code == 0 and json.loads(output) == online
    assert sorted(modules & set(HEAVY)) == []
    # METADATA the online run downloaded is parsed on its first read from the cache (email loads then);
    # from the next run on, everything comes from the parsed store.
    code, output, modules = run_probe(args + ["--json", "--offline"], tmp_path, env)
    assert code == 0 and json.loads(output) == online
    assert "pinwheel.lock" in modules and "pinwheel.abi.elf" in modules  # what the report does use is there
    assert "pinwheel.steps.wheels" in modules
    assert sorted(modules & set(HEAVY + LAZY)) == []

    code, output, modules = run_probe(args + ["--offline"], tmp_path, env)
    assert code == 0 and "app" in output
    assert "rich" in modules and not modules & {"requests", "jinja2", "python_on_whales", "pip"}
