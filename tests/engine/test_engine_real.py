"""The engine adapter against a real Docker engine, buildx and registry."""

from __future__ import annotations

import hashlib
import json
import secrets
import tarfile
import urllib.request
import uuid
from pathlib import Path

import pytest

from pinwheel.image.base import LABEL_PYTHON, LABEL_SUITE, ensure_base
from pinwheel.image.engine import BuildFailed, Engine
from pinwheel.image.rootfs import import_rootfs

pytestmark = pytest.mark.engine

DOCKERFILE = """\
ARG BASE
FROM ${BASE}
ARG GREETING=unset
RUN --mount=type=secret,id=token,target=/run/secrets/token \\
    test -s /run/secrets/token \\
    && sha256sum /run/secrets/token | cut -d' ' -f1 > /token.sha256 \\
    && echo "${GREETING}" > /greeting
"""


def _unique() -> str:
    return uuid.uuid4().hex[:12]


def test_build_label_secret_run_and_save(engine: Engine, base_image: str, tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(DOCKERFILE)
    token = f"pinwheel-secret-{secrets.token_hex(16)}".encode()
    secret_file = tmp_path / "token"
    secret_file.write_bytes(token)
    run_id = _unique()
    tag = f"pinwheel-test/engine:{run_id}"
    greeting = f"hello-{run_id}"

    image_id = engine.build(
        context,
        dockerfile,
        tags=[tag],
        labels={"io.pinwheel.test.run": run_id},
        build_args={"BASE": base_image, "GREETING": greeting},
        secrets={"token": secret_file},
        target=None,
        progress=False,
    )
    try:
        assert image_id.startswith("sha256:")
        assert engine.image_exists(tag)
        assert engine.image_id(tag) == image_id
        assert engine.labels(tag)["io.pinwheel.test.run"] == run_id
        assert engine.size(tag) > 0

        # The secret was there during the build ...
        result = engine.run(tag, ["sh", "-c", "cat /greeting /token.sha256; test ! -e /run/secrets/token"])
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [greeting, hashlib.sha256(token).hexdigest()]

        # ... and is in no layer of the image.
        saved = engine.save(tag, tmp_path / "image.tar")
        assert saved.stat().st_size > 0
        with tarfile.open(saved) as outer:
            names = outer.getnames()
        assert any(n.endswith("layer.tar") for n in names)
        data = saved.read_bytes()
        assert greeting.encode() in data  # the scan does see file contents of the layers
        assert token not in data
    finally:
        engine.remove(tag, force=True)
    assert not engine.image_exists(tag)


def test_build_failure_carries_log_tail(engine: Engine, base_image: str, tmp_path: Path) -> None:
    marker = f"pinwheel-fail-{_unique()}"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"ARG BASE\nFROM ${{BASE}}\nRUN echo {marker} && exit 7\n")
    with pytest.raises(BuildFailed) as info:
        engine.build(tmp_path, dockerfile, tags=[f"pinwheel-test/fail:{_unique()}"],
                     build_args={"BASE": base_image})
    assert marker in info.value.log_tail
    assert marker in str(info.value)


def test_run_returns_exit_code_and_both_streams(engine: Engine, base_image: str) -> None:
    result = engine.run(
        base_image,
        ["sh", "-c", 'echo "out:$PINWHEEL_X"; echo err >&2; exit 3'],
        env={"PINWHEEL_X": "42"},
    )
    assert (result.returncode, result.stdout, result.stderr) == (3, "out:42\n", "err\n")
    assert not result.ok


def test_ensure_base_is_idempotent(engine: Engine, base_image: str) -> None:
    assert ensure_base(base_image, "3.11", engine, suite="bookworm", cache_dir=Path("unused")) is False
    labels = engine.labels(base_image)
    assert labels[LABEL_SUITE] == "bookworm"
    assert labels[LABEL_PYTHON].startswith("3.11.")
    result = engine.run(base_image, ["python3", "-c", "import sys, venv, ensurepip; print(sys.version_info[:2])"])
    assert result.stdout.strip() == "(3, 11)", result.stderr


def test_push_to_registry(engine: Engine, registry: str, tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    run_id = _unique()
    (rootfs / "hello.txt").write_text(f"pinwheel {run_id}\n")
    local = f"pinwheel-test/tiny:{run_id}"
    repo = f"pinwheel-test/tiny-{run_id}"
    remote = f"{registry}/{repo}:v1"

    import_rootfs(rootfs, local, engine, changes=[f"LABEL io.pinwheel.test.run={run_id}"])
    try:
        assert engine.labels(local)["io.pinwheel.test.run"] == run_id
        engine.tag(local, remote)
        events = []
        pushed = engine.push(remote, on_event=events.append)
        digest = pushed.digest
        assert digest.startswith("sha256:")
        assert engine.repo_digest(remote) == digest
        # one layer, sent now; its size is the blob's in the registry's manifest
        (diff_id,) = engine.layers(local)
        assert [(layer.diff_id, layer.state) for layer in pushed.layers] == [(diff_id, "pushed")]
        assert pushed.sizes_from == "registry" and pushed.bytes_pushed > 0 and pushed.bytes_present == 0
        assert any(e.layer == diff_id[7:19] and e.status == "pushed" for e in events), events
        # pushed again: nothing to send, the same digest
        again = engine.push(remote)
        assert again.digest == digest and again.bytes_pushed == 0
        assert again.bytes_present == pushed.bytes_pushed and again.layers[0].state == "exists"

        with urllib.request.urlopen(f"http://{registry}/v2/{repo}/tags/list", timeout=10) as resp:
            assert json.load(resp) == {"name": repo, "tags": ["v1"]}
        request = urllib.request.Request(
            f"http://{registry}/v2/{repo}/manifests/v1",
            method="HEAD",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.headers["Docker-Content-Digest"] == digest
    finally:
        engine.remove(remote, force=True)
        engine.remove(local, force=True)
