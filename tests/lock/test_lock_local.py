"""`build.py lock` against the local HTTP index: real pip-compile and uv runs on generated wheels.

The demo manifest mirrors the shipped one in miniature: a torch-like base, a
kernels step whose package wants any frontend (the index has a newer one), a
shared pin with an extra, a gated --no-deps frontend whose extra pins an older
DSL, and a gated local wheel whose fallback declares a torch it must not get.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

from pinwheel import cli, manifest
from pinwheel.commands.common import index_client
from pinwheel.lock import (
    check_lock,
    lock_inputs,
    lock_inputs_digest,
    parse_requirements,
    read_lock,
)
from pinwheel.plan import plan_variant
from pinwheel.workspace import Workspace

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
EXTRA_ENV = "PWT_TEST_EXTRA_INDEX"

MANIFEST = """\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo}}
shared_pins:
  - {{requirement: "pwt-dsl[cu13]==1.5", needed_by: [pwt-kern], why: "one DSL for every kernel"}}
gates:
  ENABLE_CUDA_13: {{when: "cuda >= 13", why: "CUDA 13 only"}}
variants:
  cu130: {{cuda: "13.0", torch: "2.0", python: "{py}", platform: manylinux_2_36_x86_64,
          base: "pinwheel/base:bookworm-py311", tag: "cu130-{{date}}"}}
  cu129: {{cuda: "12.9", torch: "2.0", python: "{py}", platform: manylinux_2_36_x86_64,
          base: "pinwheel/base:bookworm-py311", tag: "cu129-{{date}}", torch_index_env: {extra_env}}}
wheel_sets:
  - name: base
    why: "the torch stand-in"
    packages:
      - {{requirement: "pwt-torchy=={torchy}"}}
  - name: kernels
    why: "kernels on the shared DSL"
    packages:
      - {{requirement: "pwt-kern==1.0"}}
      - {{requirement: "pwt-dsl[cu13]==1.5"}}
  - name: frontend
    why: "the frontend, without its pins"
    gate: ENABLE_CUDA_13
    packages:
      - {{requirement: "pwt-frontend==1.26", no_deps: true, why: "{why}"}}
  - name: local
    why: "in-house kernels"
    packages:
      - requirement: "pwt-fastmla==1.0"
        gate: ENABLE_CUDA_13
        why: "built here"
        local: {{glob: "pwt_fastmla-*.whl", if_missing: fallback}}
        fallback: {{requirement: "pwt-sgl-fastmla==1.0", no_deps: true, why: "declares pwt-torchy>=3"}}
