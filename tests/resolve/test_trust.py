"""Verdicts that can be trusted: unchecked is never clean, failures are never remembered,
every clash is a finding, a shared pin excluded by anything is broken, and report and
bump agree. All on a local HTTP index (or a socket that never answers)."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinwheel import cli

from tests.support.manifests import manifest_yaml, variant

ROOT = Path(__file__).resolve().parents[2]

SHARED_DSL = '  - {requirement: "shared-dsl==1.5", needed_by: [app], why: "one DSL for everyone"}\n'
APP_SET = """\
  - name: one
    why: "the app"
    packages:
      - {{requirement: "app=={app}"}}
      - {{requirement: "shared-dsl==1.5"}}
"""


def write(tmp_path: Path, app: str = "1.0", extra: str = "") -> Path:
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(manifest_yaml(variants=[variant("t", platform="manylinux_2_28_x86_64")], shared_pins=SHARED_DSL,
                                  steps=APP_SET.format(app=app) + extra))
    return path


def report(path: Path, url: str, capsys, *args: str) -> tuple[int, dict]:
    rc = cli.main(["--manifest", str(path), "report", "--json", "--index-url", url, "--index-deadline", "3", *args])
    return rc, json.loads(capsys.readouterr().out)


@pytest.fixture
def index(local_index):
    ix = local_index
    ix.add("base-lib", "1.0")
    ix.add("base-lib", "2.0")
    ix.add("shared-dsl", "1.5")
    ix.add("shared-dsl", "2.0")
    ix.add("app", "1.0", requires=["base-lib>=1.0", "shared-dsl>=1.0"])
    return ix


# ------------------------------------------------------------- unchecked


def test_an_unreachable_index_is_could_not_judge_not_clean(index, tmp_path, capsys):
    path = write(tmp_path)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/simple/"
    rc, data = report(path, dead, capsys)
    assert rc == 3
    assert data["summary"]["verdict"] == "unchecked" and data["summary"]["clean"] is False
    assert data["summary"]["unchecked"] > 0
    reasons = " ".join(u["reason"] for u in data["unjudged"])
    assert dead in reasons and "'app'" in reasons  # names the index and the package

    rc, data = report(path, dead, capsys, "--allow-unchecked")
    assert rc == 0 and data["summary"]["clean"] is True and data["summary"]["unchecked_allowed"] is True


def test_a_cold_offline_run_is_could_not_judge(index, tmp_path, capsys):
    url = index.serve()
    rc, data = report(write(tmp_path), url, capsys, "--offline")
    assert rc == 3 and data["summary"]["verdict"] == "unchecked"


def test_a_failed_run_is_not_remembered(index, tmp_path, capsys):
    url = index.serve()
    path = write(tmp_path)
    index.fail_next(10_000, status=503)
    rc, data = report(path, url, capsys)
    assert rc == 3 and not data["summary"]["clean"]
    index.fail_next(0)
    index._fail.clear()  # the index is back
    rc, data = report(path, url, capsys)
    assert rc == 0 and data["summary"]["clean"] is True
    assert {p["name"]: p["version"] for p in data["packages"]} == {"app": "1.0", "shared-dsl": "1.5", "base-lib": "2.0"}


def test_memo_is_json_and_refresh_rereads_the_index(index, tmp_path, capsys):
    url = index.serve()
    path = write(tmp_path)
    rc, data = report(path, url, capsys)
    assert rc == 0
    memo = tmp_path / ".cache" / "index" / "memo"
    files = sorted(memo.iterdir())
    assert files and all(f.suffix == ".json" for f in files)
    for f in files:
        json.loads(f.read_text())  # data, never a pickle

    index.add("base-lib", "3.0")
    before = len(index.requests)
    rc, data = report(path, url, capsys)
    assert len(index.requests) == before  # remembered: no request at all
    assert {p["name"]: p["version"] for p in data["packages"]}["base-lib"] == "2.0"
    rc, data = report(path, url, capsys, "--refresh")
    assert {p["name"]: p["version"] for p in data["packages"]}["base-lib"] == "3.0"
    rc, data = report(path, url, capsys)  # --refresh rewrote the memo
    assert {p["name"]: p["version"] for p in data["packages"]}["base-lib"] == "3.0"


def test_an_index_that_never_answers_gives_up_at_the_deadline(tmp_path):
    """A listening socket that accepts and never answers: retries stop at --index-deadline."""
    path = write(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        url = f"http://127.0.0.1:{s.getsockname()[1]}/simple/"
        start = time.monotonic()
        proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--manifest", str(path), "report",
                               "--index-url", url, "--index-deadline", "2"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
        took = time.monotonic() - start
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "deadline" in proc.stdout and url in proc.stdout and "'app'" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert took < 30, took


# ------------------------------------------------------------- clashes


def test_every_clash_in_one_run_each_naming_both_sides(index, tmp_path, capsys):
    index.add("app", "2.0")
    index.add("bigapp", "1.0", requires=["app==2.0", "shared-dsl==2.0", "helper>=5"])
    index.add("helper", "1.0")
    url = index.serve()
    path = write(tmp_path)
    path.write_text(path.read_text().replace('      - {requirement: "shared-dsl==1.5"}\n',
                                             '      - {requirement: "shared-dsl==1.5"}\n'
                                             '      - {requirement: "bigapp==1.0"}\n'))
    rc, data = report(path, url, capsys)
    assert rc == 1  # a finding, not bad input
    clashes = {c["package"]: c for c in data["clashes"]}
    assert set(clashes) == {"app", "shared-dsl", "helper"}
    assert clashes["app"]["wanted"] == ["app==1.0 (from the manifest)", "app==2.0 (from bigapp 1.0)"]
    assert {"shared-dsl==1.5 (from the manifest)", "shared-dsl==2.0 (from bigapp 1.0)"} <= set(
        clashes["shared-dsl"]["wanted"])
    assert clashes["helper"]["reasons"] == ["no release of helper satisfies >=5 (newest: 1.0)"]
    # judged against the manifest's own pin, so the violated edges name both sides too
    violated = {(e["parent"], e["name"], e["found"]) for e in data["edges"] if e["verdict"] == "violated"}
    assert {("bigapp", "app", "1.0"), ("bigapp", "shared-dsl", "1.5")} <= violated
    assert data["summary"]["clashes"] == 3 and not data["summary"]["clean"]

    rc = cli.main(["--manifest", str(path), "report", "--index-url", url])
    text = capsys.readouterr().out
    assert rc == 1 and "Clashes" in text and "What to do" in text


# ------------------------------------------------------------- shared pins


NO_DEPS_FRONTEND = """\
  - name: two
    why: "the frontend, without its pins"
    packages:
      - {{requirement: "frontend=={version}", no_deps: true, why: "its requirements move the shared DSL"}}
