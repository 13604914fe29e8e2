"""A relative --manifest (and so a relative wheels/ directory) is taken as given."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.local_index import build_wheel

from pinwheel import cli, index

from tests.support.manifests import manifest_yaml, variant

MANIFEST = manifest_yaml(variants=[variant("t", platform="manylinux_2_28_x86_64")], steps="""\
  - name: kernels
    why: "built in-house"
    packages:
      - requirement: "speedup==1.0"
        why: "a local build"
        local: {glob: "speedup-*.whl", if_missing: fail}
""")


def test_local_metadata_takes_a_relative_path(tmp_path, monkeypatch):
    wheel = build_wheel(tmp_path / "wheels", "speedup", "1.0", requires=["helper>=1"])
    monkeypatch.chdir(tmp_path)
    meta = index.local_metadata(Path("wheels") / wheel.name)
    assert (meta.name, str(meta.version)) == ("speedup", "1.0")
    assert meta.url == wheel.resolve().as_uri()
    assert meta.source == "local"


def test_report_with_a_relative_manifest_and_a_local_wheel(tmp_path, monkeypatch, capsys, local_index):
    local_index.add("helper", "1.0")
    url = local_index.serve()
    (tmp_path / "wheels_manifest.yaml").write_text(MANIFEST)
    build_wheel(tmp_path / "wheels", "speedup", "1.0", requires=["helper>=1"])
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["--manifest", "wheels_manifest.yaml", "report", "--json", "--index-url", url])
    captured = capsys.readouterr()
    assert "relative path" not in captured.err and "Traceback" not in captured.err, captured.err
    assert rc in (0, 1), captured.err
    data = json.loads(captured.out)
    assert "speedup" in json.dumps(data)
    assert "local" in json.dumps(data)


ALLOWED = manifest_yaml(variants=[variant("t", platform="manylinux_2_28_x86_64")], steps="""\
  - name: kernels
    why: "built in-house"
    packages:
      - requirement: "speedup==1.0"
        why: "a local build"
        local: {glob: "speedup-*.whl", if_missing: fail}
        allow_missing:
          - {name: helper, why: "the image provides helper's module another way"}
""")


def test_allow_missing_on_a_local_wheel_loads_and_the_report_allows_it(tmp_path, monkeypatch, capsys, local_index):
    """A local wheel is installed --no-deps and its requirements are checked as dropped, so allow_missing
    on it is what the report and the manifest agree on (it was refused as "no_deps only")."""
    url = local_index.serve()  # helper is on no index: the local wheel's requirement stays unmet
    (tmp_path / "wheels_manifest.yaml").write_text(ALLOWED)
    build_wheel(tmp_path / "wheels", "speedup", "1.0", requires=["helper>=1"])
    monkeypatch.chdir(tmp_path)
    cli.main(["--manifest", "wheels_manifest.yaml", "report", "--json", "--index-url", url])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    (dropped,) = data["dropped_requirements"]
    assert (dropped["package"], dropped["name"], dropped["allowed"]) == ("speedup", "helper", True), dropped
    assert dropped["why"] == "the image provides helper's module another way"
