"""The whole pipeline on the real engine: manifest -> render -> lock -> build -> smoke -> publish.

The image is tiny: every package is a generated wheel on a test index (see
tests/support/pipeline.py for how a build step reaches it), on the bootstrap base.
Builds go through `pinwheel.image.build.build_image` and through `python build.py`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import pytest

from pinwheel.image.build import build_image
from pinwheel.image.engine import Engine
from pinwheel.lock import lock_sha256
from pinwheel.lock.format import RESOLUTION_HEADER, with_resolution_digest
from pinwheel.workspace import Workspace

from tests.support.pipeline import (
    LOCAL_VERSION,
    LOCAL_WHEELS,
    Project,
    TLSIndex,
    layer_members,
    registry_get,
    scan_saved_image,
    sha256_file,
)

pytestmark = pytest.mark.engine

MANIFEST_ACCEPT = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)

# Build output lines a step printed (BuildKit plain progress: "#<step> <seconds> <text>"),
# as opposed to the step's command line, which contains the same echo text.
def printed(log: str, text: str) -> bool:
    pattern = re.compile(r"^#\d+ \d+\.\d+ " + re.escape(text), re.M)
    return bool(pattern.search(log))


INSPECT = r"""
import importlib.metadata as md, json, os
out = {}
for d in md.distributions():
    name = d.metadata["Name"].lower().replace("_", "-")
    if not name.startswith("pw-"):
        continue
    direct = d.read_text("direct_url.json")
    out[name] = {"version": d.version, "url": json.loads(direct)["url"] if direct else None}
print(json.dumps(out, sort_keys=True))
"""


def installed(engine: Engine, image: str) -> dict[str, dict]:
    result = engine.run(image, ["python", "-c", INSPECT])
    assert result.ok, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def project(project_factory) -> Project:
    return project_factory("main")


@pytest.fixture(scope="module")
def full_image(project: Project, engine: Engine):
    """Every local wheel present, built through the library entry point."""
    project.set_wheels(*LOCAL_WHEELS)
    _, plans, plan = project.load()
    return build_image(plans, plan, project.root, engine, progress=False)


def expect_pins(project: Project) -> dict[str, str]:
    return json.loads((project.lock_dir / "expect.json").read_text())["pins"]


# ----------------------------------------------------------- labels & tags


def test_labels_and_tags(full_image, project: Project, engine: Engine, base_image: str):
    manifest_sha = sha256_file(project.manifest)
    lock_sha = lock_sha256(project.lock_dir)
    repo = project.repository
    dated, immutable = full_image.tags
    days = {dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=d) for d in (-1, 0)}  # a run across midnight
    assert dated in {f"{repo}:cu130-pipe-{d:%Y%m%d}" for d in days}
    # the immutable tag hashes every input, each named in the io.pinwheel.inputs label
    inputs = json.loads(full_image.labels["io.pinwheel.inputs"])
    assert inputs["manifest"] == manifest_sha and inputs["lock"] == lock_sha
    assert inputs["base"] == {"name": base_image,
                              "digest": engine.repo_digest(base_image) or engine.image_id(base_image)}
    assert {w["package"] for w in inputs["local_wheels"]} == {"pw-kern-fail", "pw-kern-skip", "pw-kern-fb"}
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert immutable == f"{repo}:cu130-{digest[:12]}"
    for tag in full_image.tags:  # (first in this module: no later build has moved the tags yet)
        assert engine.image_id(tag) == full_image.image_id

    labels = engine.labels(full_image.image_id)
    assert labels["org.opencontainers.image.title"] == "pinwheel pipeline test image"
    assert labels["org.opencontainers.image.version"] == dated.split(":", 1)[1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels["org.opencontainers.image.created"])
    assert labels["org.opencontainers.image.base.name"] == base_image
    assert labels["io.pinwheel.image"] == "tiny"
    assert labels["io.pinwheel.variant"] == "cu130"
    assert labels["io.pinwheel.cuda"] == "13.0"
    assert labels["io.pinwheel.torch"] == "2.13.0"
    assert labels["io.pinwheel.manifest.sha256"] == manifest_sha
    assert labels["io.pinwheel.lock.sha256"] == lock_sha
    assert json.loads(labels["io.pinwheel.versions"]) == expect_pins(project)
    assert full_image.labels.items() <= labels.items()  # (the base's own labels are inherited too)


# ------------------------------------------------------------------ secrets


def test_ca_bundle_is_in_no_layer(full_image, project: Project, tls_index: TLSIndex, engine: Engine,
                                  tmp_path: Path):
    """The build only worked because pip trusted the session's CA (the `ca` secret), yet no byte of it is in the image."""
    saved = engine.save(full_image.image_id, tmp_path / "image.tar")
    layers = layer_members(saved)
    assert len(layers) >= 5
    control = (project.lock_dir / "expect.json").read_bytes()  # COPYed into a layer: the scan must see it
    needles = tls_index.ca.needles()
    found = scan_saved_image(saved, [control, *needles])
    assert found[control], "the scan does not see file contents of the layers"
    leaked = {n[:40]: where for n, where in found.items() if n is not control and where}
    assert leaked == {}, f"CA bytes found in the saved image: {leaked}"
    # nor is the secret's mount point left behind with content
    result = engine.run(full_image.image_id, ["sh", "-c", "cat /run/secrets/ca 2>/dev/null | wc -c"])
    assert result.ok and result.stdout.strip() == "0"


