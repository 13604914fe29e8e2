"""How a compiled wheel is tied to torch, read from its ELF files.

A wheel that links torch does so in one of two ways:

``unstable``
    It imports C++ symbols of torch's own namespaces (``c10::``, ``at::``,
    ``torch::``, ``caffe2::``), e.g. ``_ZN3c1010TensorImpl17release_resourcesEv``
    or ``_ZNK2at10TensorBase5numelEv``. Those are the unstable C++ ABI: the
    wheel must be rebuilt for every torch minor release, or it fails at import
    with ``undefined symbol``.
``stable``
    It imports only the LibTorch stable C shims (``aoti_torch_*`` and the
    ``torch_*`` C functions) and no unstable symbol. Such a wheel keeps working
    with torch releases newer than the one it was built against.
``none``
    No torch symbol is imported at all.

Only *undefined* dynamic symbols count: they are what the dynamic loader has to
find in torch's libraries at import time. ``DT_NEEDED`` entries are recorded as
evidence (a stable-ABI wheel may still name ``libc10.so`` there without
importing any C++ symbol from it) but they do not decide the class on their own.

Everything is read with pyelftools from the wheel's zip members; nothing is
unpacked to the wheel's directory and no external tool is run.
"""

from __future__ import annotations

import io
import re
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterable, Iterator, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    import zipfile

    from elftools.elf.elffile import ELFFile
# pyelftools is imported where an ELF file is opened: a warm classification cache never opens one.

__all__ = [
    "AbiClass",
    "ElfAbi",
    "FatbinEntry",
    "WheelAbi",
    "classify_elf",
    "classify_symbol",
    "classify_wheel",
]

AbiClass = Literal["unstable", "stable", "none"]

#: How many unstable symbols an :class:`ElfAbi` keeps as evidence.
SAMPLE_SIZE = 5

#: Members larger than this are spooled to a temporary file instead of memory.
SPOOL_MAX_BYTES = 64 * 1024 * 1024

_ELF_MAGIC = b"\x7fELF"

# torch's C++ namespaces, as Itanium <source-name>s (length + identifier).
_TORCH_NAMESPACES = ("c10", "at", "torch", "caffe2")
_TORCH_SOURCE_NAMES = tuple(f"{len(ns)}{ns}" for ns in _TORCH_NAMESPACES)

# A nested name that opens with a torch namespace, anywhere in a mangled name:
# 'N', then CV-qualifiers (r V K) and a ref-qualifier (R O) of a member
# function, then the namespace's source name. This also finds torch types used
# as parameters or template arguments (``_Z3fooRKN2at6TensorE``,
# ``_ZNSt6vectorIN2at6TensorESaIS1_EE...``). It is a pattern, not a demangler:
# an identifier that itself contains e.g. "N2at" would match too.
_TORCH_NESTED_RE = re.compile(r"N[rVK]*[RO]?(?:3c10|2at|5torch|6caffe2)")

# Unmangled globals of libtorch_python (THPVariableClass, THPDtypeType, ...):
# part of the unstable ABI even though they carry no mangling.
_UNSTABLE_C_PREFIXES = ("THP",)

# The LibTorch stable ABI: C shims (torch/csrc/inductor/aoti_torch/c/shim.h and
# torch/csrc/stable/c/shim.h).
_STABLE_C_PREFIXES = ("aoti_torch_", "torch_")

_TORCH_LIB_RE = re.compile(r"^lib(?:torch|c10)(?:[_.\-]|$)")
# Libraries whose soname major equals the CUDA major version.
# auditwheel renames vendored copies to libcudart.<hash>.so.13 / libcudart-<hash>.so.13.
CUDA_SONAME_RE = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink)(?:[.\-][0-9a-f]{8})?\.so\.(\d+)")

_FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_FATBIN_MAGIC = 0xBA55ED50
_FATBIN_KINDS = {1: "ptx", 2: "cubin", 8: "ltoir"}


# --------------------------------------------------------------------------- #
# Result types
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class FatbinEntry:
    """One device image in a ``.nv_fatbin`` section."""

    kind: str  # "cubin", "ptx", "ltoir" or "kind<N>"
    arch: str  # compute capability, "9.0", "10.0", ...


