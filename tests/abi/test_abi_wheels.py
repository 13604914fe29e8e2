"""Wheels of each ABI class, compiled and zipped by the tests themselves."""

from __future__ import annotations

import struct

import pytest

from tests.support.abi_builders import UNSTABLE_SYMBOLS, fatbin_bytes
from pinwheel.abi import elf
from pinwheel.abi.elf import ElfAbi, WheelAbi, classify_elf, classify_wheel
from pinwheel.abi.provenance import provenance_mismatches

PROVENANCE = {"torch": "2.13.0", "cuda": "13.0", "arch_list": ["9.0", "10.0"]}


# --------------------------------------------------------------------------- #
# Single ELF files
# --------------------------------------------------------------------------- #
def test_unstable_elf(sos) -> None:
    e = classify_elf(sos["unstable"])
    assert isinstance(e, ElfAbi)
    assert e.abi_class == "unstable"
    assert e.path_in_wheel == "unstable.so"
    assert e.unstable_symbol_count == len(UNSTABLE_SYMBOLS)
    assert e.stable_symbol_count == 1  # aoti_torch_get_data_ptr is there too
    assert len(e.sample_unstable_symbols) == 5
    assert set(e.sample_unstable_symbols) == UNSTABLE_SYMBOLS
    assert all(s.startswith("_Z") for s in e.sample_unstable_symbols)  # raw, not demangled
    assert e.torch_needed == ["libc10.so", "libtorch.so"]


def test_stable_elf_needs_libc10_but_imports_only_shims(sos) -> None:
    e = classify_elf(sos["stable"])
    assert e.abi_class == "stable"
    assert e.stable_symbol_count == 3
    assert e.unstable_symbol_count == 0
    assert e.sample_unstable_symbols == []
    # DT_NEEDED alone does not make it unstable (as in real stable-ABI wheels).
    assert "libc10.so" in e.needed and "libtorch.so" in e.needed
    assert e.cuda_majors == [13]


@pytest.mark.parametrize("key", ["none_cpp", "none_c"])
def test_none_elf(sos, key) -> None:
    e = classify_elf(sos[key])
    assert e.abi_class == "none"
    assert (e.stable_symbol_count, e.unstable_symbol_count) == (0, 0)
    assert e.torch_needed == []
    assert e.error is None


def test_classify_elf_from_bytes(sos) -> None:
    data = sos["unstable"].read_bytes()
    e = classify_elf(data, path_in_wheel="pkg/_C.so")
    assert e.path_in_wheel == "pkg/_C.so"
    assert e == classify_elf(sos["unstable"], path_in_wheel="pkg/_C.so")
    assert classify_elf(data).path_in_wheel == "<bytes>"


def test_fatbin_archs(sos) -> None:
    e = classify_elf(sos["fatbin"])
    assert e.cubin_archs == ["9.0", "10.0"]
    assert e.ptx_archs == ["9.0"]
    assert classify_elf(sos["stable"]).cubin_archs == []


def test_corrupt_elf_is_reported_not_raised() -> None:
    bogus = b"\x7fELF" + b"\x02\x01\x01" + b"\xff" * 200
    e = classify_elf(bogus, path_in_wheel="pkg/broken.so")
    assert e.abi_class == "none"
    assert e.error


# --------------------------------------------------------------------------- #
# Wheels
# --------------------------------------------------------------------------- #
def test_unstable_wheel(sos, make_wheel) -> None:
    whl = make_wheel(
        "fancy-ext",
        "0.4.1+cu130torch2.13",
        {"fancy_ext/__init__.py": b"", "fancy_ext/_C.so": sos["unstable"]},
        requires=["torch==2.13.*", "numpy>=1.26"],
    )
    w = classify_wheel(whl)
    assert isinstance(w, WheelAbi)
    assert w.filename == whl.name
    assert (w.name, w.version) == ("fancy-ext", "0.4.1+cu130torch2.13")
    assert w.local_label == "cu130torch2.13"
    assert w.abi_class == "unstable"
    assert w.declared_torch == "==2.13.*"
    assert (w.python_tag, w.abi_tag, w.platform_tag) == ("cp312", "cp312", "linux_x86_64")
    assert [e.path_in_wheel for e in w.elf_files] == ["fancy_ext/_C.so"]
    assert w.elf_files[0].sample_unstable_symbols
    assert provenance_mismatches(w, {"torch": "2.13.0", "cuda": "13.0"}) == []