"""


def write_manifest(path: Path, torchy: str = "2.0", why: str = "its dsl extra pins pwt-dsl==1.0", py: str = PY) -> Path:
    path.write_text(MANIFEST.format(py=py, torchy=torchy, why=why, extra_env=EXTRA_ENV))
    return path


@pytest.fixture
def index(local_index):
    ix = local_index
    ix.add("pwt-common", "1.0")
    ix.add("pwt-common", "1.1")
    ix.add("pwt-util", "1.0")
    ix.add("pwt-torchy", "2.0", requires=["pwt-common>=1.0", "pwt-util"])
    ix.add("pwt-torchy", "2.0", requires=["pwt-common>=1.0", "pwt-util"], tags="cp311-cp311-manylinux_2_28_x86_64")
    ix.add("pwt-torchy", "2.1", requires=["pwt-common>=1.0", "pwt-util"])
    ix.add("pwt-helper", "1.0", requires=["pwt-common"])
    ix.add("pwt-kern", "1.0", requires=["pwt-frontend>=1.0", "pwt-dsl>=1.0", "pwt-helper",
                                        'pwt-winonly; sys_platform == "win32"'])
    ix.add("pwt-dsl-libs-base", "1.5")
    ix.add("pwt-dsl-libs-cu13", "1.5")
    ix.add("pwt-dsl-libs-cu13", "2.0")
    ix.add("pwt-dsl", "1.0", requires=["pwt-dsl-libs-base"])
    ix.add("pwt-dsl", "1.5", requires=["pwt-dsl-libs-base==1.5"], extras={"cu13": ["pwt-dsl-libs-cu13==1.5"]})
    ix.add("pwt-dsl", "2.0", requires=["pwt-dsl-libs-base"])
    ix.add("pwt-frontend", "1.26", extras={"dsl": ["pwt-dsl[cu13]==1.0", "pwt-util"]})
    ix.add("pwt-frontend", "1.31", requires=["pwt-util"])
    ix.add("pwt-sgl-fastmla", "1.0", requires=["pwt-torchy>=3.0"])
    ix.add("pwt-sgl-fastmla", "1.0", requires=["pwt-torchy>=3.0"], tags="cp311-abi3-manylinux_2_28_x86_64")
    return ix


@pytest.fixture
def project(index, tmp_path, monkeypatch, local_project):
    """A manifest in its own directory; PIP_INDEX_URL points default_index_url() at the local index."""
    url = index.serve()
    monkeypatch.delenv(EXTRA_ENV, raising=False)
    root = local_project(url)
    write_manifest(root / "wheels_manifest.yaml")
    return root


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def plan_of(root: Path, variant: str = "cu130"):
    return plan_variant(manifest.load(root / "wheels_manifest.yaml"), variant)


def no_leaks(directory: Path, *needles: str) -> None:
    for f in directory.iterdir():
        text = f.read_text()
        for needle in needles:
            assert needle not in text, (f.name, needle)
        assert not re.search(r"(?<![\w.])/(tmp|root|home|work|opt|etc)/", text), f.name


# ------------------------------------------------------------ pip-compile


def test_lock_pip_compile_end_to_end(project, index, capsys):
    assert run(project, "lock", "--variant", "cu130", "--resolver", "pip-compile") == 0
    d = project / "images" / "demo" / "lock" / "cu130"
    assert sorted(p.name for p in d.iterdir()) == [
        "01-base.txt", "02-kernels.txt", "03-frontend.txt", "04-local.fallback-pwt-fastmla.txt",
        "constraints.txt", "expect.json", "installer.txt", "requirements.in", "requirements.txt",
    ]
    full = parse_requirements((d / "requirements.txt").read_text())
    versions = {n: p.version for n, p in full.items()}
    assert versions == {
        "pwt-torchy": "2.0", "pwt-common": "1.1", "pwt-util": "1.0",
        "pwt-kern": "1.0", "pwt-helper": "1.0", "pwt-dsl": "1.5", "pwt-dsl-libs-base": "1.5",
        "pwt-dsl-libs-cu13": "1.5",
        # the --no-deps step's pin is a constraint: not the newer 1.31 a plain resolve takes
        "pwt-frontend": "1.26",
        "pwt-sgl-fastmla": "1.0",
    }
    # hashes: every file of that version (two wheels of pwt-torchy 2.0, one of others)
    assert len(full["pwt-torchy"].hashes) == 2 and len(full["pwt-sgl-fastmla"].hashes) == 2
    assert all(p.hashes for p in full.values())

    lock = read_lock(d)
    assert [s.file for s in lock.slices] == ["01-base.txt", "02-kernels.txt", "03-frontend.txt"]
    assert [s.file for s in lock.fallbacks] == ["04-local.fallback-pwt-fastmla.txt"]
    by_file = {s.file: sorted(s.versions) for s in lock.slices + lock.fallbacks}
    assert by_file == {
        "01-base.txt": ["pwt-common", "pwt-torchy", "pwt-util"],
        # pwt-helper's pwt-common was reached first by the base step; pwt-frontend is its own step's
        "02-kernels.txt": ["pwt-dsl", "pwt-dsl-libs-base", "pwt-dsl-libs-cu13", "pwt-helper", "pwt-kern"],
        "03-frontend.txt": ["pwt-frontend"],
        "04-local.fallback-pwt-fastmla.txt": ["pwt-sgl-fastmla"],
    }
    names = [n for s in lock.slices + lock.fallbacks for n in s.versions]
    assert sorted(names) == sorted(full) and len(names) == len(set(names))
    for s in lock.slices + lock.fallbacks:
        for p in s.packages:
            assert p.text in (d / "requirements.txt").read_text()  # hash lines exactly as in the full lock
            assert p.hashes == full[p.name].hashes

    expect = json.loads((d / "expect.json").read_text())
    assert expect["schema"] == 1 and expect["variant"] == "cu130"
    assert expect["pins"] == {n: v for n, v in versions.items() if n != "pwt-sgl-fastmla"}
    assert expect["fallbacks"] == {"pwt-sgl-fastmla": "1.0"}
    assert expect["suppressed"] == {
        "pwt-frontend": ['pwt-dsl[cu13]==1.0; extra == "dsl"', 'pwt-util; extra == "dsl"'],
        "pwt-sgl-fastmla": ["pwt-torchy>=3.0"],
    }

    text = (d / "requirements.txt").read_text()
    assert f"# pinwheel-inputs: {lock_inputs_digest(plan_of(project), 'pip-compile')}" in text.splitlines()[:5]
    assert "# pinwheel-engine: pip-compile" in text
    assert "# --no-deps: its dsl extra pins pwt-dsl==1.0" in text
    # extras stripped: a constraints file cannot carry them
    assert (d / "constraints.txt").read_text().splitlines()[-3:] == [
        "pwt-dsl==1.5", "pwt-frontend==1.26", "pwt-sgl-fastmla==1.0"]
    assert "[cu13]" not in (d / "constraints.txt").read_text()
    no_leaks(d, "127.0.0.1", index.url, "--index-url", "--extra-index-url", "--find-links")

    # --check: up to date, and it needs no network
    index.close()
    capsys.readouterr()
    assert run(project, "lock", "--check", "--variant", "cu130") == 0
    assert "up to date" in capsys.readouterr().out


def test_lock_keeps_pins_and_is_stable(project):
    assert run(project, "lock", "--variant", "cu130") == 0
    d = project / "images" / "demo" / "lock" / "cu130"
    first = {f.name: f.read_text() for f in d.iterdir()}
    assert run(project, "lock", "--variant", "cu130") == 0
    assert {f.name: f.read_text() for f in d.iterdir()} == first


def test_check_names_stale_variant_without_network(project, index, capsys):
    assert run(project, "lock", "--variant", "cu130") == 0
    index.close()  # everything below is offline
    assert run(project, "lock", "--check") == 0  # cu129 unlocked, but it needs its extra index: a note
    out = capsys.readouterr()
    assert f"${EXTRA_ENV}" in out.out

    write_manifest(project / "wheels_manifest.yaml", torchy="2.1")
    capsys.readouterr()
    assert run(project, "lock", "--check") == 1
    err = capsys.readouterr().err
    assert "cu130" in err and "stale" in err and "cu129" not in err

    # a changed --no-deps reason changes the lock's text: stale too
    write_manifest(project / "wheels_manifest.yaml", why="another reason")
    assert run(project, "lock", "--check", "--variant", "cu130") == 1
    write_manifest(project / "wheels_manifest.yaml")
    assert run(project, "lock", "--check", "--cuda", "13") == 0

    # a deleted slice is stale as well
    (project / "images" / "demo" / "lock" / "cu130" / "02-kernels.txt").unlink()
    capsys.readouterr()
    assert run(project, "lock", "--check") == 1
    assert "02-kernels.txt" in capsys.readouterr().err


def test_missing_extra_index_is_reported_and_the_rest_locked(project, capsys):
    assert run(project, "lock") == 2
    err = capsys.readouterr().err
    assert "cu129" in err and f"${EXTRA_ENV}" in err and "not set" in err
    assert (project / "images" / "demo" / "lock" / "cu130" / "requirements.txt").exists()
    assert not (project / "images" / "demo" / "lock" / "cu129").exists()
    assert run(project, "lock", "--variant", "cu129") == 2
    assert run(project, "lock", "--cuda", "13") == 0  # cu129 excluded: nothing to complain about


def test_extra_index_variant_gates_off_steps(project, index, monkeypatch):
    monkeypatch.setenv(EXTRA_ENV, index.url)  # the torch index of a real cu129; here the same index
    assert run(project, "lock", "--variant", "cu129") == 0
    d = project / "images" / "demo" / "lock" / "cu129"
    no_leaks(d, "127.0.0.1", index.url)
    frontend = (d / "03-frontend.txt").read_text()
    assert "Gated off" in frontend and not parse_requirements(frontend)
    fallback = (d / "04-local.fallback-pwt-fastmla.txt").read_text()
    assert "gated off" in fallback and not parse_requirements(fallback)
    lock = read_lock(d)
    assert not [s for s in lock.slices if s.file == "03-frontend.txt"][0].active
    # the frontend is not pinned for cu129: it comes in as pwt-kern's dependency, in pwt-kern's step
    assert [s.file for s in lock.slices if "pwt-frontend" in s.versions] == ["02-kernels.txt"]
    assert "pwt-sgl-fastmla" not in lock.versions
    assert lock.expect["suppressed"] == {} and lock.expect["fallbacks"] == {}
    assert check_lock(plan_of(project, "cu129"), project).status == "ok"


def test_pip_compile_refuses_another_python(project, capsys):
    write_manifest(project / "wheels_manifest.yaml", py="3.99" if PY != "3.99" else "3.98")
    assert run(project, "lock", "--variant", "cu130", "--resolver", "pip-compile") == 2
    err = capsys.readouterr().err
    assert "--engine uv" in err and "Python 3.9" in err
    assert not (project / "images" / "demo" / "lock" / "cu130").exists()


@pytest.mark.parametrize("engine", ["uv", "pip-compile"])
def test_resolver_failure_exits_1(project, capsys, engine):
    write_manifest(project / "wheels_manifest.yaml", torchy="9.9")  # not on the index
    assert run(project, "lock", "--variant", "cu130", "--resolver", engine) == 1
    err = capsys.readouterr().err
    assert f"{engine} failed" in err and "127.0.0.1" not in err


# --------------------------------------------------------------------- uv


def test_lock_uv_matches_pip_compile(project, index, tmp_path):
    """uv (the default for a new lock) and pip-compile make the same lock: every file but requirements.txt
    byte for byte, and in that one the same pins and hashes (its header and annotations are the resolver's)."""
    assert run(project, "lock", "--variant", "cu130") == 0
    d = project / "images" / "demo" / "lock" / "cu130"
    by_uv = read_lock(d)
    uv_files = {f.name: f.read_text() for f in d.iterdir()}
    assert "autogenerated by uv" in uv_files["requirements.txt"]
    assert run(project, "lock", "--variant", "cu130", "--resolver", "pip-compile", "--upgrade") == 0
    by_pip = read_lock(d)
    pip_files = {f.name: f.read_text() for f in d.iterdir()}
    assert uv_files.keys() == pip_files.keys()
    assert {n: t for n, t in uv_files.items() if n != "requirements.txt"} == \
        {n: t for n, t in pip_files.items() if n != "requirements.txt"}
    assert by_uv.engine == "uv" and by_pip.engine == "pip-compile"
    assert by_uv.versions == by_pip.versions
    assert {n: p.hashes for n, p in by_uv.packages.items()} == {n: p.hashes for n, p in by_pip.packages.items()}
    assert [(s.file, s.versions) for s in by_uv.slices] == [(s.file, s.versions) for s in by_pip.slices]
    assert by_uv.inputs_digest != by_pip.inputs_digest  # the engine is an input
    no_leaks(d, "127.0.0.1", index.url)
    index.close()
    assert run(project, "lock", "--check") == 0  # checked against the engine the lock was made with


def test_uv_resolves_for_another_python(project, index):
    """uv needs no interpreter of the target's version: it resolves for --python-version."""
    other = "3.12" if PY != "3.12" else "3.11"
    write_manifest(project / "wheels_manifest.yaml", py=other)
    assert run(project, "lock", "--variant", "cu130", "--resolver", "uv") == 0
    lock = read_lock(project / "images" / "demo" / "lock" / "cu130")
    assert lock.versions["pwt-torchy"] == "2.0"
    assert check_lock(plan_of(project), project).status == "ok"


# ------------------------------------------------------------- the digest


def test_inputs_digest_tracks_what_the_lock_is_made_from(tmp_path):
    path = write_manifest(tmp_path / "wheels_manifest.yaml")
    plan = plan_variant(manifest.load(path), "cu130")
    inputs = lock_inputs(plan)
    assert inputs.requirements == ("pwt-torchy==2.0", "pwt-kern==1.0", "pwt-dsl[cu13]==1.5")
    assert inputs.constraints == ("pwt-dsl==1.5", "pwt-frontend==1.26", "pwt-sgl-fastmla==1.0")
    base = lock_inputs_digest(plan)
    assert base == lock_inputs_digest(plan_variant(manifest.load(path), "cu130"))  # deterministic
    assert lock_inputs_digest(plan, "pip-compile") != base  # the engine is an input (uv by default)
    # so is the installer: `installer: pip` locks no uv, and its image installs with pip
    assert lock_inputs_digest(dataclasses.replace(plan, installer="pip")) != base
    assert lock_inputs_digest(plan_variant(manifest.load(path), "cu129")) != base
    # cu129: the gated frontend and fallback are no constraints there
    assert lock_inputs(plan_variant(manifest.load(path), "cu129")).constraints == ("pwt-dsl==1.5",)
    write_manifest(path, torchy="2.1")
    assert lock_inputs_digest(plan_variant(manifest.load(path), "cu130")) != base
    # moving a package to another step changes the slices, so the digest
    text = MANIFEST.format(py=PY, torchy="2.0", why="x", extra_env=EXTRA_ENV)
    write_manifest(path, why="x")
    before = lock_inputs_digest(plan_variant(manifest.load(path), "cu130"))
    moved = text.replace('      - {requirement: "pwt-dsl[cu13]==1.5"}\n', "").replace(
        '      - {requirement: "pwt-torchy==2.0"}\n',
        '      - {requirement: "pwt-torchy==2.0"}\n      - {requirement: "pwt-dsl[cu13]==1.5"}\n')
    assert moved != text
    path.write_text(moved)
    assert lock_inputs_digest(plan_variant(manifest.load(path), "cu130")) != before


def test_lock_and_report_share_one_index_cache(project, monkeypatch, tmp_path):
    """Without PINWHEEL_CACHE_DIR the lock caches under the repository, where the report reads."""
    monkeypatch.delenv("PINWHEEL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert run(project, "lock", "--variant", "cu130") == 0
    cache = Workspace.of(manifest.load(project / "wheels_manifest.yaml")).index_cache
    assert cache == project / ".cache" / "index"
    assert (cache / "pages").is_dir() and (cache / "metadata").is_dir()
    assert not (tmp_path / "xdg" / "pinwheel").exists()
    assert index_client(argparse.Namespace(), manifest.load(project / "wheels_manifest.yaml")).cache_dir == cache


def test_lock_dir_layout(tmp_path):
    m = manifest.load(write_manifest(tmp_path / "wheels_manifest.yaml"))
    assert Workspace.of(m).lock_dir("cu129") == tmp_path / "images" / "demo" / "lock" / "cu129"


# ---------------------------------------------------------------- stale locks


def test_report_on_a_stale_lock_says_so_and_is_not_clean(project, index, capsys):
    index.add("pwt-kern", "1.1", requires=["pwt-frontend>=1.0", "pwt-dsl>=1.0", "pwt-helper"])
    assert run(project, "lock", "--variant", "cu130", "--resolver", "uv") == 0
    capsys.readouterr()
    run(project, "report", "--variant", "cu130", "--json")
    fresh = json.loads(capsys.readouterr().out)
    assert fresh["locked"] is True and fresh["lock"]["status"] == "ok"

    path = project / "wheels_manifest.yaml"
    path.write_text(path.read_text().replace('"pwt-kern==1.0"', '"pwt-kern==1.1"'))
    rc = run(project, "report", "--variant", "cu130", "--json")
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert data["locked"] is False and data["lock"]["status"] == "stale"
    assert data["summary"]["clean"] is False and data["summary"]["lock"] == "stale"
    # what the manifest asks for now, not what the stale lock holds
    assert {p["name"]: p["version"] for p in data["packages"]}["pwt-kern"] == "1.1"
    assert "make lock" in data["next_steps"][0]

    rc = run(project, "report", "--variant", "cu130")
    text = capsys.readouterr().out
    assert rc == 1
    assert text.splitlines()[0].startswith("lock of cu130 is stale")
    assert "as locked" not in text


@pytest.mark.parametrize("command", [["build"], ["publish"], ["bump", "pwt-dsl==2.0"], ["smoke"]])
def test_build_bump_publish_refuse_a_stale_lock(project, index, capsys, command):
    assert run(project, "lock", "--variant", "cu130", "--resolver", "uv") == 0
    path = project / "wheels_manifest.yaml"
    path.write_text(path.read_text().replace("pwt-torchy==2.0", "pwt-torchy==2.1"))
    capsys.readouterr()
    # refused before any engine or index is asked: the stale check comes first
    assert run(project, *command, "--variant", "cu130") == 2
    err = capsys.readouterr().err
    assert "lock of variant cu130 is stale" in err and "make lock" in err
