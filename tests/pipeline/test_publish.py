"""publish on the real engine and registry: every declared smoke level must pass, skips are allowed
only with a reason that the pushed image records, and the push shows its layers and bytes.

One tiny image is built once. Each test publishes into its own registry
namespace (`--registry 127.0.0.1:5000/<ns>`), so the tests do not see each
other's tags, and sets the smoke record it needs.
"""
from __future__ import annotations

import json
import re
import uuid

import pytest

from pinwheel.image.engine import Engine
from pinwheel.image.smoke import record, recorded
from pinwheel.workspace import Workspace

from tests.support.pipeline import Project, pushed_image, registry_get
from tests.support.smoke_records import ALL_PASSED, record_smoke, restore_smoke

pytestmark = pytest.mark.engine

REASON = "no GPU runner for this release; smoked on H200 by hand"


@pytest.fixture(scope="module")
def project(project_factory) -> Project:
    return project_factory("publish")


@pytest.fixture(scope="module")
def built(project: Project) -> dict:
    result = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def no_gpu_smoke(project: Project, built: dict) -> dict:
    """The smoke as it runs here, without a GPU: static passed, import and gpu skipped."""
    smoke = project.cli("smoke", "--variant", "cu130", built["tags"][0], "--gpus", "no")
    assert smoke.returncode == 0, smoke.output[-3000:]
    saved = recorded(built["image_id"], Workspace(project.root, "").smoke_results)
    assert saved is not None and saved["levels"] == {"static": "passed", "import": "skipped", "gpu": "skipped"}
    return saved


def namespace(registry: str) -> tuple[str, str]:
    ns = f"pub-{uuid.uuid4().hex[:10]}"
    return f"{registry}/{ns}", ns


def publish(project: Project, registry: str, *extra: str):
    return project.cli("publish", "--variant", "cu130", "--registry", registry, *extra)


def registry_tags(registry: str, repository: str) -> list[str] | None:
    status, _, body = registry_get(registry, f"/v2/{repository}/tags/list")
    if status == 404:
        return None
    assert status == 200, body
    return sorted(json.loads(body).get("tags") or [])


def test_skipped_gpu_level_is_refused_by_default(project: Project, built: dict, no_gpu_smoke: dict, registry: str):
    restore_smoke(project.root, no_gpu_smoke)
    target, ns = namespace(registry)
    refused = publish(project, target)
    assert refused.returncode == 1, refused.output[-3000:]
    assert "not published" in refused.stderr
    assert "gpu: SKIPPED" in refused.stderr and "import: SKIPPED" in refused.stderr, refused.stderr
    assert "target smoke" in refused.stderr  # where the required levels were read
    assert "--allow-skipped import --allow-skipped gpu --reason" in refused.stderr
    assert registry_tags(registry, f"{ns}/{project.repository}") is None

    # --require-gpu still refuses it, and contradicts allowing the GPU level
    assert publish(project, target, "--require-gpu").returncode == 1
    clash = publish(project, target, "--require-gpu", "--allow-skipped", "import,gpu", "--reason", REASON)
    assert clash.returncode == 2 and "contradict" in clash.stderr, clash.output[-2000:]
    # allowing only one of the two skipped levels is not enough
    partial = publish(project, target, "--allow-skipped", "gpu", "--reason", REASON)
    assert partial.returncode == 1 and "import: SKIPPED" in partial.stderr, partial.output[-2000:]
    assert registry_tags(registry, f"{ns}/{project.repository}") is None


def test_an_allowance_needs_a_reason(project: Project, no_gpu_smoke: dict, registry: str):
    restore_smoke(project.root, no_gpu_smoke)
    target, ns = namespace(registry)
    bad = publish(project, target, "--allow-skipped", "import,gpu")
    assert bad.returncode == 2, bad.output[-2000:]
    assert "needs a reason" in bad.stderr
    assert registry_tags(registry, f"{ns}/{project.repository}") is None


