"""Hostile smoke records against the real engine and the real loopback registry: a record edited by hand,
a record copied from another image's file, a record that is a device, and a record that is not a record.
Each ends in exit 2 with one line and pushes nothing; the untouched record of the same image publishes."""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import uuid
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine
from pinwheel.image.smoke import SmokeResult, record
from pinwheel.workspace import Workspace

from .bounded import assert_refused, cli
from .locked_project import lock, populate, write_manifest

pytestmark = pytest.mark.engine

LEVELS = ("static", "import", "gpu")


def payload_document(**levels: str) -> dict:
    """The payload's document shape (pinwheel.smoke: levels.run): levels judged from their stages."""
    stages = [{"level": lv, "name": "pins" if lv == "static" else "imports", "status": st,
               **({"reason": "no usable NVIDIA driver: nvidia-smi not found"} if st == "skipped" else {})}
              for lv, st in levels.items()]
    return {"schema": 1, "requested": "gpu", "ok": "failed" not in levels.values(),
            "levels": {lv: {"status": st} for lv, st in levels.items()}, "stages": stages}


@pytest.fixture(scope="module")
def project(tmp_path_factory, engine: Engine, registry: str):
    """A locked project and two tiny images (A, B) of its repository, each a different file."""
    from tests.support.local_index import LocalIndex

    base = tmp_path_factory.mktemp("gate")
    index = LocalIndex(base / "index")
    populate(index)
    mp = pytest.MonkeyPatch()
    mp.setenv("PIP_INDEX_URL", index.serve())
    mp.setenv("PINWHEEL_CACHE_DIR", str(base / "cache"))
    mp.setenv("UV_CACHE_DIR", str(base / "uv-cache"))
    root = base / "project"
    root.mkdir()
    write_manifest(root)
    assert lock(root) == 0
    repo = f"pinwheel-test/gate-{uuid.uuid4().hex[:10]}"
    images = {}
    for name in ("a", "b"):
        tarball = base / f"{name}.tar"
        with tarfile.open(tarball, "w") as tar:
            data = f"{name} {uuid.uuid4().hex}\n".encode()
            info = tarfile.TarInfo("marker")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        images[name] = (f"{repo}:{name}", engine.import_tarball(tarball, f"{repo}:{name}"))
    try:
        yield root, images
    finally:
        for ref, _ in images.values():
            engine.remove(ref, force=True)
        for image in engine.docker.image.list(repository_or_tag=f"{registry}/ns-*/{repo}"):
            for tag in image.repo_tags:
                engine.remove(tag, force=True)
        index.close()
        mp.undo()


def results(root: Path) -> Path:
    return Workspace(root, "").smoke_results


def record_path(root: Path, image_id: str) -> Path:
    return results(root) / f"{image_id.replace(':', '_')}.json"


def publish(root: Path, registry: str, ref: str):
    ns = f"ns-{uuid.uuid4().hex[:8]}"
    proc = cli("--manifest", str(root / "wheels_manifest.yaml"), "publish", "--variant", "cu130", "--tag", ref,
               "--registry", f"{registry}/{ns}", "--allow-floating-base")
    return proc, ns


