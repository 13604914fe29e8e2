"""The installed tool works: build the wheel, install it into a fresh venv, run it elsewhere.

Offline by construction:
- the wheel is built from a copy of the sources (pyproject.toml and pinwheel/ only,
  so nothing outside the package can leak in) with the test interpreter's own
  setuptools (`--no-build-isolation`, `--no-index`);
- the fresh venv is made from the test interpreter, which makes it a venv of the
  *base* Python: it does not see the test venv's site-packages. The wheel goes in
  with `pip --python <fresh> install --no-deps --no-index`.
- pinwheel's dependencies come from the test venv's site-packages through one
  .pth path line. A path line adds a directory without running the .pth files in
  it, so the test venv's editable finder for the checkout is never installed;
  the test asserts that `pinwheel` is imported from the fresh venv.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from pinwheel.image import payload

ROOT = Path(__file__).resolve().parents[2]
# report's exit code for "could not judge": an empty cache, offline, is never clean
EXIT_UNCHECKED = 3


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PINWHEEL_", "PIP_", "VIRTUAL_ENV"))}
    env.update({
        "PYTHONDONTWRITEBYTECODE": "1",
        "PINWHEEL_CACHE_DIR": str(tmp_path / "cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    })
    return env


def check_build_backend() -> None:
    """The no-isolation build uses the test interpreter's setuptools: it must be one pyproject allows."""
    import importlib.metadata

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for text in declared:
        req = Requirement(text)
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"the build backend {req.name} is not installed in {sys.prefix}: `make deps`")
        assert req.specifier.contains(have, prereleases=True), f"{req.name} {have} does not satisfy {text}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the pinwheel wheel (and a path to the dependencies); its bin/."""
    check_build_backend()
    tmp = tmp_path_factory.mktemp("wheel")
    env = clean_env(tmp)
    src = tmp / "src"
    src.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", src / "pyproject.toml")
    shutil.copytree(ROOT / "pinwheel", src / "pinwheel", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                "-w", str(dist), str(src)], tmp, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = sorted(dist.glob("pinwheel-*.whl"))
    assert len(wheels) == 1, wheels

    venv = tmp / "venv"
    proc = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, env)
    assert proc.returncode == 0, proc.stderr
    python = venv / "bin" / "python"
    proc = run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                str(wheels[0])], tmp, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    purelib = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       tmp, env).stdout.strip())
    deps = [p for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]] if Path(p).is_dir()]
    (purelib / "_pinwheel_test_deps.pth").write_text("".join(f"{p}\n" for p in dict.fromkeys(deps)))
    return venv / "bin"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The shipped manifest and images/ in a directory of their own, without the rendered Dockerfile."""
    proj = tmp_path / "elsewhere"
    proj.mkdir()
    shutil.copy2(ROOT / "wheels_manifest.yaml", proj / "wheels_manifest.yaml")
    shutil.copytree(ROOT / "images", proj / "images")
    (proj / "images" / "train" / "Dockerfile").unlink()
    return proj


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Path, project: Path, tmp_path: Path):
    proc = run([str(installed / "python"), "-I", "-c",
                "import hashlib, pinwheel.render, pinwheel.smoke, pinwheel.image.payload as p; "
                "print(pinwheel.render.__file__); print(pinwheel.smoke.__file__); "
                "print(hashlib.sha256(p.build()).hexdigest())"],
               project, clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    render_file, smoke_package, payload_sha = proc.stdout.split()
    site_dir = installed.parent / "lib"
    assert Path(render_file).is_relative_to(site_dir), render_file
    assert Path(smoke_package).is_relative_to(site_dir), smoke_package
    # the installed package ships every module of the payload: its archive is the checkout's, byte for byte
    assert payload_sha == hashlib.sha256(payload.build()).hexdigest()


def test_installed_render_writes_the_committed_dockerfile(installed: Path, project: Path, tmp_path: Path):
    env = clean_env(tmp_path)
    proc = run([str(installed / "pinwheel"), "render"], project, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    rendered = (project / "images" / "train" / "Dockerfile").read_bytes()
    assert rendered == (ROOT / "images" / "train" / "Dockerfile").read_bytes()
    proc = run([str(installed / "pinwheel"), "render", "--check"], project, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_installed_report_offline_does_not_crash(installed: Path, project: Path, tmp_path: Path):
    proc = run([str(installed / "pinwheel"), "report", "--offline"], project, clean_env(tmp_path))
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    assert proc.returncode == EXIT_UNCHECKED, (proc.returncode, out[-3000:])
    assert "could not be judged" in out
    assert "cu130" in out