@dataclass
class ElfAbi:
    """The torch tie of one ELF file."""

    path_in_wheel: str
    abi_class: AbiClass
    needed: list[str] = field(default_factory=list)
    sample_unstable_symbols: list[str] = field(default_factory=list)
    stable_symbol_count: int = 0
    unstable_symbol_count: int = 0
    #: compute capabilities of cubins in the ELF's fatbin sections, sorted.
    cubin_archs: list[str] = field(default_factory=list)
    #: virtual architectures of PTX in the fatbin sections, sorted.
    ptx_archs: list[str] = field(default_factory=list)
    #: set when the file looked like ELF but could not be read.
    error: str | None = None

    @property
    def torch_needed(self) -> list[str]:
        """The ``DT_NEEDED`` entries that are torch's own libraries."""
        return [n for n in self.needed if _TORCH_LIB_RE.match(n)]

    @property
    def vendored(self) -> bool:
        """Whether this is a third-party library that auditwheel copied in (``<pkg>.libs/``)."""
        top = self.path_in_wheel.split("/", 1)[0]
        return "/" in self.path_in_wheel and top.endswith(".libs")

    @property
    def cuda_majors(self) -> list[int]:
        """CUDA major versions implied by ``DT_NEEDED`` sonames (libcudart.so.13 -> 13)."""
        found = {int(m.group(1)) for n in self.needed if (m := CUDA_SONAME_RE.match(n))}
        return sorted(found)


@dataclass
class WheelAbi:
    """The torch tie of one wheel: the strongest tie of any of its ELF files."""

    filename: str
    name: str
    version: str
    local_label: str | None
    abi_class: AbiClass
    elf_files: list[ElfAbi]
    #: the torch ``Requires-Dist`` specifier ("" for a bare ``torch``), None if absent.
    declared_torch: str | None
    python_tag: str
    abi_tag: str
    platform_tag: str
    #: written by an example's stand-in generator (its WHEEL file's Generator): says nothing of the real wheel
    stand_in: bool = False

    @property
    def is_compiled(self) -> bool:
        return bool(self.elf_files)

    @property
    def cubin_archs(self) -> list[str]:
        """Cubin architectures of the wheel's own ELF files (vendored libraries left out)."""
        return _sorted_archs({a for e in self.elf_files if not e.vendored for a in e.cubin_archs})

    @property
    def ptx_archs(self) -> list[str]:
        """PTX architectures of the wheel's own ELF files (vendored libraries left out)."""
        return _sorted_archs({a for e in self.elf_files if not e.vendored for a in e.ptx_archs})

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- #
# Symbols
# --------------------------------------------------------------------------- #
def _skip_number(s: str, i: int) -> int:
    if i < len(s) and s[i] == "n":
        i += 1
    while i < len(s) and s[i].isdigit():
        i += 1
    return i


def _skip_call_offset(s: str, i: int) -> int:
    # <call-offset> ::= h <nv-offset> _ | v <v-offset> _
    if i < len(s) and s[i] == "h":
        i = _skip_number(s, i + 1)
        return i + 1 if i < len(s) and s[i] == "_" else i
    if i < len(s) and s[i] == "v":
        i = _skip_number(s, i + 1)
        if i < len(s) and s[i] == "_":
            i = _skip_number(s, i + 1)
        return i + 1 if i < len(s) and s[i] == "_" else i
    return i


