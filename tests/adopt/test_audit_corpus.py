"""`audit` on the corpus: each hazard class found at its line, and the traps an expert would not flag left alone."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pinwheel.reports.audit import audit

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "corpus"


def rules(path: Path, context: Path | None = None) -> set[tuple[int, str]]:
    return {(f.line, f.rule) for f in audit(path, context).findings}


def test_each_hazard_class_at_its_line(tmp_path):
    got = rules(CORPUS / "trainer.Dockerfile", tmp_path)  # a context without the requirements file
    for expected in [
        (14, "unguarded-wheel-glob"),
        (26, "no-deps-install"),  # `pip -v install --no-deps` is an install
        (28, "git-branch"),  # @${TOOLS_BRANCH}, whose default is main
        (29, "empty-commit-arg"),  # git checkout ${KERNELS_COMMIT}, no default
        (31, "git-branch"),  # git clone -b nv_dev, no checkout
        (31, "pip-bad-option"),  # -no-build-isolation: pip's own parser refuses it
        (39, "force-reinstall"),
        (41, "failure-masked"),  # pip install ... || true
        (42, "retry-swallows-failure"),
        (43, "curl-pipe-shell"),
        (44, "download-without-checksum"),
        (47, "requirements-unread"),
    ]:
        assert expected in got, (expected, sorted(got))


def test_the_traps_are_not_flagged():
    got = rules(CORPUS / "trainer.Dockerfile")
    assert (33, "loop-without-failure") not in got  # the body ends in `|| { echo ...; exit 1; }`
    assert (33, "failure-masked") not in got
    messages = [f.message for f in audit(CORPUS / "trainer.Dockerfile").findings]
    assert not any("999" in m for m in messages)  # --resume-retries takes a value
    assert not any(m.startswith("python[all]") for m in messages)  # -e path[extra] is a path
    assert (27, "git-branch") not in got and (27, "git-without-commit") not in got  # a full commit


def test_a_requirements_file_in_the_context_is_read():
    findings = [f for f in audit(CORPUS / "trainer.Dockerfile", CORPUS).findings if f.line == 47]
    assert [(f.rule, f.message.split(":")[0:2]) for f in findings] == [("unpinned", ["requirements.txt", "2"])]


def test_every_finding_has_a_fix():
    for path in sorted(CORPUS.glob("*.Dockerfile")):
        for f in audit(path).findings:
            assert f.fix and f.level in ("error", "warning") and f.line >= 1, f


def test_a_heredoc_is_audited_as_the_script_it_is():
    result = audit(CORPUS / "heredoc.Dockerfile")
    assert {tuple(i.requirements) for i in result.installs} >= {("numpy==2.1.0",), ("torch>=2.13",)}
    assert (6, "version-range") in {(f.line, f.rule) for f in result.findings}


def test_a_huge_dockerfile_is_refused_by_a_bound(tmp_path):
    path = tmp_path / "Dockerfile"
    with path.open("w") as fh:
        fh.write("FROM scratch\n")
        fh.write("RUN pip install x\n" * 1_200_000)
    for command in ("audit", "import"):
        proc = subprocess.run([sys.executable, str(ROOT / "build.py"), command, str(path)], capture_output=True,
                              text=True, cwd=tmp_path, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "at most" in proc.stderr and "Traceback" not in proc.stderr


def test_too_many_lines_is_refused_by_the_line_bound(tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text("FROM scratch\n" + "# a\n" * 30_000)  # small in bytes, over the line bound
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "audit", str(path)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "lines; a Dockerfile may have at most" in proc.stderr, proc.stderr
