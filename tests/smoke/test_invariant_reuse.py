"""The invariant's reuse of an earlier passing result (--cache-dir): a pip check or import check is reused
only while every input it read is unchanged, and says so; a failed result is never stored.

The payload runs as a subprocess against fake site directories made here (dist-info directories with
RECORDs, and modules), with -S so that the test interpreter's own packages are not in the picture.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.payload_archive import PAYLOAD, load  # the zipapp the build ships, and its modules


def add_dist(site: Path, name: str, modules: dict[str, str], top_level: bool = True) -> Path:
    """A distribution in `site`: its modules (package name -> __init__ source) and a RECORD listing them."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    record = []
    for mod, src in modules.items():
        (site / mod).mkdir()
        (site / mod / "__init__.py").write_text(src)
        (site / mod / "data.txt").write_text("not imported\n")
        record += [f"{mod}/__init__.py,,", f"{mod}/data.txt,,"]
    if top_level:
        (info / "top_level.txt").write_text("".join(f"{m}\n" for m in modules))
    (info / "RECORD").write_text("\n".join(record + [f"{info.name}/RECORD,,"]) + "\n")
    return info


def make_site(root: Path) -> Path:
    site = root / "site"
    # pwi_good tries an optional module nobody installed yet; pwi_driver is left to the driver level
    add_dist(site, "pwi-good", {"pwi_good": "try:\n    import pwi_late\nexcept ImportError:\n    pwi_late = None\n"})
    add_dist(site, "pwi-other", {"pwi_other": "import pwi_good\n"})
    add_dist(site, "pwi-driver", {"pwi_driver": "raise OSError('libcuda.so.1: cannot open shared object file')\n"})
    return site