def registry_tags(registry: str, repository: str) -> list[str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{registry}/v2/{repository}/tags/list", timeout=10) as resp:
            return sorted(json.load(resp).get("tags") or [])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise


def smoked(root: Path, image_id: str, **levels: str) -> Path:
    document = payload_document(**levels)
    return record(SmokeResult(image_id, document["ok"], {lv: st for lv, st in levels.items()}, document, ""),
                  results(root))


PASSED = dict.fromkeys(LEVELS, "passed")
NO_GPU = {"static": "passed", "import": "skipped", "gpu": "skipped"}


def test_the_genuine_record_publishes(project, registry: str):
    root, images = project
    ref, image_id = images["a"]
    smoked(root, image_id, **PASSED)
    proc, ns = publish(root, registry, ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert registry_tags(registry, f"{ns}/{ref.split(':')[0]}") == ["a"]


def test_a_record_whose_levels_were_edited_to_passed_does_not_publish(project, registry: str):
    root, images = project
    ref, image_id = images["b"]
    path = smoked(root, image_id, **NO_GPU)  # what a host without a GPU records: refused as it is
    proc, ns = publish(root, registry, ref)
    assert proc.returncode == 1 and "gpu: SKIPPED" in proc.stderr, proc.stderr
    body = json.loads(path.read_text())
    body["levels"] = dict(PASSED)  # the edit: the levels say passed, the document still says skipped
    path.write_text(json.dumps(body))
    proc, ns = publish(root, registry, ref)
    assert_refused(proc, 2, "not published", "changed after the smoke wrote it", path.name)
    assert registry_tags(registry, f"{ns}/{ref.split(':')[0]}") == []


def test_a_document_edited_to_passed_with_its_digest_made_again_is_refused_by_its_stages(project, registry: str):
    root, images = project
    ref, image_id = images["b"]
    path = smoked(root, image_id, **NO_GPU)
    body = json.loads(path.read_text())
    body["document"]["levels"] = {lv: {"status": "passed"} for lv in LEVELS}
    body["document"]["ok"] = True
    body["levels"] = {lv: "passed" for lv in LEVELS}
    content = {k: v for k, v in body.items() if k != "record_sha256"}
    body["record_sha256"] = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    path.write_text(json.dumps(body))
    proc, ns = publish(root, registry, ref)
    assert_refused(proc, 2, "not published", "are not what its stages say", "import: skipped")
    assert registry_tags(registry, f"{ns}/{ref.split(':')[0]}") == []


def test_a_record_copied_from_another_image_does_not_publish_it(project, registry: str):
    root, images = project
    (_, a_id), (ref_b, b_id) = images["a"], images["b"]
    path_a = smoked(root, a_id, **PASSED)
    record_path(root, b_id).write_bytes(path_a.read_bytes())  # A's passed record under B's file name
    proc, ns = publish(root, registry, ref_b)
    assert_refused(proc, 2, "not published", f"the record of image {a_id[:19]}, not of {b_id[:19]}")
    assert registry_tags(registry, f"{ns}/{ref_b.split(':')[0]}") == []


@pytest.mark.parametrize("hostile", ["dev-zero", "directory", "not-json", "old-format"])
def test_a_record_that_is_no_record_is_refused_in_bounded_memory(project, registry: str, hostile: str):
    root, images = project
    ref, image_id = images["b"]
    path = record_path(root, image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif path.exists() or path.is_symlink():
        path.unlink()
    expected = {"dev-zero": "not a regular file", "directory": "is a directory",
                "not-json": "not a smoke record", "old-format": "not a smoke record of this pinwheel"}[hostile]
    if hostile == "dev-zero":
        os.symlink("/dev/zero", path)
    elif hostile == "directory":
        path.mkdir()
    elif hostile == "not-json":
        path.write_text('{"image_id": ' * 100000)
    else:  # what an older pinwheel wrote: levels beside the document, no digest
        path.write_text(json.dumps({"image_id": image_id, "ok": True, "levels": PASSED,
                                    "document": payload_document(**PASSED)}))
    try:
        proc, ns = publish(root, registry, ref)
        assert_refused(proc, 2, "not published", expected, path.name)
        assert registry_tags(registry, f"{ns}/{ref.split(':')[0]}") == []
    finally:
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


def test_promote_refuses_a_digest_other_than_the_one_the_smoke_ran_on(project, registry: str, engine: Engine):
    """`publish --digest`: the record names the repository digest the engine knew at smoke time (a GPU host
    smokes the candidate it pulled by digest); another digest of that repository is refused, the one it ran
    on is promoted."""
    root, images = project
    ref, image_id = images["a"]
    ns = f"ns-{uuid.uuid4().hex[:8]}"
    remote = f"{registry}/{ns}/pinwheel/demo"  # the manifest's repository under --registry
    engine.tag(ref, f"{remote}:candidate")
    try:
        digest = engine.push(f"{remote}:candidate").digest
        other = "sha256:" + "0" * 64
        document = payload_document(**PASSED)
        for smoked_on, code in ((other, 2), (digest, 0)):
            record(SmokeResult(image_id, True, dict(PASSED), document, "", {}, (f"{remote}@{smoked_on}",)),
                   results(root))
            proc = cli("--manifest", str(root / "wheels_manifest.yaml"), "publish", "--variant", "cu130",
                       "--registry", f"{registry}/{ns}", "--digest", digest, "--tag", "pinwheel/demo:promoted",
                       "--allow-floating-base")
            if code == 2:
                assert_refused(proc, 2, "not published", f"ran on {remote}@{other}", "not on this digest")
                assert registry_tags(registry, f"{ns}/pinwheel/demo") == ["candidate"]
            else:
                assert proc.returncode == 0, proc.stdout + proc.stderr
                assert registry_tags(registry, f"{ns}/pinwheel/demo") == ["candidate", "promoted"]
    finally:
        engine.remove(f"{remote}:candidate", force=True)


def test_plain_publish_points_the_tags_at_the_digest_the_smoke_ran_on(project, registry: str, engine: Engine):
    """Plain `publish` compares repository digests too: where the record names the digest it smoked in the
    repository published to, the tags go on exactly that digest and nothing is pushed; where the registry does
    not hold it as this image, nothing is published."""
    root, images = project
    ref, image_id = images["a"]
    ns = f"ns-{uuid.uuid4().hex[:8]}"
    remote = f"{registry}/{ns}/pinwheel/demo"
    local = f"pinwheel/demo:plain-{uuid.uuid4().hex[:8]}"
    engine.tag(ref, f"{remote}:candidate")
    engine.tag(ref, local)
    try:
        digest = engine.push(f"{remote}:candidate").digest
        document = payload_document(**PASSED)
        argv = ("--manifest", str(root / "wheels_manifest.yaml"), "publish", "--variant", "cu130", "--tag", local,
                "--registry", f"{registry}/{ns}", "--allow-floating-base")
        gone = "sha256:" + "0" * 64  # a digest the registry does not hold
        record(SmokeResult(image_id, True, dict(PASSED), document, "", {}, (f"{remote}@{gone}",)), results(root))
        proc = cli(*argv)
        assert_refused(proc, 2, "not published", f"ran on {remote}@{gone}", "does not hold as this image")
        assert registry_tags(registry, f"{ns}/pinwheel/demo") == ["candidate"]
        record(SmokeResult(image_id, True, dict(PASSED), document, "", {}, (f"{remote}@{digest}",)), results(root))
        proc = cli(*argv)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"the smoke ran on {remote}@{digest}" in proc.stderr and "nothing was pushed" in proc.stderr, proc.stderr
        tag = local.split(":")[1]
        assert registry_tags(registry, f"{ns}/pinwheel/demo") == sorted(["candidate", tag])
        assert f"{remote}:{tag} {digest}" in " ".join(proc.stdout.split()), proc.stdout
    finally:
        engine.remove(f"{remote}:candidate", force=True)
        engine.remove(local, force=True)