def test_stable_abi3_wheel(sos, make_wheel) -> None:
    whl = make_wheel(
        "mla-kernels",
        "1.0.0",
        {"mla/cuda.abi3.so": sos["stable"], "mla/__init__.py": b"from . import cuda\n"},
        requires=["torch>=2.13"],
        tag="cp39-abi3-manylinux_2_28_x86_64",
    )
    w = classify_wheel(whl)
    assert w.abi_class == "stable"
    assert (w.python_tag, w.abi_tag) == ("cp39", "abi3")
    assert w.local_label is None
    assert w.declared_torch == ">=2.13"
    assert w.elf_files[0].stable_symbol_count == 3
    assert provenance_mismatches(w, {"torch": "2.13.0", "cuda": "13.0"}) == []


def test_none_and_pure_wheels(sos, make_wheel) -> None:
    compiled = classify_wheel(make_wheel("mathy", "2.0", {"mathy/_m.so": sos["none_cpp"], "mathy/_c.so": sos["none_c"]}))
    assert compiled.abi_class == "none"
    assert compiled.declared_torch is None
    assert len(compiled.elf_files) == 2 and compiled.is_compiled

    pure = classify_wheel(make_wheel("puremod", "1.0", {"puremod/__init__.py": b"x = 1\n"}, tag="py3-none-any"))
    assert pure.abi_class == "none"
    assert pure.elf_files == [] and not pure.is_compiled
    assert (pure.python_tag, pure.abi_tag, pure.platform_tag) == ("py3", "none", "any")


def test_wheel_takes_the_strongest_tie(sos, make_wheel) -> None:
    whl = make_wheel(
        "mixed",
        "1.0",
        {"mixed/a.abi3.so": sos["stable"], "mixed/b.so": sos["unstable"], "mixed/c.so": sos["none_c"]},
    )
    w = classify_wheel(whl)
    assert w.abi_class == "unstable"
    assert [(e.path_in_wheel, e.abi_class) for e in w.elf_files] == [
        ("mixed/a.abi3.so", "stable"),
        ("mixed/b.so", "unstable"),
        ("mixed/c.so", "none"),
    ]


def test_elf_members_found_by_magic_not_name(sos, make_wheel) -> None:
    linker_script = b"/* GNU ld script */\nGROUP ( libfoo.so.1 )\n" + b" " * 64
    whl = make_wheel(
        "oddnames",
        "1.0",
        {
            "oddnames/bin/helper": sos["unstable"],  # ELF without a .so name
            "oddnames/libfoo.so": linker_script,  # .so name, not ELF
            "oddnames/libbar.so.1": sos["stable"],
        },
    )
    w = classify_wheel(whl)
    assert sorted(e.path_in_wheel for e in w.elf_files) == ["oddnames/bin/helper", "oddnames/libbar.so.1"]
    assert w.abi_class == "unstable"


def test_torch_requirement_behind_an_extra_is_not_declared(sos, make_wheel) -> None:
    whl = make_wheel(
        "optional-torch",
        "1.0",
        {"ot/x.so": sos["none_c"]},
        requires=['torch>=2.0; extra == "torch"', "numpy"],
    )
    assert classify_wheel(whl).declared_torch is None
    whl2 = make_wheel("bare-torch", "1.0", {"bt/x.so": sos["none_c"]}, requires=["torch"])
    assert classify_wheel(whl2).declared_torch == ""


def test_large_members_spool_to_disk(sos, make_wheel, monkeypatch) -> None:
    whl = make_wheel("big", "1.0", {"big/_C.so": sos["unstable"]})
    in_memory = classify_wheel(whl)
    monkeypatch.setattr(elf, "SPOOL_MAX_BYTES", 1024)  # every member goes to a temp file
    assert classify_wheel(whl) == in_memory