def _top_namespace(sym: str) -> str | None:
    """The outermost namespace of the entity a mangled symbol names.

    Handles plain and const/volatile/ref-qualified nested names (``_ZN``,
    ``_ZNK``, ``_ZNKR``), vtables/typeinfo/VTTs (``_ZTV``, ``_ZTI``, ``_ZTS``,
    ``_ZTT``), thunks (``_ZTh``, ``_ZTv``, ``_ZTc``), guard variables and
    reference temporaries (``_ZGV``, ``_ZGR``), TLS wrappers (``_ZTH``,
    ``_ZTW``) and local entities (``_ZZ<encoding>E...``). Returns ``"std"``
    for ``St``, the namespace identifier otherwise, None when the entity is at
    global scope or the form is not recognised.
    """
    if not sym.startswith("_Z"):
        return None
    s, i = sym, 2
    while True:
        two = s[i : i + 2]
        if two in ("TV", "TI", "TS", "TT", "GV", "GR", "TH", "TW"):
            i += 2
        elif two == "Th":
            i = _skip_number(s, i + 2)
            i += 1 if s[i : i + 1] == "_" else 0
        elif two == "Tv":
            i = _skip_call_offset(s, i + 1)
        elif two == "Tc":
            i = _skip_call_offset(s, i + 2)
            i = _skip_call_offset(s, i)
        elif s[i : i + 1] == "Z":  # local entity: Z <function encoding> E ...
            i += 1
        else:
            break
    if s[i : i + 1] != "N":
        return "std" if s[i : i + 2] == "St" else None
    i += 1
    while s[i : i + 1] in ("r", "V", "K"):
        i += 1
    if s[i : i + 1] in ("R", "O"):
        i += 1
    if s[i : i + 2] == "St" or s[i : i + 2] in ("Sa", "Sb", "Ss", "Si", "So", "Sd"):
        return "std"
    m = re.match(r"\d+", s[i:])
    if not m:
        return None
    n = int(m.group(0))
    start = i + len(m.group(0))
    return s[start : start + n]


def classify_symbol(name: str) -> Literal["unstable", "stable"] | None:
    """The torch tie a single imported symbol name shows, or None."""
    if name.startswith("_Z"):
        if _top_namespace(name) in _TORCH_NAMESPACES:
            return "unstable"
        if _TORCH_NESTED_RE.search(name):
            return "unstable"
        return None
    if name.startswith(_STABLE_C_PREFIXES):
        return "stable"
    if name.startswith(_UNSTABLE_C_PREFIXES):
        return "unstable"
    return None


# --------------------------------------------------------------------------- #
# ELF reading
# --------------------------------------------------------------------------- #
def _iter_undefined_dynamic(elf: ELFFile) -> Iterator[str]:
    """Names of undefined symbols in the dynamic symbol table.

    The table is located with pyelftools and unpacked in bulk; walking it
    symbol by symbol through pyelftools is an order of magnitude slower on
    libraries with 10^5 symbols.
    """
    from elftools.elf.dynamic import DynamicSegment

    dynsym = elf.get_section_by_name(".dynsym")
    if dynsym is None:
        for sec in elf.iter_sections():
            if sec["sh_type"] == "SHT_DYNSYM":
                dynsym = sec
                break
    if dynsym is None or dynsym["sh_type"] == "SHT_NOBITS":
        # No section headers: go through PT_DYNAMIC.
        for seg in elf.iter_segments():
            if isinstance(seg, DynamicSegment):
                for sym in seg.iter_symbols():
                    if sym["st_shndx"] == "SHN_UNDEF" and sym.name:
                        yield sym.name
        return
    strtab = elf.get_section(dynsym["sh_link"])
    strdata = strtab.data()
    data = dynsym.data()
    endian = "<" if elf.little_endian else ">"
    if elf.elfclass == 64:
        fmt, name_i, shndx_i = endian + "IBBHQQ", 0, 3
    else:
        fmt, name_i, shndx_i = endian + "IIIBBH", 0, 5
    entsize = struct.calcsize(fmt)
    usable = len(data) - len(data) % entsize
    for entry in struct.iter_unpack(fmt, memoryview(data)[:usable]):
        if entry[shndx_i] != 0 or entry[name_i] == 0:
            continue
        off = entry[name_i]
        end = strdata.find(b"\0", off)
        yield strdata[off : end if end >= 0 else None].decode("utf-8", "replace")


def _iter_symtab_undefined(elf: ELFFile) -> Iterator[str]:
    """Undefined symbols of ``.symtab``: for relocatable objects without ``.dynsym``."""
    symtab = elf.get_section_by_name(".symtab")
    if symtab is None:
        return
    for sym in symtab.iter_symbols():
        if sym["st_shndx"] == "SHN_UNDEF" and sym.name:
            yield sym.name


