"""The build-time import check: every installed distribution's top-level modules imported on the CPU,
in one process and then each failed one alone; a failure names distribution, module and the error's last
line; distributions expect.json's import_skip names (manifest `needs: driver`) are SKIPPED with their reason.

The payload runs as a subprocess against a fake site (hand-written dist-info directories and modules).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.payload_archive import PAYLOAD  # the zipapp the build ships

# distribution -> (its modules' source, top_level.txt or None for RECORD only)
SITE = {
    "pwi-good": ({"pwi_good": "X = 1\n"}, "pwi_good\n"),
    "pwi-record-only": ({"pwi_rec": "import pwi_good\n"}, None),
    "pwi-broken": ({"pwi_broken": "raise ImportError('libfoo.so.1: cannot open shared object file')\n"}, "pwi_broken\n"),
    "pwi-crash": ({"pwi_crash": "import os\nos._exit(3)\n"}, "pwi_crash\n"),
    "pwi-after": ({"pwi_zafter": "Y = 2\n"}, "pwi_zafter\n"),  # sorted after the crash: must still be imported
    "pwi-driver": ({"pwi_driver": "raise OSError('libcuda.so.1: cannot open shared object file')\n"}, "pwi_driver\n"),
}


def make_site(root: Path, names) -> Path:
    site = root / "site"
    site.mkdir()
    for dist in names:
        modules, top = SITE[dist]
        info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        record = []
        for mod, src in modules.items():
            (site / mod).mkdir()
            (site / mod / "__init__.py").write_text(src)
            record.append(f"{mod}/__init__.py,,")
        (info / "RECORD").write_text("\n".join(record + [f"{info.name}/RECORD,,"]) + "\n")
        if top is not None:
            (info / "top_level.txt").write_text(top)
    return site


def run(tmp_path: Path, site: Path, import_skip: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps({"pins": {}, **({"import_skip": import_skip} if import_skip else {})}))
    out = tmp_path / "out.json"
    # -S: the fake site alone (plus the standard library), not the test interpreter's packages
    proc = subprocess.run([sys.executable, "-S", str(PAYLOAD), "--expect", str(expect), "--check-imports",
                           "--site", str(site), "--json", str(out)], capture_output=True, text=True, timeout=300)
    return proc, json.loads(out.read_text())


def stage(doc: dict) -> dict:
    return next(s for s in doc["stages"] if s["name"] == "imports")


def test_every_module_imports_in_one_process(tmp_path):
    proc, doc = run(tmp_path, make_site(tmp_path, ["pwi-good", "pwi-record-only", "pwi-after"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = stage(doc)
    assert s["status"] == "passed" and s["processes"] == 1
    assert s["imported"] == 3  # pwi_good, pwi_rec (from its RECORD), pwi_zafter
    assert "modules imported on the CPU" in proc.stdout


def test_failures_name_distribution_module_and_last_line_and_hide_nothing(tmp_path):
    proc, doc = run(tmp_path, make_site(tmp_path, ["pwi-good", "pwi-broken", "pwi-crash", "pwi-after"]))
    assert proc.returncode == 1
    s = stage(doc)
    assert s["status"] == "failed"
    failed = {f["module"]: f for f in s["failed"]}
    assert sorted(failed) == ["pwi_broken", "pwi_crash"]
    assert failed["pwi_broken"] == {"distribution": "pwi-broken", "module": "pwi_broken",
                                    "error": "ImportError: libfoo.so.1: cannot open shared object file"}
    assert failed["pwi_crash"]["error"].startswith("the import process exited 3")
    # the crash did not hide what sorts after it: a new process imported it
    assert s["processes"] == 4 and s["imported"] == 2  # all; the rest after the crash; each failure alone
    assert "pwi-broken: import pwi_broken: ImportError: libfoo.so.1: cannot open shared object file" in proc.stdout


def test_driver_only_distributions_are_skipped_with_their_reason(tmp_path):
    site = make_site(tmp_path, ["pwi-good", "pwi-driver"])
    proc, doc = run(tmp_path, site)
    assert proc.returncode == 1 and "pwi-driver: import pwi_driver: OSError: libcuda.so.1" in proc.stdout
    proc, doc = run(tmp_path, site, {"pwi-driver": "its extension links libcuda.so.1"})
    assert proc.returncode == 0, proc.stdout
    s = stage(doc)
    assert s["skipped"] == [{"distribution": "pwi-driver", "modules": ["pwi_driver"],
                             "reason": "its extension links libcuda.so.1"}]
    assert "SKIPPED pwi-driver (pwi_driver): its extension links libcuda.so.1" in proc.stdout


def test_without_the_flag_nothing_is_imported(tmp_path):
    site = make_site(tmp_path, ["pwi-broken"])
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps({"pins": {}}))
    proc = subprocess.run([sys.executable, str(PAYLOAD), "--expect", str(expect), "--site", str(site)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "imports" not in proc.stdout


def test_a_top_level_name_the_record_never_installed_is_not_imported(tmp_path):
    """Debian's setuptools lists `debian` in top_level.txt and ships no such module."""
    site = make_site(tmp_path, ["pwi-good"])
    info = next(site.glob("pwi_good-*.dist-info"))
    (info / "top_level.txt").write_text("pwi_good\ndebian\n")
    proc, doc = run(tmp_path, site)
    assert proc.returncode == 0, proc.stdout
    assert stage(doc)["imported"] == 1