"""


def test_a_shared_pin_excluded_by_a_suppressed_base_requirement_is_broken_in_report_and_bump(
        index, tmp_path, capsys):
    index.add("frontend", "1.0", requires=["shared-dsl>=1.0"], extras={"dsl": ["shared-dsl==1.0"]})
    index.add("frontend", "2.0", requires=["shared-dsl>=2.0"])
    url = index.serve()

    today = write(tmp_path, extra=NO_DEPS_FRONTEND.format(version="1.0"))
    rc, data = report(today, url, capsys)
    # an extra the image does not request excludes 1.5 without breaking it
    assert rc == 0 and data["summary"]["shared_pins_broken"] == 0
    (pin,) = data["shared_pins"]
    assert [(x["parent"], x["extra"], x["breaks"]) for x in pin["excluded_by"]] == [("frontend", "dsl", False)]

    rc = cli.main(["--manifest", str(today), "bump", "frontend==2.0", "--json", "--index-url", url])
    bumped = json.loads(capsys.readouterr().out)
    assert rc == 1
    (sp,) = bumped["shared_pins"]
    assert sp["status"] == "unsatisfiable"

    after = tmp_path / "after"
    after.mkdir()
    rc, data = report(write(after, extra=NO_DEPS_FRONTEND.format(version="2.0")), url, capsys)
    assert rc == 1 and data["summary"]["shared_pins_broken"] == 1
    (pin,) = data["shared_pins"]
    assert pin["broken"] and "suppressed by --no-deps" in pin["broken_because"][0]


# ------------------------------------------------------------- bump causes


def test_bump_names_the_pin_that_blocks_a_candidate(index, tmp_path, capsys):
    index.add("quack", "0.6.5", requires=["shared-dsl>=1.7"])
    index.add("app", "3.0", requires=["quack==0.6.5"])
    url = index.serve()
    path = write(tmp_path)
    rc = cli.main(["--manifest", str(path), "bump", "app==3.0", "--json", "--index-url", url])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    (row,) = [p for p in data["packages"] if p["name"] == "quack"]
    assert row["verdict"] == "blocked"
    text = " ".join(row["reasons"])
    assert "quack 0.6.5 requires shared-dsl>=1.7, but the manifest pins shared-dsl==1.5" in text
    assert "no version of quack" not in text
    assert row["fix"]["package"] == "shared-dsl" and "move the pin shared-dsl==1.5 in shared_pins" in row["fix"]["text"]


# ------------------------------------------------------------- output


def test_output_survives_ascii_and_prints_full_values_without_a_terminal(index, tmp_path):
    many = [f"consumer-{i:02d}" for i in range(12)]
    for name in many:
        index.add(name, "1.0", requires=["base-lib>=1.0"])
    url = index.serve()
    path = write(tmp_path, extra="  - name: two\n    why: \"consumers\"\n    packages:\n"
                 + "".join(f'      - {{requirement: "{n}==1.0"}}\n' for n in many))
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "60"}
    # --manifest after the subcommand, as a global option
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "report", "--manifest", str(path),
                           "--index-url", url, "-v"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    # without a terminal one package per line: every consumer on base-lib's line, none cut
    (row,) = [line for line in proc.stdout.splitlines() if re.match(r"  base-lib \S+, ", line)]
    for name in many:
        assert f"{name} (>=1.0)" in row
    assert "..." not in proc.stdout


def test_a_pin_a_later_step_moves_is_never_ok(index, tmp_path, capsys):
    index.add("pinner", "1.0", requires=["base-lib==1.0"])
    url = index.serve()
    path = write(tmp_path, extra='  - name: two\n    why: "pins an older base-lib"\n    packages:\n'
                                 '      - {requirement: "pinner==1.0"}\n')
    rc, data = report(path, url, capsys)
    assert rc == 1
    (lib,) = [p for p in data["packages"] if p["name"] == "base-lib"]
    assert lib["moved"] == {"from": "2.0", "to": "1.0", "by": "two", "pinned_in": "one", "cause": "pinner 1.0"}
    rc = cli.main(["--manifest", str(path), "report", "--index-url", url])
    (row,) = [line for line in capsys.readouterr().out.splitlines() if re.match(r"  base-lib \S+, ", line)]
    assert "moved 2.0 → 1.0 by two" in row and ": ok" not in row


def test_a_fallback_keeps_its_source_and_why(index, tmp_path, capsys):
    index.add("sgl-kernel", "1.0", requires=["base-lib>=1.0"])
    url = index.serve()
    path = write(tmp_path, extra="""\
  - name: local
    why: "in-house"
    packages:
      - requirement: "fastk==1.0"
        why: "built here"
        local: {glob: "fastk-*.whl", if_missing: fallback}
        fallback: {requirement: "sgl-kernel==1.0", why: "the index build"}