def _needed(elf: ELFFile) -> list[str]:
    from elftools.elf.dynamic import DynamicSection, DynamicSegment

    for sec in elf.iter_sections():
        if isinstance(sec, DynamicSection):
            return [t.needed for t in sec.iter_tags("DT_NEEDED")]
    for seg in elf.iter_segments():
        if isinstance(seg, DynamicSegment):
            return [t.needed for t in seg.iter_tags("DT_NEEDED")]
    return []


def arch_str(arch: int) -> str:
    return f"{arch // 10}.{arch % 10}"


def arch_key(a: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in a.split("."))
    except ValueError:
        return (1 << 30,)


def _sorted_archs(archs: Iterable[str]) -> list[str]:
    return sorted(set(archs), key=arch_key)


def _fatbin_entries(elf: ELFFile) -> list[FatbinEntry]:
    """Device images listed in the fatbin sections, from their headers only.

    A fatbin section holds one or more containers (magic 0xBA55ED50, u16
    version, u16 header size, u64 payload size); each payload is a run of
    entries whose header starts with u16 kind (1 PTX, 2 cubin), u16, u32 header
    size, u64 payload size, and has the u32 SM number at offset 28. Only these
    headers are read; payloads (possibly compressed) are skipped.
    """
    found: set[FatbinEntry] = set()
    stream = elf.stream
    for name in _FATBIN_SECTIONS:
        sec = elf.get_section_by_name(name)
        if sec is None or sec["sh_type"] == "SHT_NOBITS":
            continue
        base, size = sec["sh_offset"], sec["sh_size"]
        off = 0
        while off + 16 <= size:
            stream.seek(base + off)
            head = stream.read(16)
            if len(head) < 16:
                break
            magic, _ver, hsize, fsize = struct.unpack("<IHHQ", head)
            if magic != _FATBIN_MAGIC:
                off += 8  # containers are 8-aligned; skip padding
                continue
            pos, end = off + hsize, min(off + hsize + fsize, size)
            while pos + 32 <= end:
                stream.seek(base + pos)
                eh = stream.read(32)
                if len(eh) < 32:
                    break
                kind, _u, ehsize, psize = struct.unpack_from("<HHIQ", eh, 0)
                (arch,) = struct.unpack_from("<I", eh, 28)
                if ehsize == 0:
                    break
                found.add(FatbinEntry(_FATBIN_KINDS.get(kind, f"kind{kind}"), arch_str(arch)))
                pos += ehsize + psize
            off = max(end, off + 16)
    return sorted(found, key=lambda e: (e.kind, arch_key(e.arch)))


def _classify_stream(stream: IO[bytes], path_in_wheel: str) -> ElfAbi:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(stream)
        needed = _needed(elf)
        names: Iterable[str]
        if elf.get_section_by_name(".dynsym") is None and elf["e_type"] == "ET_REL":
            names = _iter_symtab_undefined(elf)
        else:
            names = _iter_undefined_dynamic(elf)
        stable = 0
        unstable: list[str] = []
        for sym in names:
            tie = classify_symbol(sym)
            if tie == "unstable":
                unstable.append(sym)
            elif tie == "stable":
                stable += 1
        entries = _fatbin_entries(elf)
    except (ELFError, struct.error, ValueError, OSError, UnicodeError, AttributeError, KeyError) as exc:
        # A damaged member must not sink the report of the whole image.
        return ElfAbi(path_in_wheel, "none", error=f"{type(exc).__name__}: {exc}")
    abi_class: AbiClass = "unstable" if unstable else "stable" if stable else "none"
    return ElfAbi(
        path_in_wheel=path_in_wheel,
        abi_class=abi_class,
        needed=needed,
        sample_unstable_symbols=sorted(set(unstable))[:SAMPLE_SIZE],
        stable_symbol_count=stable,
        unstable_symbol_count=len(unstable),
        cubin_archs=_sorted_archs(e.arch for e in entries if e.kind == "cubin"),
        ptx_archs=_sorted_archs(e.arch for e in entries if e.kind == "ptx"),
    )