# ------------------------------------------------------------- local wheels


UV_LEFT = r"""
import glob, importlib.metadata as md, json, os, shutil
installers = {d.metadata["Name"].lower(): (d.read_text("INSTALLER") or "").strip() for d in md.distributions()
              if d.metadata["Name"].lower().startswith("pw-")}
left = [p for p in ("/tmp/pinwheel/bin/uv", "/opt/pinwheel/uv", "/tmp/pinwheel/uv-cache") if os.path.exists(p)]
print(json.dumps({"installers": installers, "left": left, "on_path": shutil.which("uv"),
                  "pyc": len(glob.glob("/opt/venv/lib/python3*/site-packages/pw_core/__pycache__/*.pyc"))}))
"""


def test_uv_installed_every_wheel_set_and_left_nothing_in_the_image(full_image, engine: Engine):
    """uv (bind-mounted from the installer stage) installed the slices and the local wheels, with bytecode
    compiled as pip does; neither uv, its stage's files nor its cache is in the image."""
    result = engine.run(full_image.tags[0], ["python", "-c", UV_LEFT])
    assert result.ok, result.stderr
    found = json.loads(result.stdout)
    assert found["installers"] and set(found["installers"].values()) == {"uv"}, found
    assert found["left"] == [] and found["on_path"] is None, found
    assert found["pyc"] > 0, found


def test_present_local_wheels_are_installed_from_wheels_dir(full_image, project: Project, engine: Engine):
    found = installed(engine, full_image.image_id)
    for name in LOCAL_WHEELS:
        assert found[name]["version"] == LOCAL_VERSION, name
        assert found[name]["url"].startswith("file:///tmp/wheels/"), found[name]
    assert "pw-kern-fb-stable" not in found, "the fallback is only for a missing wheel"
    # everything from the index is exactly what the lock pinned, and came from the index
    pins = expect_pins(project)
    assert pins == {"pw-core": "1.0.0", "pw-nodeps": "1.0.0", "pw-top": "2.0.0", "pw-util": "0.6.0"}
    for name, version in pins.items():
        assert found[name] == {"version": version, "url": None}, name


def test_missing_required_wheel_fails_the_build_naming_it(project: Project):
    """Refused on the host before the engine builds anything (the image's own preflight: test_preflight_build)."""
    project.set_wheels("pw-kern-skip", "pw-kern-fb")
    try:
        result = project.cli("build", "--variant", "cu130")
    finally:
        project.set_wheels(*LOCAL_WHEELS)
    assert result.returncode == 2, result.output[-3000:]
    assert ("wheels/pw_kern_fail-*.whl is missing and pw-kern-fail is required. run `make wheel` in pw-kern-fail "
            "and copy the wheel into wheels/") in result.stderr
    assert "build failed" not in result.stderr
    assert "load build definition" not in result.output, "the engine was asked to build"


def test_missing_skip_and_fallback_wheels(project: Project, engine: Engine):
    project.set_wheels("pw-kern-fail")
    try:
        result = project.cli("build", "--variant", "cu130", "--json")
    finally:
        project.set_wheels(*LOCAL_WHEELS)
    assert result.returncode == 0, result.output[-3000:]
    log = result.stderr
    assert printed(log, "pinwheel: WARNING: wheels/pw_kern_skip-*.whl is missing; skipping pw-kern-skip. "
                        "To include it: build pw-kern-skip and copy its wheel into wheels/")
    assert printed(log, "pinwheel: WARNING: wheels/pw_kern_fb-*.whl is missing; installing fallback "
                        "pw-kern-fb-stable==1.0.0 --no-deps")
    assert printed(log, " + pw-kern-fb-stable==1.0.0")  # uv's line for what it installed

    image = json.loads(result.stdout)["tags"][0]
    found = installed(engine, image)
    assert "pw-kern-skip" not in found
    assert "pw-kern-fb" not in found
    assert found["pw-kern-fb-stable"] == {"version": "1.0.0", "url": None}
    assert found["pw-kern-fail"]["version"] == LOCAL_VERSION
    # the fallback's declared pw-core>=2.0 was suppressed: the shared pin holds
    assert found["pw-core"]["version"] == "1.0.0"


