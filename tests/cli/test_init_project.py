"""`init`, the manifest found upward from the current directory, and what outside a project says."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinwheel import cli, manifest
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfiles

ROOT = Path(__file__).resolve().parents[2]


def the_starter_packages(index) -> None:
    """The index a starter manifest's report reads: the packages it names and what they require."""
    index.add("torch", "2.13.0", requires=["cuda-bindings<14,>=13.0.3"])
    index.add("cuda-bindings", "13.4.4")
    index.add("cuda-bindings", "13.5.0")
    index.add("cuda-python", "13.4.4", requires=["cuda-bindings~=13.4.4"])
    index.add("flashinfer-python", "0.6.15.post1",
              requires=["nvidia-cutlass-dsl>=4.5.0", "apache-tvm-ffi!=0.1.8,<0.2,>=0.1.6", "cuda-python", "torch"])
    index.add("nvidia-cutlass-dsl", "4.6.2", extras={"cu13": ["nvidia-cutlass-dsl-libs-cu13==4.6.2"]})
    index.add("nvidia-cutlass-dsl-libs-cu13", "4.6.2")
    index.add("apache-tvm-ffi", "0.1.11")


def test_init_writes_a_commented_cuda_13_manifest_that_loads_renders_and_reports_clean(
        tmp_path, monkeypatch, capsys, local_index):
    the_starter_packages(local_index)
    url = local_index.serve()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PINWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["init"]) == 0
    text = (tmp_path / "wheels_manifest.yaml").read_text()
    assert text.count("\n#") >= 5  # commented for a reader who has never seen one
    m = manifest.load(tmp_path / "wheels_manifest.yaml")
    plan = plan_variant(m, "cu130")
    assert plan.variant.cuda_major == 13
    assert {p.name for p in plan.packages()} >= {"torch", "flashinfer-python", "nvidia-cutlass-dsl"}
    assert "FROM ${BASE} AS image" in render_dockerfiles([plan])["Dockerfile"]
    capsys.readouterr()
    assert cli.main(["report", "--index-url", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["verdict"] == "clean"
    assert cli.main(["render"]) == 0
    assert (tmp_path / "images" / "train" / "Dockerfile").is_file()


def test_init_never_replaces_a_manifest_without_force(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wheels_manifest.yaml").write_text("mine\n")
    assert cli.main(["init"]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert (tmp_path / "wheels_manifest.yaml").read_text() == "mine\n"
    assert cli.main(["init", "--force"]) == 0
    manifest.load(tmp_path / "wheels_manifest.yaml")


def test_init_from_a_dockerfile_goes_through_import_and_says_how_it_was_started(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\nRUN pip install torch==2.13.0\n")
    assert cli.main(["init", "--from", "Dockerfile"]) == 0
    text = (tmp_path / "wheels_manifest.yaml").read_text()
    assert text.startswith("# Started by `pinwheel init --from Dockerfile`")
    assert "build.py" not in text
    assert {p.name for p in plan_variant(manifest.load(tmp_path / "wheels_manifest.yaml"), "main").packages()} \
        == {"torch"}


def test_import_names_the_command_it_was_run_as(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\nRUN pip install torch==2.13.0\n")
    monkeypatch.setattr("sys.argv", ["pinwheel", "import", "Dockerfile"])
    assert cli.main(["import", "Dockerfile"]) == 0
    assert "`pinwheel import Dockerfile`" in (tmp_path / "wheels_manifest.yaml").read_text()
    monkeypatch.setattr("sys.argv", [str(ROOT / "build.py"), "import", "Dockerfile"])
    assert cli.main(["import", "Dockerfile", "-o", "b.yaml"]) == 0
    assert "`build.py import Dockerfile`" in (tmp_path / "b.yaml").read_text()


def test_the_manifest_is_found_in_the_nearest_directory_above(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init"]) == 0
    deeper = tmp_path / "docs" / "notes"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    assert cli.main(["render"]) == 0
    assert (tmp_path / "images" / "train" / "Dockerfile").is_file()  # at the project's root, not here
    assert not (deeper / "images").exists()


@pytest.mark.parametrize("command", [["report"], ["render"], ["lock", "--check"], ["build"]])
def test_outside_any_project_each_command_says_so_and_how_to_start_one(tmp_path, monkeypatch, capsys, command):
    outside = tmp_path / "empty"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert cli.main(command) == 2
    message = capsys.readouterr().err
    assert "not a pinwheel project" in message and "pinwheel init" in message
    assert "Traceback" not in message and len(message.strip().splitlines()) == 1


def test_outside_a_project_under_home_the_directory_is_written_as_the_shell_does(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / "train").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "train")
    assert cli.main(["report"]) == 2
    assert "no wheels_manifest.yaml in ~/train or any directory above it" in capsys.readouterr().err