""")
    rc, data = report(path, url, capsys)
    (fb,) = [p for p in data["packages"] if p["name"] == "sgl-kernel"]
    assert (fb["source"], fb["why"]) == ("fallback", "the index build")
    assert "manifest (fallback for fastk)" in fb["required_by"]
    rc = cli.main(["--manifest", str(path), "report", "--index-url", url])
    (row,) = [line for line in capsys.readouterr().out.splitlines() if re.match(r"  sgl-kernel \S+, ", line)]
    assert "the index build" in row


def test_piped_report_lines_are_one_package_each_and_a_wide_terminal_gets_the_table(index, tmp_path):
    import io

    from rich.console import Console

    from pinwheel.reports.report_printing import print_packages

    rows = [("cuda-bindings", "13.4.4", "torch", "cuda-python (~=13.4.4), torch (<14,>=13.0.3)", "ok", "w" * 300)]
    piped = io.StringIO()
    print_packages(Console(file=piped, width=100_000, highlight=False), rows)
    lines = piped.getvalue().splitlines()
    assert lines[1] == f"  cuda-bindings 13.4.4, torch: ok; required by {rows[0][3]}; why: {'w' * 300}"
    assert max(len(line) for line in lines) < 400  # no padding to a table's width
    wide = io.StringIO()
    print_packages(Console(file=wide, width=200, force_terminal=True, highlight=False, color_system=None), rows)
    assert "┃ package" in wide.getvalue()
    narrow = io.StringIO()
    print_packages(Console(file=narrow, width=80, force_terminal=True, highlight=False, color_system=None), rows)
    assert "cuda-bindi…" not in narrow.getvalue() and "  cuda-bindings 13.4.4, torch: ok" in narrow.getvalue()