# --------------------------------------------------------------- invariants


def test_a_hand_edited_slice_is_refused_before_the_engine(project: Project, tls_index: TLSIndex, tmp_path: Path):
    """A later slice edited by hand to install another pw-core: the lock is not what `lock` wrote, so it is
    stale and nothing is built (the build's own invariant is shown failing by the next test)."""
    broken = project.copy(tmp_path / "broken")
    newer = next(tls_index.files_dir.glob("pw_core-1.1.0-*.whl"))
    slice_file = broken.lock_dir / "03-nodeps.txt"
    slice_file.write_text(slice_file.read_text() + f"pw-core==1.1.0 \\\n    --hash=sha256:{sha256_file(newer)}\n")
    result = broken.cli("build", "--variant", "cu130", "--quiet")
    assert result.returncode == 2, result.output[-3000:]
    assert "is stale" in result.stderr and "03-nodeps.txt: pw-core==1.1.0 is not what requirements.txt locks" \
        in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "make lock" in result.stderr


def test_a_wrong_hash_fails_uv_in_the_image(project: Project, tmp_path: Path):
    """The same wrong digest in the slice and in requirements.txt: every derived file agrees, but
    requirements.txt's own digest does not, so the host refuses it. With that digest written again too (past
    what a file can prove), uv in the image checks the wheel it downloads and fails the build, naming both."""
    broken = project.copy(tmp_path / "broken")
    [(name, pin)] = [(f.name, f.read_text()) for f in broken.lock_dir.glob("01-*.txt")]
    right = re.search(r"--hash=sha256:([0-9a-f]{64})", pin)[1]
    wrong = ("0" if right[0] != "0" else "1") + right[1:]
    for f in (broken.lock_dir / name, broken.lock_dir / "requirements.txt"):
        f.write_text(f.read_text().replace(right, wrong))
    refused = broken.cli("build", "--variant", "cu130", "--quiet")
    assert refused.returncode == 2, refused.output[-3000:]
    assert "requirements.txt: edited after `build.py lock` wrote it" in refused.stderr, refused.stderr[-3000:]
    whole = broken.lock_dir / "requirements.txt"
    text = "".join(line for line in whole.read_text().splitlines(keepends=True)
                   if not line.startswith(RESOLUTION_HEADER))
    whole.write_text(with_resolution_digest(text))
    result = broken.cli("build", "--variant", "cu130", "--quiet")
    assert result.returncode == 1, result.output[-3000:]
    assert "uv pip install" in result.stderr and wrong in result.stderr and right in result.stderr, \
        result.stderr[-3000:]


def test_an_edited_expected_pin_is_refused_before_the_engine(project: Project, tmp_path: Path):
    """expect.json is derived from the manifest and the lock's slices: the build derives it again and refuses
    one edited by hand (it once reached the image, whose invariant then failed on the pin)."""
    broken = project.copy(tmp_path / "broken")
    expect_file = broken.lock_dir / "expect.json"
    expect = json.loads(expect_file.read_text())
    assert expect["pins"]["pw-util"] == "0.6.0"
    expect["pins"]["pw-util"] = "0.5.0"
    expect_file.write_text(json.dumps(expect, indent=2) + "\n")
    result = broken.cli("build", "--variant", "cu130", "--quiet")
    assert result.returncode == 2, result.output[-3000:]
    assert "expect.json: pins is not what the manifest and the lock's slices say " \
           '(pw-util: expected "0.6.0", found "0.5.0")' in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------- smoke & publish


def manifest_digest(registry: str, repository: str, tag: str) -> str | None:
    status, headers, _ = registry_get(registry, f"/v2/{repository}/manifests/{tag}", MANIFEST_ACCEPT)
    return headers.get("Docker-Content-Digest") if status == 200 else None


