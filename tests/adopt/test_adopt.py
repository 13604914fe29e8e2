"""`import` over a corpus of hand-written Dockerfiles: nothing dropped, and the output always loads and renders."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel import manifest as manifest_mod
from pinwheel.adopt import adopt, to_yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.Dockerfile"))


def build_py(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_instruction_is_expressed_or_listed(path):
    adopted = adopt(path)
    count = sum(1 for _ in __import__("pinwheel.dockerfiles", fromlist=["read"]).read(path))
    assert adopted.instructions == count
    assert adopted.dropped == 0, adopted.accounting
    assert adopted.expressed + adopted.listed_instructions == count
    assert adopted.accounting == (f"{count} instructions: {adopted.expressed} expressed, "
                                  f"{adopted.listed_instructions} listed, 0 dropped")
    for item in adopted.listed:  # each listed item names its Dockerfile line
        assert item.startswith("line ") and int(item.split(":")[0][5:]) >= 1


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_import_loads_and_renders(path, tmp_path):
    shutil.copy(path, tmp_path / path.name)
    proc = build_py("import", path.name, "-o", "wheels_manifest.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 dropped" in proc.stdout
    m = manifest_mod.load(tmp_path / "wheels_manifest.yaml")
    assert m.todos  # what import cannot know is a TODO, never a silent guess
    proc = build_py("render", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list((tmp_path / "images").glob("*/Dockerfile"))


def test_trainer_shapes_become_steps_of_todays_kinds():
    adopted = adopt(CORPUS / "trainer.Dockerfile")
    m = adopted.manifest
    steps = {s["name"]: s for s in m["steps"]}
    kinds = [s["kind"] for s in m["steps"]]
    assert {"apt", "wheels", "remove", "git", "asset"} <= set(kinds)
    apt = next(s for s in m["steps"] if s["kind"] == "apt")
    assert {p["name"]: p["version"] for p in apt["packages"]} == {"rsync": "0~todo", "tmux": "3.3a-3"}
    remove = next(s for s in m["steps"] if s["kind"] == "remove")
    assert [p["name"] for p in remove["packages"]] == ["old-engine", "old-engine-torch"]
    # the CUDA-13 branch and its else-branch are two gated sets, not one
    cu13 = [s for s in m["steps"] if s.get("gate") == "ENABLE_CUDA_13"]
    cu12 = [s for s in m["steps"] if s.get("gate") == "ENABLE_CUDA_13_OFF"]
    assert [p["requirement"] for s in cu13 for p in s["packages"]] == ["nvidia-cudnn-cu13==9.22.0.52"]
    assert [p["requirement"] for s in cu12 for p in s["packages"]] == ["nvidia-cudnn-cu12==9.22.0.52"]
    assert m["gates"]["ENABLE_CUDA_13"]["when"] == "cuda >= 13" and m["gates"]["ENABLE_CUDA_13_OFF"]["when"] == "cuda < 13"
    # the ARG default is filled in; --no-deps is kept
    plugin = [p for s in m["steps"] if s["kind"] == "wheels" for p in s["packages"]
              if p["requirement"].startswith("plugin")]
    assert plugin == [{"requirement": "plugin==0.4.1", "no_deps": True, "why": "TODO: why"}]
    # a git URL at a full commit is a git step at that commit; at a branch, a placeholder and a TODO
    gits = {s["url"]: s for s in m["steps"] if s["kind"] == "git"}
    assert gits["https://example.invalid/org/bridge.git"]["rev"] == "0123456789abcdef0123456789abcdef01234567"
    assert gits["https://example.invalid/org/bridge.git"]["isolation"] is False
    assert gits["https://example.invalid/org/tools.git"]["rev"] == "0" * 40
    todo = [t["what"] for t in m["todo"]]
    assert any("git ls-remote https://example.invalid/org/tools.git main" in t for t in todo)
    asset = next(s for s in m["steps"] if s["kind"] == "asset")
    assert asset["package"] == "kern==1.0.0+cu130" and asset["url"]["sha256"] == "0" * 64
    # the python -c assertion is a verify snippet on the package it checks
    tvm = [p for s in m["steps"] if s["kind"] == "wheels" for p in s["packages"]
           if p["requirement"] == "apache-tvm-ffi==0.1.11"]
    assert "assert v('apache-tvm-ffi')" in tvm[0]["verify"]["python"] and tvm[0]["no_deps"] is True
    # cuda and python from the wheels' tags; the base followed through ARG and stage name; the image named
    assert m["variants"]["main"]["cuda"] == "13.0" and m["variants"]["main"]["python"] == "3.12"
    assert m["variants"]["main"]["base"] == "example.invalid/framework:v1.2.3"
    assert m["image"]["name"] == "trainer"  # after the file
    assert set(m["gates"]) == {s["gate"] for s in m["steps"] if "gate" in s}  # each gate guards a step
    assert any("line 31" in item and "no such option: -n" in item for item in adopted.listed)
    # ENV is an env step now, at its place among the steps
    assert [s["env"] for s in m["steps"] if s["kind"] == "env"] == \
        [[{"name": "FLASH_VERSION", "why": "TODO: why", "value": "0.6.15"}]]
    assert not any(item.startswith("line 53:") for item in adopted.listed)
    assert "tools" in steps or any(s["kind"] == "git" for s in m["steps"])


def test_a_crafted_heredoc_body_never_becomes_yaml(tmp_path):
    path = CORPUS / "heredoc.Dockerfile"
    text = to_yaml(adopt(path), path)
    m = manifest_mod.parse(text, tmp_path / "m.yaml")
    assert "EVIL" not in m.gates
    assert m.variants["main"].base == "nvidia/cuda:13.0.2-devel-ubuntu24.04" and m.variants["main"].cuda == "13.0"
    reqs = [str(p.requirement) for ws in m.wheel_sets for p in ws.packages]
    assert "numpy==2.1.0" in reqs and "gates-evil==1.0" in reqs


def test_stages_the_final_image_does_not_use_are_listed():
    adopted = adopt(CORPUS / "uvproject.Dockerfile")
    assert any(item.startswith("line 19:") and "stage lock" in item for item in adopted.listed)
    assert adopted.manifest["variants"]["main"]["base"] == "nvidia/cuda:13.0.2-devel-ubuntu24.04"
    assert adopted.dropped == 0
    assert adopted.manifest["image"]["name"] == "uvproject"


def test_report_counts_each_todo_as_unchecked_never_clean(tmp_path, local_index):
    local_index.add("numpy", "2.1.0")
    url = local_index.serve()
    (tmp_path / "Dockerfile").write_text("FROM example.invalid/python:3.11-slim\nRUN python3 -m venv /opt/venv\n"
                                         "RUN pip install numpy==2.1.0\n")
    assert build_py("import", "Dockerfile", cwd=tmp_path).returncode == 0
    m = manifest_mod.load(tmp_path / "wheels_manifest.yaml")
    assert m.todos and m.variants["main"].python == "3.11"  # the python from the base's tag
    for extra in ([], ["--allow-unchecked"]):
        proc = build_py("report", "--json", "--no-lock", "--index-url", url, *extra, cwd=tmp_path)
        summary = json.loads(proc.stdout)["summary"]
        assert proc.returncode == 3, proc.stderr
        assert summary["verdict"] == "unchecked" and not summary["clean"]
        assert summary["todo"] == list(m.todos) and summary["unchecked"] >= len(m.todos)
    # and it is not built: the engine is never reached (exit 2 before the lock or any wheel is looked at)
    proc = build_py("build", cwd=tmp_path)
    assert proc.returncode == 2 and f"the manifest still has {len(m.todos)} TODO(s) left by import" in proc.stderr
    assert "Traceback" not in proc.stderr
    # filled in, the TODOs go, and the same report is clean
    text = (tmp_path / "wheels_manifest.yaml").read_text().split("\ntodo:")[0] + "\n"
    (tmp_path / "wheels_manifest.yaml").write_text(text)
    proc = build_py("report", "--json", "--no-lock", "--index-url", url, cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["summary"]["verdict"] == "clean", proc.stdout[-2000:]


CHECKS = """\
FROM python:3.11
RUN pip install nvidia-cudnn-cu12==9.22.0.52
RUN set -- /tmp/wheels/mooncake*.whl; pip install --force-reinstall --no-deps "$1" && \\
    python3 -c "from mooncake.store import Bundle; Bundle.put"
RUN pip install apache-tvm-ffi==0.1.11 flash-attn==2.8.3 && python3 -c "import tvm_ffi; tvm_ffi.Module"
RUN pip install six==1.17.0
RUN python3 -c "import flash_attn"
RUN python3 -c "import sys; assert sys.version_info >= (3, 11)"
"""


def test_a_python_check_goes_on_the_package_it_checks_or_stays_listed_with_its_run(tmp_path):
    """A check whose own RUN installs what import cannot follow is listed with that RUN, never put on an earlier,
    unrelated package; a check names its package by the module it imports; one that names none goes on the
    last package before it."""
    path = tmp_path / "Dockerfile"
    path.write_text(CHECKS)
    adopted = adopt(path)
    verified = {p["requirement"]: p["verify"]["python"] for s in adopted.manifest["steps"] if s["kind"] == "wheels"
                for p in s["packages"] if "verify" in p}
    assert verified == {"apache-tvm-ffi==0.1.11": "import tvm_ffi; tvm_ffi.Module",
                        "flash-attn==2.8.3": "import flash_attn",
                        "six==1.17.0": "import sys; assert sys.version_info >= (3, 11)"}
    assert "line 3: python -c check: its RUN installs what import does not express (listed at this line)" \
        in adopted.listed
