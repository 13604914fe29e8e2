"""`audit` on hand-written Dockerfiles: each flagged pattern with its line, and pinwheel's own file clean."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel import cli
from pinwheel.reports.audit import audit

ROOT = Path(__file__).resolve().parents[2]

HAND_WRITTEN = """\
FROM debian:bookworm
ARG HF_TOKEN
ARG MEGATRON_COMMIT
ARG ENABLE_CUDA_13=1
RUN pip install torch
RUN pip install "flashinfer-python>=0.6" numpy==2.1.0
RUN pip install /tmp/wheels/flash_mla-*.whl
RUN if ls /tmp/wheels/fast_hadamard-*.whl >/dev/null 2>&1; then \\
      pip install --no-deps /tmp/wheels/fast_hadamard-*.whl; fi
RUN pip install git+https://example.invalid/org/mbridge.git@main
RUN pip install git+https://example.invalid/org/emerging.git
RUN pip install "git+https://example.invalid/org/megatron.git@${MEGATRON_COMMIT}"
RUN pip install git+https://example.invalid/org/fla.git@0123456789abcdef0123456789abcdef01234567
RUN pip install --force-reinstall --no-deps apache-tvm-ffi==0.1.11
RUN for p in /patches/*.patch; do patch -p1 < "$p"; done
RUN set -e; for p in /patches/*.patch; do patch -p1 < "$p"; done
RUN python -c "import transformer_engine" || true
RUN python -m pip install -r /tmp/req.txt
"""


def findings(tmp_path: Path, text: str):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return audit(path)


def test_every_flagged_pattern_with_its_line(tmp_path):
    result = findings(tmp_path, HAND_WRITTEN)
    got = {(f.line, f.rule) for f in result.findings}
    assert got == {
        (2, "secret-build-arg"),
        (5, "unpinned"),
        (6, "version-range"),
        (7, "unguarded-wheel-glob"),
        (10, "git-branch"),
        (11, "git-without-commit"),
        (12, "empty-commit-arg"),
        (14, "force-reinstall"),
        (15, "loop-without-failure"),
        (17, "check-or-true"),
        (8, "no-deps-install"),
        (14, "no-deps-install"),
        (18, "requirements-unread"),
    }
    # the guarded glob (lines 8-9), the commit-pinned git URL (13) and the `set -e` loop (16) are not flagged
    assert result.errors == 7
    (forced,) = [i for i in result.installs if i.line == 14]
    assert forced.flags == ["--force-reinstall", "--no-deps"] and forced.requirements == ["apache-tvm-ffi==0.1.11"]
    (req,) = [i for i in result.installs if i.line == 18]
    assert req.flags == ["-r /tmp/req.txt"]


def test_cli_exit_codes_and_json(tmp_path, capsys):
    path = tmp_path / "Dockerfile"
    path.write_text(HAND_WRITTEN)
    assert cli.main(["audit", str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "pinwheel.audit/1" and data["summary"]["errors"] == 7
    path.write_text("FROM debian:bookworm\nRUN pip install numpy==2.1.0\n")
    assert cli.main(["audit", str(path)]) == 0


def test_pinwheels_own_dockerfile_has_no_error(tmp_path):
    result = audit(ROOT / "images" / "train" / "Dockerfile")
    assert result.errors == 0 and len(result.installs) >= 4


@pytest.mark.parametrize("content, reason", [
    (b"\x00\xff\xfe binary", "not a text file"),
    (b"RUN pip install numpy==2.1.0\n", "not a Dockerfile (no FROM instruction)"),
    (b"", "file with no instructions"),
])
@pytest.mark.parametrize("command", ["audit", "import"])
def test_what_is_not_a_dockerfile_is_a_clear_error(tmp_path, content, reason, command):
    path = tmp_path / "Dockerfile"
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), command, str(path)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert reason in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "wheels_manifest.yaml").exists()  # a refused import writes nothing


def test_replay_finds_the_order_hazard_and_what_no_deps_drops(local_index, tmp_path, capsys):
    local_index.add("base-lib", "1.0")
    local_index.add("base-lib", "2.0")
    local_index.add("app", "1.0", requires=["base-lib>=1.0"])
    local_index.add("pinner", "1.0", requires=["base-lib==1.0"])
    local_index.add("frontend", "1.0", requires=["helper>=1"])
    local_index.add("helper", "1.0")
    url = local_index.serve()
    path = tmp_path / "Dockerfile"
    path.write_text("FROM debian:bookworm\nRUN pip install app==1.0\nRUN pip install pinner==1.0\n"
                    "RUN pip install --no-deps frontend==1.0\n")
    rc = cli.main(["audit", str(path), "--replay", "--json", "--index-url", url])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1  # the hazard is an error: a later layer moves what an earlier one installed
    (hazard,) = data["replay"]["hazards"]
    assert (hazard["package"], hazard["before"], hazard["after"], hazard["step"]) == ("base-lib", "2.0", "1.0", "pinner")
    assert hazard["dockerfile_line"] == 3  # located at the Dockerfile line the step came from
    (dropped,) = data["replay"]["suppressed"]
    assert (dropped["parent"], dropped["requirement"], dropped["detail"]) == ("frontend", "helper>=1",
                                                                             "would install helper 1.0")
