"""run steps on the real engine: a script in a builder stage with a checked download from a local HTTP server
on loopback, its output copied into the image and verified after the last step; the same step in the image
itself; a tampered download failing before the engine starts, naming both digests; a failing verify failing
the build naming the step.
"""
from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from pinwheel.image.engine import Engine

from tests.support.file_server import serve_files
from tests.support.manifests import as_steps
from tests.support.pipeline import Project

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def file_server(tmp_path_factory: pytest.TempPathFactory):
    """(directory served, its base URL): a plain HTTP file server on loopback; `build` downloads on the host."""
    root = tmp_path_factory.mktemp("run-server")
    with serve_files(root) as url:
        yield root, url


def tool_tarball(greeting: str) -> bytes:
    """A release tarball holding one executable script, pw-tool/bin/pw-tool, that prints the greeting."""
    data = f"#!/bin/sh\necho '{greeting}'\n".encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("pw-tool/bin/pw-tool")
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def run_steps(url: str, sha256: str, verify: str = "pw-tool") -> str:
    return f"""\
  - name: tool
    kind: run
    why: "a release binary with no package, unpacked in a builder stage"
    builder: base
    downloads:
      - {{url: "{url}", sha256: "{sha256}", dest: /tmp/dl/pw-tool.tar.gz}}
    workdir: /tmp/unpack
    env: {{PW_PREFIX: /opt/pw-tool}}
    cache: [/root/.cache/pw-run-test]
    script: |
      tar -xzf /tmp/dl/pw-tool.tar.gz
      mkdir -p "$PW_PREFIX"
      cp -a pw-tool/bin "$PW_PREFIX/"
      echo cached > /root/.cache/pw-run-test/seen
    outputs: [/opt/pw-tool]
    verify: {{paths: [/opt/pw-tool/bin/pw-tool], command: "{verify}"}}
  - name: links
    kind: run
    why: "the name the launch scripts call it by"
    script: ln -s /opt/pw-tool/bin/pw-tool /usr/local/bin/pw-tool

"""


def with_run_steps(manifest: str, entry: str) -> str:
    return as_steps(manifest, first=entry)


def test_a_run_step_with_a_checked_download_builds_and_a_tampered_one_fails_naming_both(
        project_factory, engine: Engine, file_server):
    served, base_url = file_server
    good = tool_tarball("hello from pw-tool")
    (served / "pw-tool-1.0.tar.gz").write_bytes(good)
    url, digest = f"{base_url}/pw-tool-1.0.tar.gz", hashlib.sha256(good).hexdigest()
    project: Project = project_factory("run")
    original = project.manifest.read_text()
    project.manifest.write_text(with_run_steps(original, run_steps(url, digest)))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)

    report = json.loads(project.cli("report", "--variant", "cu130", "--json").stdout)
    assert [(o["step"], o["what"].split(" (")[0]) for o in report["outside"]] == [
        ("tool", "not judged by the resolver"), ("links", "not judged by the resolver")]
    text = " ".join(project.cli("report", "--variant", "cu130").stdout.split())
    assert "run step tool: not judged by the resolver (a script in builder base, copying /opt/pw-tool" in text

    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    image = json.loads(built.stdout)
    tag = image["tags"][0]
    ran = engine.run(tag, ["sh", "-c", "pw-tool; ls /root/.cache/pw-run-test 2>/dev/null | wc -l; "
                                       "ls /tmp/dl 2>/dev/null | wc -l"])
    # the output and the link are in the image; the cache and the download stayed in the builder stage
    assert ran.stdout.split("\n")[:3] == ["hello from pw-tool", "0", "0"], ran
    inputs = json.loads(engine.labels(tag)["io.pinwheel.inputs"])
    [entry, _] = inputs["runs"]
    assert entry["downloads"] == [{"url": url, "sha256": digest, "dest": "/tmp/dl/pw-tool.tar.gz"}]

    # a release whose bytes changed under its name: the host refuses it before the engine starts, naming both
    pinned, tampered = tool_tarball("what was pinned"), tool_tarball("not what was pinned")
    (served / "pw-tool-1.1.tar.gz").write_bytes(tampered)
    url11, pinned_digest = f"{base_url}/pw-tool-1.1.tar.gz", hashlib.sha256(pinned).hexdigest()
    project.manifest.write_text(with_run_steps(original, run_steps(url11, pinned_digest)))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    failed = project.cli("build", "--variant", "cu130", "--json")
    assert failed.returncode == 2, failed.output[-3000:]
    assert (f"{url11}: sha256 mismatch: expected {pinned_digest}, found {hashlib.sha256(tampered).hexdigest()}"
            in failed.stderr), failed.stderr[-3000:]
    assert not failed.stdout.strip(), failed.stdout


def test_a_failing_verify_fails_the_build_naming_the_step(project_factory, file_server):
    served, base_url = file_server
    good = tool_tarball("hello again")
    (served / "pw-tool-2.0.tar.gz").write_bytes(good)
    project: Project = project_factory("run-verify")
    project.manifest.write_text(with_run_steps(project.manifest.read_text(), run_steps(
        f"{base_url}/pw-tool-2.0.tar.gz", hashlib.sha256(good).hexdigest(), verify="pw-tool --version && false")))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    failed = project.cli("build", "--variant", "cu130", "--quiet")
    assert failed.returncode == 1, failed.output[-3000:]
    assert "pinwheel: ERROR: run step tool: verify: its command failed with exit 1" in failed.stderr, \
        failed.stderr[-3000:]
