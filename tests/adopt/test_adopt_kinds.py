"""`import` writes the kinds that landed after it: env, run (builds, downloads, symlinks, alternatives,
locales), apt .debs, holds, removals and signed sources, git submodules and build settings, named indexes
and find-links, override: true, uv-project. Each entry loads, renders and counts as expressed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pinwheel import manifest as manifest_mod
from pinwheel.adopt import adopt, to_yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "corpus"


def build_py(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def kinds():
    adopted = adopt(CORPUS / "kinds.Dockerfile")
    return adopted, adopted.manifest["steps"], [t["at"] + ": " + t["what"] for t in adopted.manifest["todo"]]


def by_kind(steps, kind):
    return [s for s in steps if s["kind"] == kind]


def todo_at(adopted, step, key):
    return f"steps[{adopted.manifest['steps'].index(step)}].{key}"


def test_every_instruction_of_the_new_shapes_is_expressed(kinds):
    adopted, _, _ = kinds
    assert adopted.listed == [] and adopted.dropped == 0
    assert adopted.expressed == adopted.instructions == 24


def test_env_lines_are_env_steps_with_arg_defaults_filled_in(kinds):
    _, steps, _ = kinds
    env = by_kind(steps, "env")
    assert [[(v["name"], v["value"]) for v in s["env"]] for s in env] == [
        [("CUDA_HOME", "/usr/local/cuda"), ("TOOL_HOME", "/usr/src/tool-2.5.1/")],
        [("PATH", "${PATH}:/usr/local/nvidia/bin")]]  # a reference to the variable before it stays one
    assert all(v["why"] == "TODO: why" for s in env for v in s["env"])
    assert steps.index(env[1]) < steps.index(by_kind(steps, "apt")[0])  # at the ENV's place among the steps


def test_apt_holds_removes_debs_and_signed_sources(kinds):
    adopted, steps, todo = kinds
    apt = by_kind(steps, "apt")
    first = apt[0]
    assert {p["name"]: p["version"] for p in first["packages"]}["libnccl2"] == "2.28.9-1+cuda13.0"
    assert first["hold"] == ["libnccl2"]  # apt-mark hold of what it installs
    assert [s.get("remove") for s in apt if "remove" in s] == [[{"name": "libcudnn9-cuda-13", "why": "TODO: why"}]]
    source = next(s for s in apt if "sources" in s)
    assert source["sources"] == [{"name": "tools", "uris": "https://example.invalid/apt", "suites": "stable",
                                  "components": "main",
                                  "key": {"url": "https://example.invalid/keys/tools.asc", "sha256": "0" * 64,
                                          "fingerprint": "0" * 40}, "why": "TODO: why"}]
    assert [p["name"] for p in source["packages"]] == ["tools-cli"]  # the source goes with the install after it
    assert any(t.startswith(todo_at(adopted, source, "sources[0].key.fingerprint")) for t in todo)
    deb = next(s for s in apt if "debs" in s)
    assert deb["debs"] == [{"name": "profiler", "version": "2025.6.1-1",
                            "url": "https://example.invalid/tools/profiler_2025.6.1-1_amd64.deb", "sha256": "0" * 64,
                            "why": "TODO: why"}]
    assert any(t.startswith(todo_at(adopted, deb, "debs[0].sha256")) for t in todo)


def test_shell_commands_are_run_steps(kinds):
    adopted, steps, todo = kinds
    runs = {s["name"]: s for s in by_kind(steps, "run")}
    # a RUN that installs packages keeps them in apt; its other command is a run step right after
    alternatives = runs["run-update-alternatives"]
    assert alternatives["script"].startswith("update-alternatives --install /usr/bin/gcc gcc /usr/bin/gcc-10 110")
    assert steps.index(alternatives) == steps.index(by_kind(steps, "apt")[0]) + 1
    assert runs["run-locale-gen"]["script"] == "locale-gen en_US.UTF-8"
    # an ARG with no default is empty, as in a build without --build-arg (the run kind runs bash with set -u)
    assert runs["run-sed"]["script"].startswith('MIRROR=""  # ARG MIRROR')
    # a download leaves the script: the kind fetches it, checked, to where the Dockerfile wrote it
    build = runs["run-tar"]
    assert build["downloads"] == [{"url": "https://example.invalid/tool/archive/v2.5.1.tar.gz", "sha256": "0" * 64,
                                   "dest": "/tmp/v2.5.1.tar.gz"}]
    assert "curl" not in build["script"] and "make -j$(nproc)" in build["script"]
    assert build["env"] == {"TOOL_VERSION": "2.5.1"}
    assert any(t.startswith(todo_at(adopted, build, "downloads[0].sha256")) for t in todo)
    # a make build from a clone at a commit is a run step as written
    assert "git checkout ae98985f5599617be94042f4aa3637d10014ce89" in runs["run-make"]["script"]
    # the symlink after the .deb install, without the rm of the .deb the apt kind fetched
    assert runs["run-ln"]["script"] == "ln -sf /opt/profiler/bin/prof /usr/local/bin/prof"
    assert steps.index(runs["run-ln"]) == steps.index(next(s for s in steps if "debs" in s)) + 1


def test_git_submodules_settings_and_build_env(kinds):
    _, steps, _ = kinds
    gits = {s["url"].rsplit("/", 1)[-1]: s for s in by_kind(steps, "git")}
    assert gits["fused.git"]["config_settings"] == {"--build-option": "--cpp_ext --cuda_ext"}
    assert gits["fused.git"]["env"] == {"MAX_JOBS": "64"} and gits["fused.git"]["isolation"] is False
    assert gits["mla.git"]["submodules"] is True  # git clone --recursive
    assert gits["attn.git"]["submodules"] is True  # git submodule update --init
    assert "submodules" not in gits["fused.git"]


def test_named_indexes_find_links_and_override(kinds):
    adopted, steps, todo = kinds
    m = adopted.manifest
    assert m["indexes"] == {
        "example-cu130": {"url": "https://example.invalid/whl/cu130", "why": "TODO: why"},
        "example-flashinfer": {"url": "https://example.invalid/flashinfer/whl", "why": "TODO: why"},
        "example-cu128": {"url": "https://example.invalid/tile/whl/cu128/", "why": "TODO: why", "flat": True}}
    packages = {p["requirement"]: (s, p) for s in by_kind(steps, "wheels") for p in s["packages"]}
    step, codec = packages["torchcodec==0.8.0"]
    assert codec["index"] == "example-cu130" and not any(t.startswith(todo_at(adopted, step, "packages[0].index"))
                                                         for t in todo)  # --index-url: only that index
    step, jit = packages["flashinfer-jit-cache==0.6.15"]
    assert jit["index"] == "example-flashinfer"
    assert any(t.startswith(todo_at(adopted, step, "packages[0].index")) for t in todo)  # --extra-index-url
    assert packages["tilelang==0.1.8"][1]["index"] == "example-cu128"
    step, nccl = packages["nvidia-nccl-cu13==2.29.7"]
    assert nccl["override"] is True and nccl["no_deps"] is True and nccl["why"] == "TODO: why"
    assert any(t.startswith(todo_at(adopted, step, "packages[0].why") + ": nvidia-nccl-cu13 is one torch's wheels pin")
               for t in todo)


def test_the_new_entries_load_render_and_report_counts_their_todos(tmp_path):
    (tmp_path / "Dockerfile").write_text((CORPUS / "kinds.Dockerfile").read_text())
    proc = build_py("import", "Dockerfile", cwd=tmp_path)
    assert proc.returncode == 0 and "24 instructions: 24 expressed, 0 listed, 0 dropped" in proc.stdout, proc.stderr
    m = manifest_mod.load(tmp_path / "wheels_manifest.yaml")
    assert {"env", "run", "apt", "git", "wheels"} <= {s.kind for s in m.steps}
    proc = build_py("render", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dockerfile = next((tmp_path / "images").glob("*/Dockerfile")).read_text()
    assert "locale-gen en_US.UTF-8" in dockerfile and "pinwheel-tools.sources" in dockerfile
    assert 'ENV PATH="${PATH}:/usr/local/nvidia/bin"' in dockerfile
    # a TODO placeholder loads, and the build refuses it before anything is built
    proc = build_py("build", cwd=tmp_path)
    assert proc.returncode == 2 and f"the manifest still has {len(m.todos)} TODO(s) left by import" in proc.stderr


def test_a_rebuilt_script_runs_as_the_dockerfile_did(tmp_path):
    """The quoting of a command rebuilt from its words keeps what the shell saw: run it in bash."""
    target = tmp_path / "conf"
    target.write_text("url = http://archive a b\n")
    (tmp_path / "Dockerfile").write_text(
        "FROM example.invalid/base:1\nARG HOST=mirror.example\n"
        f"RUN apt-get install -y tmux=3.3a-3 && sed -i \"s|http://archive a b|https://${{HOST}}/x 'q'|\" {target}\n")
    steps = adopt(tmp_path / "Dockerfile").manifest["steps"]
    run = by_kind(steps, "run")[0]
    assert run["env"] == {"HOST": "mirror.example"}
    subprocess.run(["bash", "-euo", "pipefail", "-c", run["script"]], check=True, env={**run["env"], "PATH": "/usr/bin:/bin"})
    assert target.read_text() == "url = https://mirror.example/x 'q'\n"


def test_what_a_run_step_cannot_take_stays_listed(tmp_path):
    (tmp_path / "Dockerfile").write_text(
        "FROM example.invalid/base:1\nRUN apt-get install -y tmux=3.3a-3\n"
        "COPY tools/setup.sh /tmp/setup.sh\nRUN bash /tmp/setup.sh\n"
        "RUN curl -fsSL https://example.invalid/install.sh | sh\n"
        "RUN ARCH=$(uname -m) && wget https://example.invalid/${ARCH}/tool.tar.gz && tar xzf tool.tar.gz\n")
    adopted = adopt(tmp_path / "Dockerfile")
    assert not by_kind(adopted.manifest["steps"], "run")
    listed = "\n".join(adopted.listed)
    assert "line 4: `bash /tmp/setup.sh`: reads /tmp/setup.sh, a file the Dockerfile COPYs" in listed
    assert "line 5: `curl -fsSL https://example.invalid/install.sh`: downloads" in listed  # into a pipe
    assert "line 6:" in listed and "a URL the build computes" in listed
    assert adopted.dropped == 0


UV_LOCK = """\
version = 1
requires-python = ">=3.12"