# --------------------------------------------------------------------------- #
# Provenance
# --------------------------------------------------------------------------- #
def test_provenance_agrees(sos, make_wheel) -> None:
    whl = make_wheel(
        "kern",
        "1.0+cu130torch2.13",
        {"kern/_C.so": sos["unstable"], "kern/_k.so": sos["fatbin"]},
        requires=["torch==2.13.0"],
    )
    assert provenance_mismatches(classify_wheel(whl), PROVENANCE) == []
    # partial manifests compare only what they declare
    assert provenance_mismatches(classify_wheel(whl), {}) == []
    assert provenance_mismatches(classify_wheel(whl), {"cuda": "13"}) == []


def test_provenance_torch_label_and_requirement(sos, make_wheel) -> None:
    whl = make_wheel(
        "kern",
        "1.0+cu130torch2.12",
        {"kern/_C.so": sos["unstable"]},
        requires=["torch>=2.14.1"],
    )
    msgs = provenance_mismatches(classify_wheel(whl), {"torch": "2.13.0"})
    assert len(msgs) == 2, msgs
    assert "+cu130torch2.12 says torch 2.12" in msgs[0] and "2.13.0" in msgs[0]
    assert "requires torch>=2.14.1" in msgs[1]


def test_provenance_cuda_label_and_soname(sos, make_wheel) -> None:
    whl = make_wheel("kern", "1.0+cu129", {"kern/_C.so": sos["stable"]})
    msgs = provenance_mismatches(classify_wheel(whl), {"cuda": "12.9"})
    # the label agrees; the libcudart.so.13 it needs does not
    assert msgs == ["kern 1.0+cu129: manifest says CUDA 12.9, but kern/_C.so needs libcudart.so.13 (CUDA 13)"]
    msgs = provenance_mismatches(classify_wheel(whl), {"cuda": "13.0"})
    assert msgs == ["kern 1.0+cu129: manifest says CUDA 13.0, but its version label +cu129 says CUDA 12.9"]


def test_provenance_arch_list(sos, make_wheel) -> None:
    w = classify_wheel(make_wheel("kern", "1.0", {"kern/_k.so": sos["fatbin"]}))
    assert provenance_mismatches(w, {"arch_list": ["9.0a", "sm_100"]}) == []
    msgs = provenance_mismatches(w, {"arch_list": ["9.0", "10.0+PTX", "12.0"]})
    assert msgs == [
        "kern 1.0: manifest lists arch 10.0+PTX, but the wheel has no PTX for it",
        "kern 1.0: manifest lists arch 12.0, but the wheel has no cubin for it (PTX for 9.0 could be JIT-compiled)",
    ]
    msgs = provenance_mismatches(w, {"arch_list": ["9.0"]})
    assert msgs == ["kern 1.0: the wheel has cubins for 10.0, which the manifest's arch list does not name"]


def test_provenance_arch_list_ignores_vendored_libraries(sos, make_wheel) -> None:
    w = classify_wheel(make_wheel("kern", "1.0", {"kern.libs/libthird.ab12cd34.so.1": sos["fatbin"]}))
    assert w.elf_files[0].vendored
    assert w.cubin_archs == []
    assert provenance_mismatches(w, {"arch_list": ["8.0"]}) == []


def test_provenance_torch_declared_but_not_linked(sos, make_wheel) -> None:
    w = classify_wheel(make_wheel("notorch", "1.0", {"nt/_m.so": sos["none_c"]}))
    assert provenance_mismatches(w, {"torch": "2.13.0"}) == [
        "notorch 1.0: manifest says it was built against torch 2.13.0, but none of its 1 ELF files imports a torch symbol"
    ]
    pure = classify_wheel(make_wheel("purelib", "1.0", {"p/__init__.py": b""}, tag="py3-none-any"))
    assert provenance_mismatches(pure, {"torch": "2.13.0"}) == []


def test_fatbin_bytes_layout() -> None:
    """The synthetic fatbin follows the header layout the parser documents."""
    data = fatbin_bytes([(2, 90)])
    magic, ver, hsize, fsize = struct.unpack_from("<IHHQ", data, 0)
    assert (magic, ver, hsize, fsize) == (0xBA55ED50, 1, 16, 80)
    assert struct.unpack_from("<I", data, 16 + 28)[0] == 90
