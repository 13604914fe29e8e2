"""Real wheels from the package index, downloaded once into .cache/wheels."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinwheel.abi.elf import classify_wheel
from pinwheel.abi.provenance import provenance_mismatches

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "wheels"
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def fetch(requirement: str, file_prefix: str) -> Path:
    """The cached wheel for ``requirement``, downloaded with pip (its configured index) if absent."""
    found = sorted(CACHE.glob(f"{file_prefix}-*.whl"))
    if found:
        return found[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", *(f"--platform={p}" for p in PLATFORMS),
           "-d", str(CACHE), requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"pip download {requirement} failed:\n{proc.stderr[-2000:]}"
    found = sorted(CACHE.glob(f"{file_prefix}-*.whl"))
    assert found, f"pip download {requirement} left no {file_prefix}-*.whl in .cache/wheels"
    return found[0]


@pytest.mark.network
def test_sgl_flash_mla_is_stable_abi() -> None:
    whl = fetch("sgl-flash-mla==1.0.0", "sgl_flash_mla-1.0.0")
    t0 = time.perf_counter()
    w = classify_wheel(whl)
    elapsed = time.perf_counter() - t0
    assert w.abi_class == "stable"
    assert (w.name, w.version, w.python_tag, w.abi_tag) == ("sgl-flash-mla", "1.0.0", "cp310", "abi3")
    assert w.declared_torch == ">=2.14.1"
    assert w.elf_files, "expected compiled extension modules"
    for e in w.elf_files:
        assert e.abi_class == "stable", e
        assert e.unstable_symbol_count == 0
        assert e.stable_symbol_count > 0
        # it still names torch's libraries: DT_NEEDED alone must not make it unstable
        assert "libc10.so" in e.torch_needed
    assert {"9.0", "10.0"} <= set(w.cubin_archs)
    # Built for torch >= 2.14.1: a manifest that claims torch 2.13 disagrees.
    msgs = provenance_mismatches(w, {"torch": "2.13.0", "cuda": "13.0"})
    assert msgs == ["sgl-flash-mla 1.0.0: manifest says it was built against torch 2.13.0, "
                    "but the wheel requires torch>=2.14.1"]
    assert provenance_mismatches(w, {"torch": "2.14.1", "cuda": "13.0"}) == []
    assert elapsed < 10, f"classifying took {elapsed:.2f}s"


@pytest.mark.network
def test_torchvision_is_unstable_abi() -> None:
    """torchvision 0.28.0 (about 8 MB) links c10/at C++ symbols and pins torch 2.13.0."""
    whl = fetch("torchvision==0.28.0", "torchvision-0.28.0")
    w = classify_wheel(whl)
    assert w.abi_class == "unstable"
    assert w.declared_torch == "==2.13.0"
    ext = {e.path_in_wheel: e for e in w.elf_files}
    c = ext["torchvision/_C.so"]
    assert c.abi_class == "unstable"
    assert 0 < len(c.sample_unstable_symbols) <= 5
    assert all(s.startswith(("_ZN2at", "_ZN3c10", "_ZNK2at", "_ZNK3c10", "_ZN5torch", "_ZNK5torch", "_Z"))
               for s in c.sample_unstable_symbols)
    # the libraries auditwheel vendored are not torch-linked
    assert all(e.abi_class == "none" for e in w.elf_files if e.vendored)
    assert provenance_mismatches(w, {"torch": "2.13.0", "cuda": "13.0"}) == []
    assert provenance_mismatches(w, {"torch": "2.14.1"}) == [
        "torchvision 0.28.0: manifest says it was built against torch 2.14.1, but the wheel requires torch==2.13.0"
    ]
