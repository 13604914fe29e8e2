"""scripts/standin-wheels: an example's stand-in wheels, the same bytes every time, and bad listings refused."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "standin-wheels"


def run(image: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(image)], capture_output=True, text=True, timeout=60)


LISTING = """\
wheels:
  - name: pw-kernel
    version: "1.0"
    tags: cp311-cp311-linux_x86_64
    requires: [torch, "einops>=0.8"]
    modules: {pw_kernel: [launch], pw_kernel.sub: []}
    paths: {pw_kernel: [get_dir]}
    why: "a release wheel this machine cannot download"
"""


def test_each_entry_becomes_a_wheel_with_its_metadata_the_same_bytes_every_time(tmp_path):
    image = tmp_path / "images" / "demo"
    image.mkdir(parents=True)
    (image / "standins.yaml").write_text(LISTING)
    assert run(image).returncode == 0
    [whl] = (image / "wheels").iterdir()
    assert whl.name == "pw_kernel-1.0-cp311-cp311-linux_x86_64.whl"
    first = whl.read_bytes()
    with zipfile.ZipFile(whl) as zf:
        meta = zf.read("pw_kernel-1.0.dist-info/METADATA").decode()
        init = zf.read("pw_kernel/__init__.py").decode()
        assert "pw_kernel/sub/__init__.py" in zf.namelist()
    assert "Requires-Dist: torch\nRequires-Dist: einops>=0.8" in meta and "Summary: stand-in:" in meta
    assert "STAND_IN = True" in init and "def launch(" in init and "def get_dir():" in init
    whl.unlink()
    assert run(image).returncode == 0 and whl.read_bytes() == first


def test_a_bad_listing_is_one_located_line_and_exit_2(tmp_path):
    image = tmp_path / "demo"
    image.mkdir()
    for text in ("wheels: [", "wheels: 3", "other: []", "wheels:\n  - {name: x, version: '1'}\n",
                 "wheels:\n  - {name: 'x; rm -rf /', version: '1', why: w}\n",
                 "wheels:\n  - {name: x, version: '1', why: w, tags: nope}\n"):
        (image / "standins.yaml").write_text(text)
        proc = run(image)
        assert proc.returncode == 2, (text, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "standins.yaml" in proc.stderr
    assert not (image / "wheels").exists() or not list((image / "wheels").iterdir())


def test_an_image_without_a_listing_has_nothing_to_write(tmp_path):
    assert run(tmp_path).returncode == 0 and not (tmp_path / "wheels").exists()


def test_the_abi_classifier_knows_a_stand_in_and_a_real_wheel_apart(tmp_path):
    """A stand-in carries no real code, so its ABI would read 'no torch linkage': the classifier marks it, and
    the bump and the report then leave its verdict unchecked rather than ok."""
    from pinwheel.abi.elf import classify_wheel

    image = tmp_path / "images" / "demo"
    image.mkdir(parents=True)
    (image / "standins.yaml").write_text(LISTING)
    assert run(image).returncode == 0
    [whl] = (image / "wheels").iterdir()
    assert classify_wheel(whl).stand_in is True
    real = tmp_path / "pw_real-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl) as src, zipfile.ZipFile(real, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("/WHEEL"):
                data = data.replace(b"Generator: pinwheel-standin", b"Generator: bdist_wheel (0.45.1)")
            dst.writestr(item, data)
    assert classify_wheel(real).stand_in is False
