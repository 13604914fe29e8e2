"""Fixtures for the abi tests: shared objects compiled here, wheels zipped here.

Nothing is linked against torch: a shared object may keep undefined symbols,
so declaring a torch function and calling it is enough to make it an import.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.abi_builders import EMPTY_C, NONE_C, NONE_CPP, STABLE_CPP, UNSTABLE_CPP, fatbin_c


# --------------------------------------------------------------------------- #
# Fixtures
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="session")
def toolchain() -> dict[str, str]:
    gcc, gxx = shutil.which("gcc"), shutil.which("g++")
    if not gcc or not gxx:
        pytest.skip("gcc/g++ not found: the abi tests compile their own shared objects")
    return {"c": gcc, "cpp": gxx}


@pytest.fixture(scope="session")
def build_so(toolchain, tmp_path_factory):
    """build_so(name, source, lang="c"|"cpp", extra=[...]) -> Path of a .so built in a tmp dir."""
    root = tmp_path_factory.mktemp("so")

    def build(name: str, source: str, lang: str = "c", extra: list[str] | None = None,
              soname: str | None = None) -> Path:
        src = root / f"{name}.{'cpp' if lang == 'cpp' else 'c'}"
        src.write_text(source)
        out = root / name
        cmd = [toolchain[lang], "-shared", "-fPIC", "-O1", "-o", str(out), str(src)]
        if soname:
            cmd.append(f"-Wl,-soname,{soname}")
        cmd += extra or []
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out

    build.root = root  # type: ignore[attr-defined]
    return build


@pytest.fixture(scope="session")
def sos(build_so) -> dict[str, Path]:
    """The shared objects of each class, built once per session."""
    root: Path = build_so.root
    # Stub libraries, so that DT_NEEDED entries look like a real torch extension's.
    build_so("libc10.so", EMPTY_C, soname="libc10.so")
    build_so("libtorch.so", EMPTY_C, soname="libtorch.so")
    build_so("libcudart.so", EMPTY_C, soname="libcudart.so.13")
    link = ["-L" + str(root), "-Wl,--no-as-needed", "-lc10", "-ltorch", "-lcudart"]
    return {
        "unstable": build_so("unstable.so", UNSTABLE_CPP, "cpp", link),
        "stable": build_so("stable.so", STABLE_CPP, "cpp", link),
        "none_cpp": build_so("none_cpp.so", NONE_CPP, "cpp", ["-lm"]),
        "none_c": build_so("none_c.so", NONE_C, "c", ["-lm"]),
        "fatbin": build_so("fatbin.so", fatbin_c([(2, 90), (2, 100), (1, 90)]), "c", link),
    }


@pytest.fixture
def make_wheel(tmp_path):
    """make_wheel(name, version, files={path: bytes|Path}, requires=[...], tag=...) -> Path."""

    def make(name: str, version: str, files: dict[str, bytes | Path], requires: list[str] = (),
             tag: str = "cp312-cp312-linux_x86_64") -> Path:
        dist = f"{name.replace('-', '_')}-{version}"
        meta = [
            "Metadata-Version: 2.1",
            f"Name: {name}",
            f"Version: {version}",
            *(f"Requires-Dist: {r}" for r in requires),
            "",
            "A test wheel.",
        ]
        wheel_txt = f"Wheel-Version: 1.0\nGenerator: pinwheel-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
        path = tmp_path / f"{dist}-{tag}.whl"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for arc, content in files.items():
                zf.writestr(arc, content.read_bytes() if isinstance(content, Path) else content)
            zf.writestr(f"{dist}.dist-info/METADATA", "\n".join(meta) + "\n")
            zf.writestr(f"{dist}.dist-info/WHEEL", wheel_txt)
            zf.writestr(f"{dist}.dist-info/RECORD", "")
        return path

    return make