def classify_elf(data: bytes | bytearray | Path | str, path_in_wheel: str | None = None) -> ElfAbi:
    """Classify one ELF file, given as its bytes or a path on disk."""
    if isinstance(data, (bytes, bytearray)):
        return _classify_stream(io.BytesIO(data), path_in_wheel or "<bytes>")
    p = Path(data)
    with p.open("rb") as fh:
        return _classify_stream(fh, path_in_wheel or p.name)


# --------------------------------------------------------------------------- #
# Wheels
# --------------------------------------------------------------------------- #
def _iter_elf_members(zf: zipfile.ZipFile) -> Iterator[zipfile.ZipInfo]:
    for info in zf.infolist():
        if info.is_dir() or info.file_size < 64:  # smaller than an ELF header
            continue
        with zf.open(info) as fh:
            if fh.read(4) == _ELF_MAGIC:
                yield info


# The WHEEL Generator of the stand-in wheels an example writes (scripts/standin-wheels) for what its machine
# cannot download: their ABI is not the real wheel's, so no verdict is drawn from it.
STAND_IN_GENERATOR = "pinwheel-standin"


def _generator(zf: zipfile.ZipFile, dist_info: str) -> str | None:
    try:
        text = zf.read(f"{dist_info}/WHEEL").decode("utf-8", "replace")
    except KeyError:
        return None
    return next((line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("Generator:")), None)


def _dist_info_dir(zf: zipfile.ZipFile) -> str | None:
    for n in zf.namelist():
        parts = n.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
            return parts[0]
    return None


def _torch_requirement(requires: list[str]) -> str | None:
    """The specifier of the first ``torch`` requirement that is not behind an extra."""
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        return str(req.specifier)
    return None


def _split_filename(filename: str) -> tuple[str, str, str, str, str]:
    """name, version, python tag, abi tag, platform tag from a wheel filename."""
    stem = filename[: -len(".whl")] if filename.endswith(".whl") else filename
    parts = stem.split("-")
    if len(parts) not in (5, 6):
        raise ValueError(f"not a wheel filename: {filename!r}")
    return parts[0], parts[1], parts[-3], parts[-2], parts[-1]


def classify_wheel(path: Path | str) -> WheelAbi:
    """Classify every ELF member of a wheel and the wheel as a whole.

    ELF members are found by their magic bytes (not by name), streamed out of
    the zip into a spooled temporary file (memory up to ``SPOOL_MAX_BYTES``,
    disk beyond) and read with pyelftools.
    """
    import shutil
    import tempfile
    import zipfile
    from email.parser import HeaderParser

    path = Path(path)
    fn_name, fn_version, python_tag, abi_tag, platform_tag = _split_filename(path.name)
    elf_files: list[ElfAbi] = []
    with zipfile.ZipFile(path) as zf:
        meta_name, meta_version, requires, stand_in = fn_name, fn_version, [], False
        dist_info = _dist_info_dir(zf)
        if dist_info is not None:
            text = zf.read(f"{dist_info}/METADATA").decode("utf-8", "replace")
            msg = HeaderParser().parsestr(text, headersonly=True)
            meta_name = msg.get("Name", fn_name)
            meta_version = msg.get("Version", fn_version)
            requires = msg.get_all("Requires-Dist") or []
            stand_in = _generator(zf, dist_info) == STAND_IN_GENERATOR
        for info in _iter_elf_members(zf):
            with tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX_BYTES) as tmp:
                with zf.open(info) as src:
                    shutil.copyfileobj(src, tmp, 1024 * 1024)
                tmp.seek(0)
                elf_files.append(_classify_stream(tmp, info.filename))  # type: ignore[arg-type]

    classes = {e.abi_class for e in elf_files}
    abi_class: AbiClass = "unstable" if "unstable" in classes else "stable" if "stable" in classes else "none"
    local_label: str | None
    try:
        local_label = Version(meta_version).local
    except InvalidVersion:
        local_label = meta_version.partition("+")[2] or None
    return WheelAbi(
        filename=path.name,
        name=meta_name,
        version=meta_version,
        local_label=local_label,
        abi_class=abi_class,
        elf_files=elf_files,
        declared_torch=_torch_requirement(requires),
        python_tag=python_tag,
        abi_tag=abi_tag,
        platform_tag=platform_tag,
        stand_in=stand_in,
    )