def test_allowed_skip_is_recorded_in_the_pushed_image(project: Project, built: dict, no_gpu_smoke: dict,
                                                       registry: str, engine: Engine):
    restore_smoke(project.root, no_gpu_smoke)
    target, ns = namespace(registry)
    repository = f"{ns}/{project.repository}"
    first = publish(project, target, "--allow-skipped", "import", "--allow-skipped", f"gpu={REASON}", "--reason", REASON)
    assert first.returncode == 0, first.output[-3000:]
    names = sorted(t.split(":", 1)[1] for t in built["tags"])
    immutable = built["tags"][1].split(":", 1)[1]
    assert registry_tags(registry, repository) == sorted(names + [f"{immutable}.sbom"])  # the SBOM beside it

    digests = set()
    for name in names:
        digest, manifest, config, ids = pushed_image(registry, repository, name)
        digests.add(digest)
        labels = config["config"]["Labels"]
        assert labels["io.pinwheel.smoke.allowed-skipped"] == "import,gpu"
        assert labels["io.pinwheel.smoke.skip-reason"] == REASON
        assert labels["io.pinwheel.smoke.skip-reason.gpu"] == REASON
        assert labels["io.pinwheel.smoke.image-id"] == built["image_id"]
        assert json.loads(labels["io.pinwheel.smoke.levels"]) == {"static": "passed", "import": "skipped", "gpu": "skipped"}
        for key, value in built["labels"].items():  # the build's labels are all still there
            assert labels[key] == value, key
        # the same layers as the image the smoke ran on, and only new config
        assert config["rootfs"]["diff_ids"] == list(engine.layers(built["image_id"]))
        assert built["image_id"] not in ids  # new config: another image
    assert len(digests) == 1, "both tags name one image"
    # pushed once by digest under the content tag; the dated tag pointed at that digest
    assert f"pushed {target}/{built['tags'][1]} " in first.stdout and f"tagged {target}/{built['tags'][0]} " in first.stdout
    for line in (l for l in first.stdout.splitlines() if l.startswith(("pushed ", "tagged "))):
        assert line.split()[-1] in digests
    # the local tags still name the smoked image
    assert engine.image_id(built["tags"][0]) == built["image_id"]

    # progress: a line per layer state change (no terminal here), then a summary with bytes
    layers = engine.layers(built["image_id"])
    out = first.output
    assert f"pushing {target}/{built['tags'][1]} ({len(layers)} layers)" in out
    # each layer named by its diff id, or (the containerd image store's push) by its blob's digest in the registry
    for diff_id, blob in zip(layers, manifest["layers"], strict=True):
        assert re.search(rf"^  layer ({diff_id[7:19]}|{blob['digest'][7:19]}): (pushed|already in the registry|mounted from)",
                         out, re.M), out
    assert re.search(r"^  layer [0-9a-f]{12}: pushed \d+(\.\d)? [kMG]?B$", out, re.M), out
    summaries = re.findall(r"^  (\d+) layers: (\d+) pushed \(([^)]*)\), (\d+) already in the registry \(([^)]*)\)$", out, re.M)
    assert len(summaries) == 1, out  # one push; the other tag is the registry's, not a second upload
    assert int(summaries[0][0]) == len(layers) and int(summaries[0][1]) >= 1 and summaries[0][2] != "0 B"
    assert not re.search(r"\x1b\[|\r", out), "no terminal escapes in a log"

    # published again: the same digest, nothing sent
    again = publish(project, target, "--allow-skipped", "import,gpu", "--reason", REASON)
    assert again.returncode == 0, again.output[-3000:]
    assert {pushed_image(registry, repository, n)[0] for n in names} == digests
    assert re.findall(r"^  \d+ layers: 0 pushed \(0 B\)", again.output, re.M), again.output
    assert f"unchanged {target}/{built['tags'][0]} " in again.stdout, again.stdout


def test_a_failed_smoke_pushes_nothing(project: Project, built: dict, registry: str, engine: Engine):
    from pinwheel.image.smoke import run_smoke

    target, ns = namespace(registry)
    # the import level, forced to run without a driver, runs pw-core's driver check: no libcuda.so.1
    failed = run_smoke(engine, built["tags"][0], gpus=False, level="import", env={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1"})
    assert not failed.ok and failed.levels.get("import") == "failed", failed.output[-2000:]
    record(failed, Workspace(project.root, "").smoke_results)
    for extra in ((), ("--allow-skipped", "import,gpu", "--reason", REASON)):
        refused = publish(project, target, *extra)
        assert refused.returncode == 1, refused.output[-3000:]
        assert "not published" in refused.stderr and "failed" in refused.stderr
        assert "import: failed" in refused.stderr
    assert registry_tags(registry, f"{ns}/{project.repository}") is None
    assert not engine.docker.image.list(repository_or_tag=f"{target}/{project.repository}")


def test_every_level_passed_pushes_the_smoked_image_itself(project: Project, built: dict, registry: str,
                                                           no_gpu_smoke: dict):
    # What a GPU host records (the payload's own GPU runs are in tests/smoke and docs/smoke-h200.json).
    record_smoke(project.root, built["image_id"], ALL_PASSED)
    try:
        target, ns = namespace(registry)
        result = publish(project, target)
        assert result.returncode == 0, result.output[-3000:]
        for name in (t.split(":", 1)[1] for t in built["tags"]):
            _, manifest, config, ids = pushed_image(registry, f"{ns}/{project.repository}", name)
            assert built["image_id"] in ids
            assert not any(k.startswith("io.pinwheel.smoke.") for k in config["config"]["Labels"])
        # an allowance nobody needed is said, not recorded
        noted = publish(project, target, "--allow-skipped", "gpu", "--reason", REASON)
        assert noted.returncode == 0 and "not needed, gpu passed" in noted.stderr, noted.output[-2000:]
    finally:
        restore_smoke(project.root, no_gpu_smoke)