def registry_tags(registry: str, repository: str) -> list[str] | None:
    status, _, body = registry_get(registry, f"/v2/{repository}/tags/list")
    if status == 404:
        return None
    assert status == 200, body
    return sorted(json.loads(body).get("tags") or [])


def test_smoke_then_publish_and_republish(project: Project, registry: str):
    project.set_wheels(*LOCAL_WHEELS)
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tags = json.loads(built.stdout)["tags"]
    image_id = json.loads(built.stdout)["image_id"]

    smoke = project.cli("smoke", "--variant", "cu130", tags[0], "--gpus", "no")
    assert smoke.returncode == 0, smoke.output[-3000:]
    assert re.search(r"static: PASSED", smoke.stdout)
    assert re.search(r"import: SKIPPED", smoke.stdout)
    assert re.search(r"gpu: SKIPPED", smoke.stdout)
    record = json.loads((Workspace(project.root, "").smoke_results / f"{image_id.replace(':', '_')}.json").read_text())
    assert record["ok"] is True
    assert record["levels"] == {"static": "passed", "import": "skipped", "gpu": "skipped"}

    assert registry_tags(registry, project.repository) is None
    # the image's smoke declares the GPU level: skipped is not passed (tests/pipeline/test_publish.py has the rest)
    refused = project.cli("publish", "--variant", "cu130", "--registry", registry)
    assert refused.returncode == 1 and "gpu: SKIPPED" in refused.stderr, refused.output[-3000:]
    assert registry_tags(registry, project.repository) is None
    allow = ("--allow-skipped", "import,gpu", "--reason", "no GPU on the test host")
    first = project.cli("publish", "--variant", "cu130", "--registry", registry, *allow)
    assert first.returncode == 0, first.output[-3000:]
    names = sorted(t.split(":", 1)[1] for t in tags)
    sbom = f"{tags[1].split(':', 1)[1]}.sbom"  # the SBOM, pushed beside the image
    assert registry_tags(registry, project.repository) == sorted(names + [sbom])
    digests = {n: manifest_digest(registry, project.repository, n) for n in names}
    assert all(d and d.startswith("sha256:") for d in digests.values())
    assert len(set(digests.values())) == 1, "both tags name one image"
    for line in (l for l in first.stdout.splitlines() if l.startswith("pushed ")):
        assert line.split()[-1] == next(iter(digests.values()))

    again = project.cli("publish", "--variant", "cu130", "--registry", registry, *allow)
    assert again.returncode == 0, again.output[-3000:]
    assert registry_tags(registry, project.repository) == sorted(names + [sbom])
    assert {n: manifest_digest(registry, project.repository, n) for n in names} == digests


def test_publish_refused_without_a_passing_smoke(project_factory, registry: str, engine: Engine):
    from pinwheel.image.smoke import record, run_smoke

    project = project_factory("refused")
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]

    def publish(*extra: str):
        return project.cli("publish", "--variant", "cu130", "--registry", registry, *extra)

    # never smoked
    refused = publish()
    assert refused.returncode == 1, refused.output[-3000:]
    assert "not published" in refused.stderr and "no smoke result" in refused.stderr
    assert registry_tags(registry, project.repository) is None

    # smoke failed: the payload's import level, forced to run without a driver, runs pw-core's declared
    # driver check, which cannot load libcuda.so.1
    failed = run_smoke(engine, tag, gpus=False, level="import", env={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1"})
    assert not failed.ok and failed.levels.get("import") == "failed", failed.output[-2000:]
    assert "pw-core: verify (exit 1): OSError: libcuda.so.1" in failed.output, failed.output[-2000:]
    assert failed.packages == {"pw-core": "failed"}  # per package, as the payload's JSON has it
    record(failed, Workspace(project.root, "").smoke_results)
    refused = publish()
    assert refused.returncode == 1, refused.output[-3000:]
    assert "smoke" in refused.stderr and "failed" in refused.stderr
    assert registry_tags(registry, project.repository) is None

    # static smoke passed, GPU levels skipped: refused by default (the image declares the GPU level),
    # and with --require-gpu
    smoke = project.cli("smoke", "--variant", "cu130", tag, "--gpus", "no")
    assert smoke.returncode == 0, smoke.output[-3000:]
    for extra in ((), ("--require-gpu",)):
        refused = publish(*extra)
        assert refused.returncode == 1, refused.output[-3000:]
        assert "gpu: SKIPPED" in refused.stderr and "import: SKIPPED" in refused.stderr, refused.stderr
    assert registry_tags(registry, project.repository) is None
