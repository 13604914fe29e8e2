"""Hostile lock files: a flipped hash, a truncated requirements.txt or expect.json, a dropped pin and a verify
snippet turned into sys.exit(0) are not up to date (lock --check exit 1, naming the file) and the build refuses
them; a lock file that is a directory or a symlink to /dev/zero is exit 2 naming it, in bounded memory; a lock
killed in its swap is finished by the next run. Real `lock` runs against the local HTTP index."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .bounded import assert_refused, cli
from .locked_project import lock, lock_dir, populate, write_manifest


@pytest.fixture
def project(local_index, local_project):
    populate(local_index)
    root = local_project(local_index.serve())
    write_manifest(root)
    assert lock(root) == 0
    return root


def check(root: Path):
    return cli("--manifest", str(root / "wheels_manifest.yaml"), "lock", "--check")


def build(root: Path):
    """`build` stops at the lock, before it needs an engine: a refused lock never reaches one."""
    return cli("--manifest", str(root / "wheels_manifest.yaml"), "build", "--variant", "cu130")


def assert_not_up_to_date(root: Path, *fragments: str) -> None:
    proc = check(root)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert "up to date" not in said, said
    for fragment in fragments:
        assert fragment in said, said
    refused = build(root)
    assert_refused(refused, 2, "stale", *fragments)


def test_the_untouched_lock_is_up_to_date(project):
    proc = check(project)
    assert proc.returncode == 0 and "up to date" in proc.stdout, proc.stdout + proc.stderr


def slice_file(root: Path) -> Path:
    return next(p for p in sorted(lock_dir(root).glob("0*.txt")))


def test_a_flipped_hash_in_a_slice(project):
    path = slice_file(project)
    text = path.read_text()
    at = text.index("--hash=sha256:") + len("--hash=sha256:")
    path.write_text(text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1:])
    assert_not_up_to_date(project, path.name)


def test_a_flipped_hash_in_requirements_txt(project):
    path = lock_dir(project) / "requirements.txt"
    text = path.read_text()
    at = text.rindex("--hash=sha256:") + len("--hash=sha256:")
    path.write_text(text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1:])
    assert_not_up_to_date(project, slice_file(project).name, "requirements.txt")


def test_a_hash_changed_the_same_way_in_a_slice_and_in_requirements_txt(project):
    """Every file derived from requirements.txt agrees with the edit; its own digest line does not."""
    piece = slice_file(project)
    text = piece.read_text()
    at = text.index("--hash=sha256:") + len("--hash=sha256:")
    old = text[at:at + 64]
    new = ("0" if old[0] != "0" else "1") + old[1:]
    piece.write_text(text.replace(old, new))
    whole = lock_dir(project) / "requirements.txt"
    assert old in whole.read_text()
    whole.write_text(whole.read_text().replace(old, new))
    assert_not_up_to_date(project, "requirements.txt: edited after `build.py lock` wrote it")


def test_a_lock_without_its_resolution_digest(project):
    whole = lock_dir(project) / "requirements.txt"
    whole.write_text("".join(line for line in whole.read_text().splitlines(keepends=True)
                             if not line.startswith("# pinwheel-resolution: ")))
    assert_not_up_to_date(project, "no '# pinwheel-resolution:' header")


def test_a_truncated_requirements_txt(project):
    path = lock_dir(project) / "requirements.txt"
    text = path.read_text()
    path.write_text(text[: text.index("\npwh-top==") + 1])  # its last entry cut off, whole lines left
    assert_not_up_to_date(project, "pwh-top==1.0 is not what requirements.txt locks")


def test_a_truncated_slice(project):
    path = slice_file(project)
    text = path.read_text()
    path.write_text(text[: text.index("\npwh-top==") + 1])  # its last entry cut off, whole lines left
    assert_not_up_to_date(project, "requirements.txt", "pwh-top in no slice")


def test_a_truncated_expect_json(project):
    path = lock_dir(project) / "expect.json"
    path.write_text(path.read_text()[:40])
    assert_not_up_to_date(project, "expect.json", "not JSON")


def test_a_pin_dropped_from_expect_json(project):
    path = lock_dir(project) / "expect.json"
    expect = json.loads(path.read_text())
    del expect["pins"]["pwh-base"]
    path.write_text(json.dumps(expect, indent=2, sort_keys=True) + "\n")
    assert_not_up_to_date(project, "expect.json", "pins", "pwh-base is missing")


def test_a_verify_snippet_turned_into_sys_exit_0(project):
    path = lock_dir(project) / "expect.json"
    expect = json.loads(path.read_text())
    expect["verify"]["pwh-top"]["python"] = "import sys; sys.exit(0)"
    path.write_text(json.dumps(expect, indent=2, sort_keys=True) + "\n")
    assert_not_up_to_date(project, "expect.json", "verify", "pwh-top")


@pytest.mark.parametrize("name", ["requirements.txt", "expect.json", "slice"])
@pytest.mark.parametrize("hostile", ["directory", "dev-zero"])
def test_a_lock_file_that_is_not_a_regular_file_is_exit_2_naming_it(project, name: str, hostile: str):
    path = slice_file(project) if name == "slice" else lock_dir(project) / name
    path.unlink()
    if hostile == "directory":
        path.mkdir()
    else:
        os.symlink("/dev/zero", path)
    expected = "is a directory" if hostile == "directory" else "is a character device"
    for proc in (check(project), build(project),
                 cli("--manifest", str(project / "wheels_manifest.yaml"), "report", "--offline")):
        assert_refused(proc, 2, str(path), expected)


KILLER = textwrap.dedent("""
    import os, signal, sys
    from pinwheel import cli
    replace = os.replace
    def killed_after_the_new_lock_is_in_place(src, dst):
        replace(src, dst)
        if ".new-" in os.fspath(src):
            os.kill(os.getpid(), signal.SIGKILL)
    os.replace = killed_after_the_new_lock_is_in_place
    sys.exit(cli.main(["--manifest", sys.argv[1], "lock", "--variant", "cu130", "--upgrade"]))
""")


def test_a_lock_killed_just_after_its_swap_is_finished_by_the_next_run(project):
    lock_d = lock_dir(project)
    other = lock_d / "arm64"  # another platform's lock lives inside the variant's directory
    other.mkdir()
    (other / "requirements.txt").write_text("# the arm64 lock\n")
    killed = subprocess.run([sys.executable, "-c", KILLER, str(project / "wheels_manifest.yaml")],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    stranded = list(lock_d.parent.glob(".cu130.old-*"))
    assert len(stranded) == 1 and (stranded[0] / "arm64" / "requirements.txt").is_file()
    assert not other.exists()  # the state the kill leaves: arm64/ aside
    proc = check(project)
    assert proc.returncode == 1 and "interrupted `lock`" in proc.stdout + proc.stderr, proc.stdout + proc.stderr

    assert lock(project) == 0
    assert (other / "requirements.txt").read_text() == "# the arm64 lock\n"
    assert not list(lock_d.parent.glob(".cu130.*"))
    shutil.rmtree(other)
    proc = check(project)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_lock_killed_between_moving_the_old_aside_and_the_new_in_is_restored(project):
    lock_d = lock_dir(project)
    before = {p.name: p.read_bytes() for p in lock_d.iterdir()}
    aside = lock_d.parent / ".cu130.old-killed"
    os.replace(lock_d, aside)  # the state a kill between the two renames leaves
    (lock_d.parent / ".cu130.new-killed").mkdir()
    assert lock(project) == 0
    assert {p.name: p.read_bytes() for p in lock_d.iterdir()} == before
    assert not list(lock_d.parent.glob(".cu130.*"))