def test_a_record_directory_that_is_not_a_package_name_is_not_imported(tmp_path):
    """auditwheel's numpy.libs/ holds shared objects, not a module numpy.libs."""
    site = make_site(tmp_path, ["pwi-record-only", "pwi-good"])
    info = next(site.glob("pwi_record_only-*.dist-info"))
    (site / "pwi_rec.libs").mkdir()
    (site / "pwi_rec.libs" / "libx.so").write_bytes(b"")
    (info / "RECORD").write_text((info / "RECORD").read_text() + "pwi_rec.libs/libx.so,,\n")
    proc, doc = run(tmp_path, site)
    assert proc.returncode == 0, proc.stdout
    assert stage(doc)["imported"] == 2


def test_an_extension_built_for_another_python_is_named_not_imported(tmp_path):
    """A wheel that ships a top-level extension for another CPython (sglang-kernel 0.4.2.post2's abi3
    wheel carries `_mscclpp.cpython-310-x86_64-linux-gnu.so`): no import here can load it, so it is not
    imported, and the stage names it; a file with this interpreter's own suffix is still a module."""
    site = make_site(tmp_path, ["pwi-good"])
    info = site / "pwi_good-1.0.dist-info"
    foreign = "_pwi_ext.cpython-39-x86_64-linux-gnu.so"  # no CPython that runs this payload loads 3.9's
    (site / foreign).write_bytes(b"\x7fELF")
    (info / "RECORD").write_text((info / "RECORD").read_text() + f"{foreign},,\n")
    (info / "top_level.txt").unlink()  # RECORD only: the module names come from its paths
    proc, doc = run(tmp_path, site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = stage(doc)
    assert s["status"] == "passed" and s["imported"] == 1
    assert s["other_interpreter"] == [{"distribution": "pwi-good", "files": [foreign]}]
    assert f"not imported, built for another Python: pwi-good ({foreign})" in proc.stdout
    # the same file under this interpreter's suffix is a module, imported, and here a broken one fails
    import importlib.machinery
    (site / foreign).rename(site / f"_pwi_ext{importlib.machinery.EXTENSION_SUFFIXES[0]}")
    (info / "RECORD").write_text((info / "RECORD").read_text().replace(
        foreign, f"_pwi_ext{importlib.machinery.EXTENSION_SUFFIXES[0]}"))
    proc, doc = run(tmp_path, site)
    assert proc.returncode == 1 and stage(doc)["failed"][0]["module"] == "_pwi_ext", proc.stdout
