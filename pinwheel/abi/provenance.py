"""What a wheel says about its own build, against what the manifest declares.

``parse_local_label`` reads the CUDA and torch versions out of a local version
label (``+cu130torch2.13``); ``provenance_mismatches`` compares a manifest's
``built_against`` (torch, CUDA, arch list) with the evidence a classified wheel
carries: its label, its torch requirement, the CUDA sonames it needs and the
cubins in its own fatbins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from .elf import CUDA_SONAME_RE, WheelAbi, arch_key, arch_str

__all__ = ["LocalLabel", "parse_local_label", "provenance_mismatches"]


@dataclass(frozen=True)
class LocalLabel:
    """What a local version label says about the build (``+cu130torch2.13``)."""

    cuda: str | None  # "13.0", or "13" for a bare "cu13"
    torch: str | None  # "2.13"


_CUDA_LABEL_RE = re.compile(r"(?:^|[^a-z])cu(?:da)?(\d+(?:\.\d+)?)")
_TORCH_LABEL_RE = re.compile(r"torch(\d+(?:\.\d+){0,2})")
_PT_LABEL_RE = re.compile(r"(?:^|[^a-z])pt(\d+(?:\.\d+)*)")


def _cuda_from_digits(d: str) -> str:
    if "." in d:
        return d
    if len(d) == 2:  # cu12 -> "12"; cu92 -> "9.2"
        return d if d[0] == "1" else f"{d[0]}.{d[1]}"
    if len(d) == 3:  # cu130 -> 13.0, cu118 -> 11.8
        return f"{d[:2]}.{d[2]}"
    if len(d) == 4:
        return f"{d[:2]}.{int(d[2:])}"
    return d


def parse_local_label(label: str | None) -> LocalLabel:
    """Read the CUDA and torch versions out of a local version label.

    Understands ``cu130``, ``cu12``, ``cuda13.0``, ``torch2.13``, ``pt213`` and
    their combinations (``cu130torch2.13``, ``cu12torch2.3cxx11abitrue``).
    """
    if not label:
        return LocalLabel(None, None)
    low = label.lower()
    cuda = None
    if m := _CUDA_LABEL_RE.search(low):
        cuda = _cuda_from_digits(m.group(1))
    torch = None
    if m := _TORCH_LABEL_RE.search(low):
        torch = m.group(1)
    elif m := _PT_LABEL_RE.search(low):
        d = m.group(1)
        torch = d if "." in d or len(d) < 2 else f"{d[0]}.{d[1:]}"
    return LocalLabel(cuda, torch)


def _release(v: str) -> tuple[int, ...] | None:
    try:
        return Version(v).release
    except InvalidVersion:
        return None


def _agree(declared: str, shown: str) -> bool:
    """Whether two versions agree on the components both of them name."""
    a, b = _release(declared), _release(shown)
    if a is None or b is None:
        return declared == shown
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _norm_arch(a: object) -> tuple[str, bool] | None:
    """A manifest arch entry as (compute capability, wants PTX)."""
    s = str(a).strip().lower()
    ptx = s.endswith("+ptx")
    s = s.removesuffix("+ptx").removeprefix("sm_").removeprefix("compute_")
    s = s.rstrip("af")
    if re.fullmatch(r"\d+\.\d+", s):
        return s, ptx
    if re.fullmatch(r"\d{2,3}", s):
        return arch_str(int(s)), ptx
    return None


def provenance_mismatches(wheel: WheelAbi, declared: dict) -> list[str]:
    """Compare a manifest's build provenance with what the wheel itself shows.

    ``declared`` may hold ``torch`` ("2.13.0"), ``cuda`` ("13.0") and
    ``arch_list`` (["9.0", "10.0"], TORCH_CUDA_ARCH_LIST spellings such as
    "9.0a" or "10.0+PTX" accepted). Each key is compared only with the
    evidence the wheel has: its local version label, its torch requirement,
    the CUDA sonames it needs and the cubins in its own fatbins (libraries
    that auditwheel vendored under ``<pkg>.libs/`` are not compared with the
    arch list: they were not built by this build). Returns one human
    sentence per disagreement; an empty list means nothing disagreed.
    """
    out: list[str] = []
    who = f"{wheel.name} {wheel.version}"
    label = parse_local_label(wheel.local_label)

    torch = declared.get("torch")
    if torch:
        torch = str(torch)
        if label.torch and not _agree(torch, label.torch):
            out.append(
                f"{who}: manifest says it was built against torch {torch}, "
                f"but its version label +{wheel.local_label} says torch {label.torch}"
            )
        if wheel.declared_torch:
            try:
                spec = SpecifierSet(wheel.declared_torch)
                tv = Version(torch)
            except (InvalidSpecifier, InvalidVersion):
                spec = None
            if spec is not None and not spec.contains(tv, prereleases=True):
                out.append(
                    f"{who}: manifest says it was built against torch {torch}, "
                    f"but the wheel requires torch{wheel.declared_torch}"
                )
        if wheel.is_compiled and wheel.abi_class == "none":
            out.append(
                f"{who}: manifest says it was built against torch {torch}, "
                f"but none of its {len(wheel.elf_files)} ELF files imports a torch symbol"
            )

    cuda = declared.get("cuda")
    if cuda:
        cuda = str(cuda)
        if label.cuda and not _agree(cuda, label.cuda):
            out.append(
                f"{who}: manifest says CUDA {cuda}, "
                f"but its version label +{wheel.local_label} says CUDA {label.cuda}"
            )
        want_major = _release(cuda)
        for elf in wheel.elf_files:
            for major in elf.cuda_majors:
                if want_major and major != want_major[0]:
                    sonames = ", ".join(n for n in elf.needed if CUDA_SONAME_RE.match(n))
                    out.append(
                        f"{who}: manifest says CUDA {cuda}, "
                        f"but {elf.path_in_wheel} needs {sonames} (CUDA {major})"
                    )

    arch_list = declared.get("arch_list")
    cubins, ptxs = wheel.cubin_archs, wheel.ptx_archs
    if arch_list and (cubins or ptxs):
        wanted = [n for a in arch_list if (n := _norm_arch(a)) is not None]
        wanted_ccs = {cc for cc, _ in wanted}
        for cc, want_ptx in wanted:
            if cc not in cubins:
                lower_ptx = [p for p in ptxs if arch_key(p) <= arch_key(cc)]
                hint = f" (PTX for {', '.join(lower_ptx)} could be JIT-compiled)" if lower_ptx else ""
                out.append(f"{who}: manifest lists arch {cc}, but the wheel has no cubin for it{hint}")
            if want_ptx and cc not in ptxs:
                out.append(f"{who}: manifest lists arch {cc}+PTX, but the wheel has no PTX for it")
        extra = [a for a in cubins if a not in wanted_ccs]
        if extra:
            out.append(
                f"{who}: the wheel has cubins for {', '.join(extra)}, "
                f"which the manifest's arch list does not name"
            )
    return out
