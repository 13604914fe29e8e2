"""bench/scale_bench.py measures what it says: the generator's index and manifest, at a small size, give a
report of exactly the generated packages and a lock that pins exactly them (local HTTP index, real uv).
Not timed: the bench times; this checks its input."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from pinwheel import cli

from tests.support.local_index import LocalIndex

ROOT = Path(__file__).resolve().parents[2]


def scale_bench():
    if "scale_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location("scale_bench", ROOT / "bench" / "scale_bench.py")
        sys.modules["scale_bench"] = importlib.util.module_from_spec(spec)  # its dataclasses look it up there
        spec.loader.exec_module(sys.modules["scale_bench"])
    return sys.modules["scale_bench"]


def test_the_generated_input_reports_and_locks_exactly_its_packages(local_index, local_project, tmp_path, capsys):
    bench = scale_bench()
    gen = bench.generate(local_index, 12, seed=17)
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(gen.manifest)
    manifest = str(root / "wheels_manifest.yaml")

    assert cli.main(["--manifest", manifest, "lock", "--variant", "cu130"]) == 0
    lock_dir = root / "images" / "scale" / "lock" / "cu130"
    pinned = dict(re.findall(r"^([a-z0-9-]+)==(\S+) \\$", (lock_dir / "requirements.txt").read_text(), re.M))
    assert pinned == gen.pins
    sliced = [re.findall(r"^([a-z0-9-]+)==", f.read_text(), re.M) for f in sorted(lock_dir.glob("0*-set-*.txt"))]
    assert sorted(n for names in sliced for n in names) == sorted(gen.pins)  # each package in one slice
    assert len(sliced) == 2  # 12 packages: two wheel sets

    capsys.readouterr()
    rc = cli.main(["--manifest", manifest, "report", "--variant", "cu130", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["lock"] == "ok" and report["locked"]
    assert {p["name"]: p["version"] for p in report["packages"]} == gen.pins
    # the shape it says it has: requirements judged against the set, no_deps edges suppressed, markers excluded
    edges = report["summary"]["edges"]
    assert edges["satisfied"] > 0 and edges["suppressed"] > 0 and edges["unchecked"] == 0
    assert {e["parent"] for e in report["edges"] if e["verdict"] == "suppressed"} == set(gen.no_deps)
    assert [p["name"] for p in report["shared_pins"]] == gen.shared
    assert rc in (0, 1)  # a suppressed extra that would downgrade a shared pin may count as a conflict


def test_the_generator_is_deterministic(tmp_path):
    bench = scale_bench()
    pages = []
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        index = LocalIndex(tmp_path / name)
        gen = bench.generate(index, 15, seed=seed)
        # the project pages name every file with its sha256: equal pages, equal wheels
        pages.append((gen.manifest, {p.parent.name: p.read_text() for p in (tmp_path / name).glob("simple/*/index.json")}))
    assert pages[0] == pages[1]
    assert pages[2][0] != pages[0][0] and pages[2][1] != pages[0][1]
