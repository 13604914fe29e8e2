"""The users' image workflow (.github/workflows/images.yml): its structure, read with PyYAML, and zizmor's
offline audit of every workflow (no finding at medium severity or above)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "images.yml"
GPU_RUNNER = ["self-hosted", "gpu"]
CPU_RUNNER = ["self-hosted", "cpu"]
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


@pytest.fixture(scope="module")
def wf() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def triggers(wf: dict) -> dict:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    on = wf.get("on", wf.get(True))
    assert on is not None, "the workflow has no triggers"
    return on if isinstance(on, dict) else {name: None for name in ([on] if isinstance(on, str) else on)}


def needs(job: dict) -> list[str]:
    value = job.get("needs", [])
    return [value] if isinstance(value, str) else list(value)


def run_text(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def variants(job: dict) -> list[tuple[str, str, bool]]:
    include = job["strategy"]["matrix"]["include"]
    return [(str(item["variant"]), str(item["cuda"]), item["required"]) for item in include]


def test_jobs_and_order(wf: dict) -> None:
    jobs = wf["jobs"]
    assert set(jobs) == {"build", "smoke", "publish"}
    assert needs(jobs["build"]) == []
    assert needs(jobs["smoke"]) == ["build"]
    assert "smoke" in needs(jobs["publish"]), "publish must wait for the smoke"

    # The needs graph is acyclic and topologically build -> smoke -> publish.
    order, seen = [], set()

    def visit(name: str, stack: tuple[str, ...] = ()) -> None:
        assert name not in stack, f"needs cycle: {' -> '.join(stack + (name,))}"
        if name in seen:
            return
        for dep in needs(jobs[name]):
            assert dep in jobs, f"{name} needs unknown job {dep}"
            visit(dep, stack + (name,))
        seen.add(name)
        order.append(name)

    for name in jobs:
        visit(name)
    assert order.index("build") < order.index("smoke") < order.index("publish")


def test_triggers(wf: dict) -> None:
    on = triggers(wf)
    assert "workflow_dispatch" in on
    assert on["push"]["branches"] == ["main"]
    assert "wheels_manifest.yaml" in on["push"]["paths"]


def test_matrix_covers_both_variants(wf: dict) -> None:
    # cu130 is published, so its legs must pass for `needs:` to let publish run;
    # cu129's legs may fail (continue-on-error) without holding back cu130.
    expected = [("cu130", "13", True), ("cu129", "12", False)]
    for name in ("build", "smoke"):
        job = wf["jobs"][name]
        assert variants(job) == expected, name
        assert job["strategy"].get("fail-fast") is False, f"{name}: one variant's failure must not hide the other's"
        assert job["continue-on-error"] == "${{ !matrix.required }}", name


def step_env(job: dict) -> dict:
    return {str(k): str(v) for k, v in (job.get("env") or {}).items()}


def test_build_runs_on_cpu_with_the_persistent_builder_and_registry_cache(wf: dict) -> None:
    job = wf["jobs"]["build"]
    assert job["runs-on"] == CPU_RUNNER
    assert step_env(job)["CUDA"] == "${{ matrix.cuda }}" and step_env(job)["VARIANT"] == "${{ matrix.variant }}"
    assert step_env(job)["PINWHEEL_BUILDER"] == "pinwheel-ci" and wf["env"]["REGISTRY"] == "${{ vars.REGISTRY }}"
    assert "PINWHEEL_BUILDER" not in wf["env"], "the GPU runner has no such builder"
    text = run_text(job)
    assert "make check-render" in text
    # created once per runner, only where it does not exist: its state survives between runs
    assert 'docker buildx inspect "$PINWHEEL_BUILDER"' in text and 'docker buildx create --name "$PINWHEEL_BUILDER"' in text
    builds = [line for line in text.replace("\\\n", " ").splitlines() if "build.py build" in line]
    assert len(builds) == 1, builds
    assert '--cuda "$CUDA"' in builds[0] and '--builder "$PINWHEEL_BUILDER"' in builds[0]
    assert '--cache-from "$REGISTRY/cache:$VARIANT"' in builds[0] and '--cache-to "$REGISTRY/cache:$VARIANT"' in builds[0]
    candidates = [line for line in text.replace("\\\n", " ").splitlines() if "build.py publish" in line]
    assert len(candidates) == 1 and "--candidate" in candidates[0], candidates
    upload = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert [u["with"]["name"] for u in upload] == ["candidate-${{ matrix.variant }}"]


def test_smoke_runs_on_the_gpu_runner_by_digest(wf: dict) -> None:
    job = wf["jobs"]["smoke"]
    assert job["runs-on"] == GPU_RUNNER
    text = run_text(job)
    assert 'image="${ref%:*}@$digest"' in text and 'docker pull "$image"' in text
    assert re.search(r'python build\.py smoke --cuda "\$CUDA" --image "\$image"', text)
    assert "--gpus yes" in text, "the GPU runner must not silently skip the GPU levels"
    downloads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert [d["with"]["name"] for d in downloads] == ["candidate-${{ matrix.variant }}"]
    upload = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload and upload[0]["with"]["path"].startswith(".pinwheel/smoke")


def test_publish_only_cu130_after_smoke_with_gpu_required(wf: dict) -> None:
    job = wf["jobs"]["publish"]
    assert "strategy" not in job, "publish is for cu130 only, not a matrix"
    assert job["runs-on"] == CPU_RUNNER, "publish --digest needs the registry, not the engine the smoke ran on"
    assert "cu130-torch213" in job["name"]
    text = run_text(job)
    commands = [line.strip() for line in text.splitlines() if "build.py publish" in line]
    assert len(commands) == 1
    cmd = commands[0]
    assert "--cuda 13" in cmd
    assert '--registry "$REGISTRY"' in cmd and '--digest "$digest"' in cmd
    assert cmd.endswith("--require-gpu") or " --require-gpu" in cmd
    # publish never runs for pull requests
    assert "pull_request" in job["if"] and "refs/heads/main" in job["if"]
    # the smoke record publish checks comes from the cu130 smoke, the digest from the cu130 build
    downloads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert [d["with"]["name"] for d in downloads] == ["smoke-cu130", "candidate-cu130"]
    assert downloads[0]["with"]["path"] == ".pinwheel/smoke"


def test_every_job_is_self_hosted_with_a_timeout(wf: dict) -> None:
    for name, job in wf["jobs"].items():
        assert job["runs-on"] in (CPU_RUNNER, GPU_RUNNER), name
        assert int(job["timeout-minutes"]) > 0, name


def test_actions_are_pinned_to_commits_and_checkouts_keep_no_credentials(wf: dict) -> None:
    lines = WORKFLOW.read_text().splitlines()
    for name, job in wf["jobs"].items():
        for step in job["steps"]:
            uses = step.get("uses")
            if uses is None:
                continue
            assert PINNED.match(uses), f"{name}: {uses} is not pinned to a full commit"
            line = next(l for l in lines if uses in l)
            assert re.search(r"# v\d+\.\d+\.\d+$", line), f"{name}: {uses} has no version comment"
            if uses.startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name


def test_expressions_reach_scripts_only_through_env(wf: dict) -> None:
    for name, job in wf["jobs"].items():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), f"{name}: {step.get('name')}: an expression inside run:"


def test_zizmor_finds_nothing_at_medium_or_above() -> None:
    zizmor = shutil.which("zizmor") or str(Path(sys.executable).with_name("zizmor"))
    if not Path(zizmor).exists():
        pytest.fail("zizmor is not installed (it is a test dependency in pyproject.toml)")
    proc = subprocess.run([zizmor, "--offline", "--min-severity", "medium", "--format", "plain",
                           str(WORKFLOW.parent)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "No findings to report" in proc.stdout + proc.stderr


def test_every_trigger_path_names_something_in_the_repository(wf: dict) -> None:
    on = triggers(wf)
    for event in ("push", "pull_request"):
        for pattern in on[event]["paths"]:
            fixed = pattern.split("*", 1)[0].rstrip("/") or "."
            assert (ROOT / fixed).exists(), f"{event}.paths: {pattern} names nothing in the repository"


def test_every_job_that_reads_a_secret_runs_in_an_environment(wf: dict) -> None:
    for name, job in wf["jobs"].items():
        if "secrets." in yaml.safe_dump(job["steps"]):
            assert job.get("environment"), f"{name}: reads secrets outside an environment"


def test_zizmor_auditor_persona_finds_no_secret_outside_an_environment() -> None:
    zizmor = shutil.which("zizmor") or str(Path(sys.executable).with_name("zizmor"))
    proc = subprocess.run([zizmor, "--offline", "--persona", "auditor", "--format", "plain", str(WORKFLOW.parent)],
                          capture_output=True, text=True, cwd=ROOT)
    assert "secrets-outside-env" not in proc.stdout + proc.stderr, proc.stdout[-4000:]


def test_forks_never_reach_the_self_hosted_runner(wf: dict) -> None:
    on = triggers(wf)
    assert "pull_request_target" not in on
    if "pull_request" in on:
        cond = wf["jobs"]["build"]["if"]
        assert "head.repo.full_name == github.repository" in cond


def test_no_secret_is_echoed(wf: dict) -> None:
    text = WORKFLOW.read_text()
    assert "ACTIONS_STEP_DEBUG" not in text
    for name, job in wf["jobs"].items():
        for step in job["steps"]:
            script = step.get("run", "")
            # secrets go to actions' inputs only, never into a shell script
            assert "secrets." not in script, f"{name}: a secret is expanded into a run script"
            assert not re.search(r"\b(echo|printf|cat)\b[^\n]*\$\{\{\s*secrets", script), name
            assert "set -x" not in script, f"{name}: set -x would print expanded values"
        for key in ("env",):
            for value in (job.get(key) or {}).values():
                assert "secrets." not in str(value), f"{name}: secret in job env is visible to every step"
    for value in (wf.get("env") or {}).values():
        assert "secrets." not in str(value), "secret in workflow env is visible to every step"
    # the only place secrets appear: docker/login-action's inputs
    uses_secrets = [
        (name, step.get("uses"))
        for name, job in wf["jobs"].items()
        for step in job["steps"]
        if "secrets." in yaml.safe_dump(step)
    ]
    login = "docker/login-action@74a5d142397b4f367a81961eba4e8cd7edddf772"
    assert uses_secrets == [("build", login), ("smoke", login), ("publish", login)]


def test_permissions_are_read_only(wf: dict) -> None:
    assert wf["permissions"] == {"contents": "read"}