[[package]]
name = "app"
version = "0.1.0"
source = { editable = "." }
dependencies = [{ name = "six" }]

[[package]]
name = "six"
version = "1.17.0"
source = { registry = "https://example.invalid/simple" }
"""


def test_uv_sync_of_a_copied_project_is_a_uv_project_step(tmp_path):
    (tmp_path / "Dockerfile").write_text((CORPUS / "uvsync.Dockerfile").read_text())
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0.1.0"\ndependencies = ["six"]\n')
    (tmp_path / "uv.lock").write_text(UV_LOCK)
    proc = build_py("import", "Dockerfile", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load((tmp_path / "wheels_manifest.yaml").read_text())
    uv = by_kind(data["steps"], "uv-project")
    assert uv == [{"name": "uv-project", "kind": "uv-project", "why": "TODO: why", "project": "."}]
    assert data["image"]["venv"] == "/workspace/app/.venv" and "environment" not in data["variants"]["main"]
    m = manifest_mod.load(tmp_path / "wheels_manifest.yaml")
    assert next(s for s in m.steps if s.kind == "uv-project").packages == (("six", "1.17.0"),)
    assert build_py("render", cwd=tmp_path).returncode == 0
    # without the project's files beside the manifest, the step is listed with the loader's reason
    adopted = adopt(CORPUS / "uvsync.Dockerfile", tmp_path / "elsewhere" / "m.yaml")
    assert any("uv-project" in item and "is not a relative path inside the manifest's directory" in item
               for item in adopted.listed)


def test_a_file_with_nothing_to_express_is_refused_with_a_located_message(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM example.invalid/base:1\nCOPY app /app\nCMD [\"app\"]\n")
    proc = build_py("import", "Dockerfile", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "Dockerfile: no instruction becomes a manifest step" in proc.stderr


def test_a_local_wheel_else_its_source_build_is_one_step_with_prebuilt(tmp_path):
    """`wheels/` copy if there, else build it: one distribution, one entry. A git URL in the else-branch is a
    git step and an index pin built with --no-build-isolation an sdist step, each taking the wheel as
    `prebuilt:`; the wheel leaves its wheel set, and nothing of the RUN is listed."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM nvcr.io/nvidia/pytorch:25.01-py3\n"
        "COPY wheel[s]/ /tmp/wheels/\n"
        "RUN if ls /tmp/wheels/fht-*.whl 2>/dev/null | grep -q .; then \\\n"
        "      pip install /tmp/wheels/fht-*.whl; \\\n"
        "    else \\\n"
        '      pip install "git+https://example.invalid/org/fht.git@e7706faf8d1c3b9f241e36860640ad1dac644ede" '
        "--no-build-isolation; \\\n"
        "    fi\n"
        "RUN if ls /tmp/wheels/hadamard-*.whl 2>/dev/null | grep -q .; then \\\n"
        "      pip install /tmp/wheels/hadamard-*.whl; \\\n"
        "    else \\\n"
        "      pip install hadamard==1.0.1 --no-build-isolation; \\\n"
        "    fi\n")
    adopted = adopt(dockerfile)
    steps = adopted.manifest["steps"]
    [git] = by_kind(steps, "git")
    [sdist] = by_kind(steps, "sdist")
    assert git["prebuilt"]["glob"] == "fht-*.whl" and git["isolation"] is False
    assert (sdist["package"], sdist["prebuilt"]["glob"], sdist["isolation"]) == ("hadamard==1.0.1", "hadamard-*.whl",
                                                                                 False)
    assert not by_kind(steps, "wheels") and not adopted.listed
    assert todo_at(adopted, sdist, "sha256") in [t["at"] for t in adopted.manifest["todo"]]
    out = tmp_path / "wheels_manifest.yaml"
    out.write_text(to_yaml(adopted, dockerfile))
    assert build_py("--manifest", str(out), "render", "--stdout", cwd=tmp_path).returncode == 0
