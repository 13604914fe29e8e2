"""The pipeline test image built for linux/arm64 on the real engine, through QEMU, from its own lock.

The variant lists linux/amd64 and linux/arm64; both platforms are locked (uv),
the arm64 image is built FROM the arm64 bootstrap base (debootstrap --arch=arm64,
made once and kept in the engine) and its static smoke runs under QEMU; publish pushes
each platform's image and one index per tag carrying both.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import Project, registry_get, require_qemu

OWN = "    platform: manylinux_2_36_x86_64\n"
ARM_WHY = "no arm64 GPU runner; its static smoke runs under QEMU"


@pytest.fixture(scope="module")
def project(project_factory, engine: Engine) -> Project:
    require_qemu()
    p = project_factory("arm64")
    text = p.manifest.read_text()
    assert OWN in text
    text = text.replace(OWN, OWN + "    platforms: [linux/amd64, linux/arm64]\n"
                                  f'    no_gpu_smoke: {{linux/arm64: "{ARM_WHY}"}}\n', 1)
    # installer: pip: the test index serves the host's own uv (x86_64) only, and the arm64 lock pins its own files
    p.manifest.write_text(text.replace("  name: tiny\n", "  name: tiny\n  installer: pip\n", 1))
    p.cli("render", check=True)  # the installer is in the Dockerfile
    p.cli("lock", "--resolver", "uv", check=True)
    return p


def test_lock_check_names_both_platforms(project: Project):
    result = project.cli("lock", "--check", check=True)
    assert "cu130: up to date" in result.stdout and "cu130 linux/arm64: up to date" in result.stdout
    assert (project.lock_dir / "arm64" / "requirements.txt").exists()


def test_arm64_image_builds_and_smokes_through_qemu(project: Project, engine: Engine):
    started = time.monotonic()
    built = json.loads(project.cli("build", "--platform", "linux/arm64", "--quiet", "--json", check=True).stdout)
    seconds = time.monotonic() - started
    tags = built["tags"]
    assert all(t.endswith("-arm64") for t in tags), tags
    assert engine.platform(tags[0]) == "linux/arm64"
    got = engine.run(tags[0], ["-m"], entrypoint="uname")
    assert got.stdout.strip() == "aarch64", got
    smoke = project.cli("smoke", tags[0], "--level", "static", "--gpus", "no")
    assert smoke.returncode == 0, smoke.output[-3000:]
    assert "PASSED" in smoke.stdout
    print(f"arm64 pipeline image built through QEMU in {seconds:.0f}s")


INDEX_ACCEPT = ("application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.oci.image.index.v1+json")
REASON = "no GPU runner for arm64; smoked on GB200 by hand"


def test_publish_pushes_one_index_carrying_both_platforms(project: Project, engine: Engine, registry: str):
    images = {}
    for platform in ("linux/amd64", "linux/arm64"):
        built = json.loads(project.cli("build", "--platform", platform, "--quiet", "--json", check=True).stdout)
        smoke = project.cli("smoke", built["tags"][0], "--gpus", "no")
        assert smoke.returncode == 0, smoke.output[-3000:]
        images[platform] = built
    ns = f"multi-{uuid.uuid4().hex[:10]}"
    # without the allowance for its own platform, amd64 (no GPU here) is refused, and nothing is pushed
    refused = project.cli("publish", "--variant", "cu130", "--registry", f"{registry}/{ns}")
    assert refused.returncode == 1 and "linux" not in refused.stdout, refused.output[-3000:]
    # --allow-skipped covers the variant's own platform; arm64 is published because the manifest says why
    pushed = project.cli("publish", "--variant", "cu130", "--registry", f"{registry}/{ns}",
                         "--allow-skipped", "import", "--allow-skipped", "gpu", "--reason", REASON)
    assert pushed.returncode == 0, pushed.output[-3000:]
    per_platform = {}
    for line in pushed.stdout.splitlines():
        words = line.split()
        if words[:1] in (["pushed"], ["tagged"]) and words[-1] in ("(linux/amd64)", "(linux/arm64)"):
            per_platform.setdefault(words[-1].strip("()"), set()).add(words[2])
    assert set(per_platform) == {"linux/amd64", "linux/arm64"}
    assert all(len(d) == 1 for d in per_platform.values()), per_platform  # both tags of a platform: one image
    for tag in images["linux/amd64"]["tags"]:  # each tag of the variant's own platform is now the index
        repository, name = tag.rsplit(":", 1)
        status, headers, body = registry_get(registry, f"/v2/{ns}/{repository}/manifests/{name}", INDEX_ACCEPT)
        assert status == 200, body
        index = json.loads(body)
        assert index["mediaType"] in INDEX_ACCEPT
        found = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in index["manifests"]}
        assert found == {p: next(iter(d)) for p, d in per_platform.items()}
        assert json.loads(index["annotations"]["io.pinwheel.smoke.no-gpu-smoke"]) == {"linux/arm64": ARM_WHY}
        arm = next(m for m in index["manifests"] if m["platform"]["architecture"] == "arm64")
        assert arm["annotations"]["io.pinwheel.smoke.no-gpu-smoke"] == ARM_WHY
        assert f"pushed index {registry}/{ns}/{tag} {headers['Docker-Content-Digest']}" in pushed.stdout