def touch_later(path: Path, text: str) -> None:
    """Write `text`, and be sure the file's times move even on a coarse clock."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def run(root: Path, site: Path, *extra: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    expect = root / "expect.json"
    expect.write_text(json.dumps({"pins": {}, "import_skip": {"pwi-driver": "needs: driver: links libcuda.so.1"}}))
    out = root / "out.json"
    proc = subprocess.run([sys.executable, "-S", str(PAYLOAD), "--expect", str(expect), "--check-imports",
                           "--check-pip", "--site", str(site), "--cache-dir", str(root / "cache"), "--json", str(out),
                           *extra], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    return proc, json.loads(out.read_text())


def stage(doc: dict, name: str = "imports") -> dict:
    return next(s for s in doc["stages"] if s["name"] == name)


def stored(root: Path, kind: str) -> list[Path]:
    return sorted((root / "cache").glob(f"{kind}-*.json"))


def test_a_passing_result_is_reused_while_nothing_changed_and_says_so(tmp_path):
    site = make_site(tmp_path)
    proc, doc = run(tmp_path, site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = stage(doc)
    assert first["reused"] is False and first["cache"] == "stored" and first["imported"] == 2
    assert "modules imported on the CPU" in proc.stdout
    assert len(stored(tmp_path, "imports")) == 1 and len(stored(tmp_path, "pip-check")) == 1

    proc, doc = run(tmp_path, site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = stage(doc)
    assert again["reused"] is True and again["processes"] == 0 and again["imported"] == 2
    assert again["cache_key"] == first["cache_key"] and again["passed_at"]
    assert again["skipped"] == first["skipped"]  # the driver-only package is still SKIPPED, not passed
    assert stage(doc, "pip-check")["reused"] is True
    assert (f"static/imports: 2 modules passed (unchanged since a passing import at {again['passed_at']}: "
            f"cache key {first['cache_key']}") in proc.stdout
    assert "SKIPPED pwi-driver (pwi_driver)" in proc.stdout
    assert "modules imported on the CPU" not in proc.stdout


def test_a_file_of_a_touched_distribution_changed_checks_afresh(tmp_path):
    site = make_site(tmp_path)
    assert run(tmp_path, site)[0].returncode == 0
    # a file of pwi-good that no import read: its distribution was touched, so it is fingerprinted whole
    touch_later(site / "pwi_good" / "data.txt", "changed\n")
    proc, doc = run(tmp_path, site)
    s = stage(doc)
    assert s["reused"] is False and s["fresh_because"] == "distribution pwi_good-1.0.dist-info changed", s
    assert "modules imported on the CPU" in proc.stdout
    # the fresh result is stored in its place: the next run reuses it
    assert stage(run(tmp_path, site)[1])["reused"] is True


def test_a_changed_distribution_the_imports_never_touched_is_reused(tmp_path):
    site = make_site(tmp_path)
    assert run(tmp_path, site)[0].returncode == 0
    touch_later(site / "pwi_driver" / "__init__.py", "raise OSError('libcuda.so.2: cannot open shared object file')\n")
    touch_later(site / "pwi_driver" / "data.txt", "changed\n")
    proc, doc = run(tmp_path, site)
    assert stage(doc)["reused"] is True, stage(doc)


def test_a_module_now_found_where_an_import_found_none_checks_afresh(tmp_path):
    site = make_site(tmp_path)
    assert run(tmp_path, site)[0].returncode == 0
    add_dist(site, "pwi-late", {"pwi_late": "raise ImportError('pwi_late is broken')\n"}, top_level=False)
    proc, doc = run(tmp_path, site)
    s = stage(doc)
    assert s["reused"] is False and s["status"] == "failed", s  # and the fresh run catches what it breaks
    assert "pwi-late: import pwi_late: ImportError: pwi_late is broken" in proc.stdout


def test_the_absent_names_alone_decide_when_nothing_else_changed(tmp_path):
    """The finder's record on its own: a module dropped on sys.path where an import found none."""
    site = make_site(tmp_path)
    assert run(tmp_path, site)[0].returncode == 0
    inputs = json.loads(stored(tmp_path, "imports")[0].read_text())["inputs"]
    assert ["pwi_late", None] in inputs["absent"]
    inputs["directories"] = {}  # leave the listing of the site out of it: only the absent names can tell
    check = ("import json, sys; sys.path.insert(0, sys.argv[1]); from pinwheel_smoke import cache, sites; "
             "sites.SITES[:] = [sys.argv[2]]; print(json.dumps(cache.unchanged_since(json.loads(sys.stdin.read()))))")

    def changed():
        proc = subprocess.run([sys.executable, "-S", "-c", check, str(PAYLOAD), str(site)],
                              input=json.dumps(inputs), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    assert changed() is None
    (site / "pwi_late.py").write_text("X = 1\n")
    assert changed() == "pwi_late can be imported now"


def test_a_file_outside_any_distribution_changed_checks_afresh(tmp_path):
    site = make_site(tmp_path)
    (site / "pwi_plain.py").write_text("Y = 1\n")  # no distribution owns it
    (site / "pwi_good" / "__init__.py").write_text("import pwi_plain\n")
    assert run(tmp_path, site)[0].returncode == 0
    touch_later(site / "pwi_plain.py", "Y = 2\n")
    s = stage(run(tmp_path, site)[1])
    assert s["reused"] is False and s["fresh_because"] == f"file {site / 'pwi_plain.py'} changed", s


def test_a_failed_import_is_never_stored(tmp_path):
    site = make_site(tmp_path)
    add_dist(site, "pwi-broken", {"pwi_broken": "raise ImportError('libfoo.so.1: cannot open shared object file')\n"})
    for _ in range(2):
        proc, doc = run(tmp_path, site)
        assert proc.returncode == 1 and stage(doc)["status"] == "failed" and stage(doc)["reused"] is False
        assert "cache" not in stage(doc)
    assert stored(tmp_path, "imports") == []
    assert len(stored(tmp_path, "pip-check")) == 1  # the pip check passed: that one is stored


def test_fresh_checks_reuse_nothing(tmp_path):
    site = make_site(tmp_path)
    assert run(tmp_path, site)[0].returncode == 0
    for extra, env in ((("--fresh-checks",), None), ((), {"PINWHEEL_FRESH_CHECKS": "1"})):
        proc, doc = run(tmp_path, site, *extra, env=env)
        assert proc.returncode == 0
        for name in ("imports", "pip-check"):
            assert stage(doc, name)["reused"] is False and stage(doc, name)["fresh_because"] == "--fresh-checks"


def test_the_gpu_smoke_never_uses_the_cache(tmp_path):
    site = make_site(tmp_path)
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps({"pins": {}}))
    proc = subprocess.run([sys.executable, "-S", str(PAYLOAD), "--expect", str(expect), "--level", "gpu",
                           "--cache-dir", str(tmp_path / "cache"), "--site", str(site)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--cache-dir is for the static level" in proc.stderr


def test_the_payload_reads_the_build_arg_the_template_sets():
    from pinwheel.workspace import InImage

    assert load("cache").FRESH_CHECKS_ENV == InImage.FRESH_CHECKS_ARG


def test_an_import_that_runs_a_program_is_not_stored_unless_the_program_is_absent(tmp_path):
    site = make_site(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # pwi_good runs `pwi-tool` when it can (as a package asks git for its version); nothing provides it yet
    (site / "pwi_good" / "__init__.py").write_text(
        "import subprocess\ntry:\n    subprocess.run(['pwi-tool'])\nexcept OSError:\n    pass\n")
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    proc, doc = run(tmp_path, site, env=env)
    assert stage(doc)["cache"] == "stored", stage(doc)  # its absence is what the import saw, and is recorded
    assert stage(run(tmp_path, site, env=env)[1])["reused"] is True
    tool = bindir / "pwi-tool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    proc, doc = run(tmp_path, site, env=env)
    s = stage(doc)
    assert s["reused"] is False and s["fresh_because"] == f"file {tool} changed", s
    # now the program is there and runs: what it reads is not seen, so the result is not stored
    assert s["cache"] == f"not stored: an import ran another program ({tool})", s
    assert stage(run(tmp_path, site, env=env)[1])["reused"] is False


def test_a_stored_result_that_cannot_be_read_checks_afresh(tmp_path):
    site = make_site(tmp_path)
    assert run(tmp_path, site)[0].returncode == 0
    entry_file = stored(tmp_path, "imports")[0]
    entry = json.loads(entry_file.read_text())
    entry_file.write_text(json.dumps({"schema": entry["schema"], "key": entry["key"], "inputs": {}}))
    proc, doc = run(tmp_path, site)
    s = stage(doc)
    assert proc.returncode == 0 and s["reused"] is False and s["fresh_because"].startswith(
        "the stored result is not readable"), s


def test_another_version_of_the_payload_reuses_nothing(tmp_path):
    site = make_site(tmp_path)
    assert run(tmp_path, site)[0].returncode == 0
    other = tmp_path / "other" / PAYLOAD.name
    other.parent.mkdir()
    shutil.copy(PAYLOAD, other)
    with zipfile.ZipFile(other, "a") as archive:  # the same modules, and one byte more: another version
        archive.comment = b"another version of the checks"
    expect = tmp_path / "expect.json"
    proc = subprocess.run([sys.executable, "-S", str(other), "--expect", str(expect), "--check-imports", "--check-pip",
                           "--site", str(site), "--cache-dir", str(tmp_path / "cache"), "--json", str(tmp_path / "o.json")],
                          capture_output=True, text=True, timeout=300)
    doc = json.loads((tmp_path / "o.json").read_text())
    assert proc.returncode == 0
    assert stage(doc)["reused"] is False and stage(doc, "pip-check")["reused"] is False


def test_reused_findings_that_this_expect_json_does_not_allow_are_printed_as_the_failure():
    """A pip check's stored findings are judged against the current expect.json: a finding it no longer allows
    fails the stage, and the line names the finding (not the stored run's "no unexpected findings")."""
    finding = "pw-orphan 1.0.0 requires pw-absent, which is not installed."
    failed = {"level": "static", "name": "pip-check", "status": "failed", "reused": True, "unexpected": [finding],
              "error": "pip check: " + finding, "cache_key": "sha256:" + "0" * 64, "passed_at": "2026-12-01T00:00:00Z",
              "accepted_suppressed": [], "checked_with": "pip check", "seconds": 0.01}
    doc = {"schema": 1, "requested": "static", "device": None, "host": {}, "stages": [failed],
           "failed_levels": ["static"], "ok": False}
    text = load("summary").summary(doc)
    line = next(x for x in text.splitlines() if "static/pip-check" in x)
    assert line.startswith("[   FAIL]") and finding in line and "no unexpected findings" not in line
    assert "reused" in line and "0" * 64 in line
