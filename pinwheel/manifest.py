"""Load and validate wheels_manifest.yaml into a typed Manifest.

Every error names the file, the line and the dotted key, so a bad manifest is
fixed in one look. Nothing here touches the network or the engine.

Loading is bounded whatever the input: only a regular file of at most
MAX_FILE_BYTES is read, strings are at most MAX_STRING_CHARS, nesting at most
MAX_DEPTH levels, and YAML anchors, aliases and tags are refused.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
import string
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

MANIFEST_VERSION = 1
POLICIES = ("fail", "skip", "fallback")
GATE_VARIABLES = ("cuda", "python", "torch")
TAG_FIELDS = ("date", "variant", "cuda", "torch", "python")

# Bounds on what a manifest may be, so that no input can make loading slow or
# large: the file's size, each string's length and how deep the YAML nests.
# Anchors and aliases are refused outright (an alias bomb expands without end).
MAX_FILE_BYTES = 256 * 1024
MAX_STRING_CHARS = 4096
MAX_DEPTH = 32

# Names that end up in image references, ARGs, paths and shell words: keep them
# to characters no shell or Dockerfile gives a meaning to.
_STEP_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,30}$")
_ARG_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
_GLOB = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+*?-]{0,127}\.whl$")
_IMAGE_REF = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")
_REPOSITORY = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*$")
_PLATFORM = re.compile(r"^(manylinux_2_\d+|musllinux_1_\d+)_(x86_64|aarch64)$")
_ABS_PATH = re.compile(r"^/[A-Za-z0-9_./-]{1,200}$")
_GATE_EXPR = re.compile(r"^\s*(?P<var>[a-z]+)\s*(?P<spec>(==|!=|>=|<=|~=|>|<).*)$")
_ARCH = re.compile(r"^\d+\.\d+a?$")
_PACKAGE_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)  # PEP 508
# Characters no manifest text may hold, anywhere in the file: C0 controls but tab,
# newline and carriage return; DEL and the C1 controls (NEL included: YAML would
# break the line there, and editors would not); the Unicode line and paragraph
# separators; surrogates and the two non-characters YAML refuses.
_BAD_RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")
# Unicode categories refused inside a string value: controls, format characters
# (bidi overrides, zero-width joiners), surrogates, line and paragraph separators.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class ManifestError(Exception):
    """A manifest problem, located: file:line: key: message."""

    def __init__(self, path: Path | str, line: int, key: str, message: str):
        self.path, self.line, self.key, self.message = str(path), line, key, message
        shown = _one_line(self.path, 1000)
        where = f"{shown}:{line}" if line > 0 else shown  # line 0: the file as a whole
        super().__init__(f"{where}: {_one_line(key, 200)}: {_one_line(message, 600)}")


def _one_line(text: str, limit: int) -> str:
    """Text fit for one line of a terminal: unprintable characters escaped, long text cut."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                       for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- typed model


@dataclass(frozen=True)
class Gate:
    name: str
    when: str
    variable: str
    specifier: SpecifierSet
    why: str
    line: int

    def holds(self, variant: "Variant") -> bool:
        value = {"cuda": variant.cuda, "python": variant.python, "torch": variant.torch}[self.variable]
        return self.specifier.contains(value, prereleases=True)


@dataclass(frozen=True)
class SharedPin:
    requirement: Requirement
    needed_by: tuple[str, ...]
    why: str
    line: int

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str:
        return pinned_version(self.requirement) or ""


@dataclass(frozen=True)
class Provenance:
    torch: str | None
    cuda: str | None
    arch_list: tuple[str, ...]


@dataclass(frozen=True)
class LocalWheel:
    glob: str
    built_against: Provenance
    if_missing: str
    how_to_provide: str
    line: int


@dataclass(frozen=True)
class Package:
    requirement: Requirement
    no_deps: bool
    why: str | None
    gate: str | None
    local: LocalWheel | None
    fallback: "Package | None"
    line: int

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str | None:
        return pinned_version(self.requirement)


@dataclass(frozen=True)
class WheelSet:
    name: str
    why: str
    gate: str | None
    packages: tuple[Package, ...]
    line: int


@dataclass(frozen=True)
class Variant:
    name: str
    cuda: str
    torch: str
    python: str
    platform: str
    base: str
    tag: str
    torch_index_env: str | None
    line: int

    @property
    def cuda_major(self) -> int:
        return Version(self.cuda).major

    def torch_index_url(self) -> str | None:
        """The extra index torch comes from, read from the variable the manifest names; None if unset."""
        if not self.torch_index_env:
            return None
        return os.environ.get(self.torch_index_env, "").strip() or None

    def torch_index_unset(self) -> str:
        return f"torch for variant {self.name} comes from the index in ${self.torch_index_env}, which is not set"


@dataclass(frozen=True)
class ImageSpec:
    name: str
    repository: str
    title: str
    venv: str


@dataclass(frozen=True)
class Manifest:
    path: Path
    sha256: str
    image: ImageSpec
    shared_pins: tuple[SharedPin, ...]
    gates: dict[str, Gate]
    variants: dict[str, Variant]
    wheel_sets: tuple[WheelSet, ...]

    def variant(self, name: str) -> Variant:
        if name not in self.variants:
            known = ", ".join(self.variants)
            raise ManifestError(self.path, 0, "variants", f"no variant {name!r} (known: {known})")
        return self.variants[name]

    def packages(self) -> list[tuple[WheelSet, Package]]:
        return [(ws, p) for ws in self.wheel_sets for p in ws.packages]


def pinned_version(req: Requirement) -> str | None:
    """The version an exact `==` pin names, else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


# ------------------------------------------------------- YAML with positions


class _Node:
    """A YAML mapping or sequence that remembers where each entry stands."""

    def __init__(self, value: Any, line: int, lines: dict[Any, int]):
        self.value, self.line, self.lines = value, line, lines
        self.key_line = line  # the line of the key that holds it, where there is one


class _Scalar:
    def __init__(self, value: Any, line: int):
        self.value, self.line = value, line
        self.key_line = line


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: same events, faster
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_CONSTRUCT = {
    "tag:yaml.org,2002:null": _CONSTRUCTOR.construct_yaml_null,
    "tag:yaml.org,2002:bool": _CONSTRUCTOR.construct_yaml_bool,
    "tag:yaml.org,2002:int": _CONSTRUCTOR.construct_yaml_int,
    "tag:yaml.org,2002:float": _CONSTRUCTOR.construct_yaml_float,
    "tag:yaml.org,2002:timestamp": _CONSTRUCTOR.construct_yaml_timestamp,
}


class _Frame:
    """A mapping or sequence being composed, with its dotted key."""

    __slots__ = ("node", "key", "pending", "pending_line")

    def __init__(self, node: _Node, key: str):
        self.node, self.key = node, key
        self.pending: str | None = None  # a mapping's key whose value comes next
        self.pending_line = 0

    def child_key(self) -> str:
        if isinstance(self.node.value, list):
            return f"{self.key}[{len(self.node.value)}]"
        return self.key if self.pending is None else _join(self.key, self.pending)


def _compose(text: str, path: Path) -> Any:
    """Compose the YAML event stream into _Node/_Scalar trees, iteratively and within bounds.

    Working on events (not yaml.compose) keeps deep nesting from recursing and lets
    anchors, aliases, tags, over-long strings and over-deep nesting be refused before
    anything is built from them."""
    _check_text(text, path)
    stack: list[_Frame] = []
    root: Any = None
    documents = 0

    def fail(line: int, key: str, message: str) -> ManifestError:
        return ManifestError(path, line, key, message)

    def attach(child: Any) -> None:
        nonlocal root
        if not stack:
            root = child
            return
        top = stack[-1]
        node = top.node
        if isinstance(node.value, list):
            node.lines[len(node.value)] = child.line
            node.value.append(child)
        else:
            k = top.pending
            assert k is not None
            child.key_line = top.pending_line
            node.value[k] = child
            node.lines[k] = top.pending_line
            top.pending = None

    try:
        for event in yaml.parse(text, Loader=_LOADER):
            if isinstance(event, (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent)):
                continue
            line = event.start_mark.line + 1
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise fail(line, "(top)", "only one YAML document is allowed (remove the second '---')")
                continue
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                attach(stack.pop().node)
                continue
            top = stack[-1] if stack else None
            is_key = top is not None and isinstance(top.node.value, dict) and top.pending is None
            key = "(top)" if top is None else (top.key if is_key else top.child_key())
            if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
                raise fail(line, key, "anchors and aliases are not allowed")
            if event.tag is not None:
                raise fail(line, key, f"YAML tags are not allowed (found {event.tag!r}); quote the value instead")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if is_key:
                    raise fail(line, key, "keys must be plain strings")
                if len(stack) >= MAX_DEPTH:
                    raise fail(line, key, f"nested deeper than {MAX_DEPTH} levels")
                value: Any = {} if isinstance(event, yaml.MappingStartEvent) else []
                stack.append(_Frame(_Node(value, line, {}), key))
                continue
            # a scalar
            raw = event.value
            if len(raw) > MAX_STRING_CHARS:
                raise fail(line, key, f"a value of {len(raw)} characters; the limit is {MAX_STRING_CHARS}")
            if is_key:
                assert top is not None
                if any(unicodedata.category(c) in _BAD_CATEGORIES for c in raw):
                    raise fail(line, key, f"key {_show(raw)} holds a control character; keys must be plain strings")
                if raw in top.node.value:
                    raise fail(line, _join(top.key, raw), f"duplicate key (first on line {top.node.lines[raw]})")
                top.pending, top.pending_line = raw, line
                continue
            attach(_Scalar(_scalar_value(event, path, line, key), line))
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, path) from None
    if root is None:
        raise ManifestError(path, 1, "(top)", "the manifest is empty")
    return root


def _scalar_value(event: yaml.ScalarEvent, path: Path, line: int, key: str) -> Any:
    tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
    construct = _CONSTRUCT.get(tag)
    if construct is None:  # a string (or a YAML 1.1 oddity like '=' or '<<': keep the text)
        return event.value
    try:
        return construct(yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark))
    except (ValueError, OverflowError, yaml.YAMLError):
        kind = tag.rsplit(":", 1)[-1]
        raise ManifestError(path, line, key, f"{_show(event.value)} reads as a {kind} but is not a valid one; "
                                             "quote it if it is text") from None


def _check_text(text: str, path: Path) -> None:
    if len(text) > MAX_FILE_BYTES:
        raise ManifestError(path, 0, "(file)", f"{len(text)} characters; a manifest may be at most {_size(MAX_FILE_BYTES)}")
    bad = _BAD_RAW.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise ManifestError(path, line, "(file)", f"control character U+{ord(bad.group()):04X} is not allowed")


def _yaml_error(exc: yaml.YAMLError, text: str, path: Path) -> ManifestError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = " ".join((getattr(exc, "problem", None) or str(exc)).split())
    if mark and "cannot start any token" in problem:
        lines = text.splitlines()
        if mark.line < len(lines) and "\t" in lines[mark.line][: mark.column + 1]:
            problem += " (a tab: YAML indents with spaces only)"
    if mark is None:
        return ManifestError(path, 0, "(file)", f"not valid YAML: {problem}")
    return ManifestError(path, mark.line + 1, "(yaml)", f"not valid YAML: {problem}")


def _show(value: str, limit: int = 60) -> str:
    """A value quoted for a message, cut if long."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def _join(prefix: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return key if prefix == "(top)" else f"{prefix}.{key}"


class _Reader:
    """Walks the composed tree with typed getters that raise located errors."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, line: int, key: str, message: str) -> ManifestError:
        return ManifestError(self.path, line, key, message)

    def mapping(self, node: Any, key: str, allowed: set[str], required: set[str] = frozenset()) -> _Node:
        if not isinstance(node, _Node) or not isinstance(node.value, dict):
            raise self.fail(node.line, key, f"must be a mapping, got {_kind(node)}")
        for k in node.value:
            if k not in allowed:
                hint = _closest(k, allowed)
                raise self.fail(node.lines[k], _join(key, k), f"unknown key{hint}; allowed: {', '.join(sorted(allowed))}")
        for k in sorted(required):
            if k not in node.value:
                raise self.fail(node.key_line, _join(key, k), "required key is missing")
        return node

    def sequence(self, node: Any, key: str, min_items: int = 0) -> list[Any]:
        if not isinstance(node, _Node) or not isinstance(node.value, list):
            raise self.fail(node.line, key, f"must be a list, got {_kind(node)}")
        if len(node.value) < min_items:
            raise self.fail(node.line, key, f"needs at least {min_items} item(s)")
        return node.value

    def string(self, node: Any, key: str, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        if not isinstance(node, _Scalar) or not isinstance(node.value, str):
            # Numbers like 13.0 would silently become floats: insist on quotes.
            raise self.fail(node.line, key, f"must be a string, got {_kind(node)} (quote it)")
        value = node.value
        if not value.strip():
            raise self.fail(node.line, key, "must not be empty")
        if "\n" in value or "\r" in value:
            raise self.fail(node.line, key, "must be a single line")
        bad = next((c for c in value if unicodedata.category(c) in _BAD_CATEGORIES), None)
        if bad is not None:
            raise self.fail(node.line, key, f"holds the control character U+{ord(bad):04X}; only printable text is allowed")
        if pattern and not pattern.match(value):
            raise self.fail(node.line, key, f"{_show(value)} is not a valid {what or 'value'}")
        return value

    def boolean(self, node: Any, key: str) -> bool:
        if not isinstance(node, _Scalar) or not isinstance(node.value, bool):
            raise self.fail(node.line, key, f"must be true or false, got {_kind(node)}")
        return node.value

    def requirement(self, node: Any, key: str) -> Requirement:
        text = self.string(node, key)
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "unparsable"
            raise self.fail(node.line, key, f"not a PEP 508 requirement: {reason}") from None
        if req.url:
            raise self.fail(node.line, key, "direct URL requirements are not allowed; use a local wheel")
        if req.marker is not None:
            raise self.fail(node.line, key, "environment markers are not allowed here; use a gate")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", req.name):
            raise self.fail(node.line, key, f"unsafe package name {req.name!r}")
        if pinned_version(req) is None:
            raise self.fail(node.line, key, f"{text!r} must be an exact pin (name==version)")
        try:
            Version(pinned_version(req) or "")
        except InvalidVersion:
            raise self.fail(node.line, key, f"{text!r} pins an invalid PEP 440 version") from None
        return req

    def version(self, node: Any, key: str) -> str:
        text = self.string(node, key)
        try:
            Version(text)
        except InvalidVersion:
            raise self.fail(node.line, key, f"{text!r} is not a PEP 440 version") from None
        return text


def _kind(node: Any) -> str:
    if isinstance(node, _Node):
        return "a mapping" if isinstance(node.value, dict) else "a list"
    value = getattr(node, "value", None)
    return "nothing" if value is None else type(value).__name__


def _closest(key: str, allowed: set[str]) -> str:
    import difflib

    match = difflib.get_close_matches(key, sorted(allowed), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


# ------------------------------------------------------------------ loading


def load(path: Path | str) -> Manifest:
    """Read and validate the manifest at path (taken as given: relative stays relative)."""
    path = Path(path)
    data = _read(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ManifestError(path, line, "(file)", f"not UTF-8: {exc.reason} (byte 0x{data[exc.start]:02x})") from None
    return parse(text, path, sha256=hashlib.sha256(data).hexdigest())


def _read(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES; anything else is a located error.

    A FIFO would block and a device like /dev/zero never ends, so only regular files
    are opened (checked before opening, and again on the open descriptor), and never
    more than the limit plus one byte is read."""
    def fail(message: str) -> ManifestError:
        return ManifestError(path, 0, "(file)", message)

    def check(st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise fail("is a directory, not a manifest file")
        if not stat.S_ISREG(st.st_mode):
            raise fail(f"is a {_file_kind(st.st_mode)}, not a regular file; pinwheel reads manifests from files only")
        if st.st_size > MAX_FILE_BYTES:
            raise fail(f"{st.st_size} bytes; a manifest may be at most {_size(MAX_FILE_BYTES)}")

    try:
        check(os.stat(path))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    try:
        check(os.fstat(fd))  # the file opened is the file checked
        chunks, total = [], 0
        while total <= MAX_FILE_BYTES:
            chunk = os.read(fd, min(1 << 16, MAX_FILE_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > MAX_FILE_BYTES:
        raise fail(f"more than {_size(MAX_FILE_BYTES)}; a manifest may be at most that")
    return b"".join(chunks)


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


def parse(text: str, path: Path | str = "wheels_manifest.yaml", sha256: str | None = None) -> Manifest:
    path = Path(path)
    r = _Reader(path)
    root = r.mapping(
        _compose(text, path),
        "(top)",
        {"manifest_version", "image", "shared_pins", "gates", "variants", "wheel_sets"},
        {"manifest_version", "image", "variants", "wheel_sets"},
    )
    top = root.value
    mv = top["manifest_version"]
    if not isinstance(mv, _Scalar) or mv.value != MANIFEST_VERSION or isinstance(mv.value, bool):
        raise r.fail(mv.line, "manifest_version", f"must be {MANIFEST_VERSION}")

    image = _image(r, top["image"])
    gates = _gates(r, top.get("gates"))
    variants = _variants(r, top["variants"])
    shared = _shared_pins(r, top.get("shared_pins"))
    wheel_sets = _wheel_sets(r, top["wheel_sets"], gates)
    _check_pins_agree(r, shared, wheel_sets)
    return Manifest(
        path=path,
        sha256=sha256 or hashlib.sha256(text.encode()).hexdigest(),
        image=image,
        shared_pins=shared,
        gates=gates,
        variants=variants,
        wheel_sets=wheel_sets,
    )


def _image(r: _Reader, node: Any) -> ImageSpec:
    m = r.mapping(node, "image", {"name", "repository", "title", "venv"}, {"name", "repository"}).value
    return ImageSpec(
        name=r.string(m["name"], "image.name", _STEP_NAME, "image name (lowercase letters, digits, '-')"),
        repository=r.string(m["repository"], "image.repository", _REPOSITORY, "image repository"),
        title=r.string(m["title"], "image.title") if "title" in m else "",
        venv=r.string(m["venv"], "image.venv", _ABS_PATH, "absolute path") if "venv" in m else "/opt/venv",
    )


def _gates(r: _Reader, node: Any) -> dict[str, Gate]:
    if node is None:
        return {}
    if not isinstance(node, _Node) or not isinstance(node.value, dict):
        raise r.fail(node.line, "gates", f"must be a mapping, got {_kind(node)}")
    m = node
    gates: dict[str, Gate] = {}
    for name, g in m.value.items():
        key = f"gates.{name}"
        if not _ARG_NAME.match(name):
            raise r.fail(m.lines[name], key, "gate names are Dockerfile ARG names: UPPER_CASE letters, digits, '_'")
        gm = r.mapping(g, key, {"when", "why"}, {"when", "why"}).value
        when = r.string(gm["when"], f"{key}.when")
        match = _GATE_EXPR.match(when)
        if not match or match["var"] not in GATE_VARIABLES:
            raise r.fail(gm["when"].line, f"{key}.when",
                         f"{when!r} is not a gate expression like 'cuda >= 13' (variables: {', '.join(GATE_VARIABLES)})")
        try:
            spec = SpecifierSet(match["spec"].replace(" ", ""))
        except InvalidSpecifier:
            raise r.fail(gm["when"].line, f"{key}.when", f"{match['spec'].strip()!r} is not a PEP 440 specifier") from None
        gates[name] = Gate(name, when, match["var"], spec, r.string(gm["why"], f"{key}.why"), m.lines[name])
    return gates


def _variants(r: _Reader, node: Any) -> dict[str, Variant]:
    if not isinstance(node, _Node) or not isinstance(node.value, dict):
        raise r.fail(node.line, "variants", f"must be a mapping, got {_kind(node)}")
    if not node.value:
        raise r.fail(node.line, "variants", "needs at least one variant")
    allowed = {"cuda", "torch", "python", "platform", "base", "tag", "torch_index_env"}
    out: dict[str, Variant] = {}
    for name, v in node.value.items():
        key = f"variants.{name}"
        if not _VARIANT_NAME.match(name):
            raise r.fail(node.lines[name], key, "variant names are lowercase letters, digits, '-' and '_'")
        m = r.mapping(v, key, allowed, allowed - {"torch_index_env"}).value
        python = r.version(m["python"], f"{key}.python")
        if len(Version(python).release) != 2:
            raise r.fail(m["python"].line, f"{key}.python", f"{python!r} must be MAJOR.MINOR, e.g. '3.12'")
        tag = r.string(m["tag"], f"{key}.tag")
        _check_tag(r, tag, m["tag"].line, f"{key}.tag")
        out[name] = Variant(
            name=name,
            cuda=r.version(m["cuda"], f"{key}.cuda"),
            torch=r.version(m["torch"], f"{key}.torch"),
            python=python,
            platform=r.string(m["platform"], f"{key}.platform", _PLATFORM, "wheel platform like manylinux_2_28_x86_64"),
            base=r.string(m["base"], f"{key}.base", _IMAGE_REF, "image reference"),
            tag=tag,
            torch_index_env=(r.string(m["torch_index_env"], f"{key}.torch_index_env", _ENV_NAME, "environment variable name")
                             if "torch_index_env" in m else None),
            line=node.lines[name],
        )
    return out


def _check_tag(r: _Reader, tag: str, line: int, key: str) -> None:
    try:
        parts = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(tag) if f is not None]
    except ValueError as exc:
        raise r.fail(line, key, f"bad tag pattern: {exc}") from None
    for f, spec, conv in parts:
        if f not in TAG_FIELDS:
            raise r.fail(line, key, f"unknown placeholder {{{f if len(f) <= 40 else f[:37] + '...'}}}; "
                                    f"known: {', '.join('{' + t + '}' for t in TAG_FIELDS)}")
        if spec or conv:
            raise r.fail(line, key, f"placeholder {{{f}}} takes no format spec or conversion")
    sample = tag.format(**{f: "x" for f in TAG_FIELDS})
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", sample):
        raise r.fail(line, key, f"{tag!r} does not make a valid image tag (letters, digits, '_', '.', '-')")


def _shared_pins(r: _Reader, node: Any) -> tuple[SharedPin, ...]:
    if node is None:
        return ()
    pins: list[SharedPin] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(r.sequence(node, "shared_pins")):
        key = f"shared_pins[{i}]"
        m = r.mapping(item, key, {"requirement", "needed_by", "why"}, {"requirement", "needed_by", "why"}).value
        req = r.requirement(m["requirement"], f"{key}.requirement")
        needed = _needed_by(r, m["needed_by"], f"{key}.needed_by")
        name = canonicalize_name(req.name)
        if name in seen:
            raise r.fail(item.line, f"{key}.requirement", f"{name} is already a shared pin (line {seen[name]})")
        seen[name] = item.line
        pins.append(SharedPin(req, needed, r.string(m["why"], f"{key}.why"), item.line))
    return tuple(pins)


def _needed_by(r: _Reader, node: Any, key: str) -> tuple[str, ...]:
    names: list[str] = []
    seen: dict[str, int] = {}
    for j, n in enumerate(r.sequence(node, key, 1)):
        name = r.string(n, f"{key}[{j}]")
        if not _PACKAGE_NAME.fullmatch(name):
            raise r.fail(n.line, f"{key}[{j}]", f"{_show(name)} is not a package name "
                                               "(PEP 508: letters, digits, '.', '_', '-')")
        canonical = canonicalize_name(name)
        if canonical in seen:
            raise r.fail(n.line, f"{key}[{j}]", f"{name} is listed twice (first as item {seen[canonical]})")
        seen[canonical] = j
        names.append(name)
    return tuple(names)


def _wheel_sets(r: _Reader, node: Any, gates: dict[str, Gate]) -> tuple[WheelSet, ...]:
    sets: list[WheelSet] = []
    names: dict[str, int] = {}
    packages: dict[str, tuple[str, int]] = {}
    for i, item in enumerate(r.sequence(node, "wheel_sets", 1)):
        key = f"wheel_sets[{i}]"
        m = r.mapping(item, key, {"name", "why", "gate", "packages"}, {"name", "why", "packages"}).value
        name = r.string(m["name"], f"{key}.name", _STEP_NAME, "step name (lowercase letters, digits, '-')")
        if name in names:
            raise r.fail(m["name"].line, f"{key}.name", f"duplicate wheel set name (first on line {names[name]})")
        names[name] = m["name"].line
        gate = _gate_ref(r, m.get("gate"), f"{key}.gate", gates)
        pkgs = []
        for j, p in enumerate(r.sequence(m["packages"], f"{key}.packages", 1)):
            pkg = _package(r, p, f"{key}.packages[{j}]", gates, allow_local=True)
            for candidate in (pkg, pkg.fallback):
                if candidate is None:
                    continue
                first = packages.get(candidate.name)
                if first and first[0] != str(candidate.requirement.specifier):
                    raise r.fail(candidate.line, f"{key}.packages[{j}].requirement",
                                 f"{candidate.name} is pinned twice with different versions "
                                 f"({first[0]} on line {first[1]}, {candidate.requirement.specifier} here)")
                if first:
                    raise r.fail(candidate.line, f"{key}.packages[{j}].requirement",
                                 f"{candidate.name} is listed twice (first on line {first[1]})")
                packages[candidate.name] = (str(candidate.requirement.specifier), candidate.line)
            pkgs.append(pkg)
        sets.append(WheelSet(name, r.string(m["why"], f"{key}.why"), gate, tuple(pkgs), item.line))
    return tuple(sets)


def _gate_ref(r: _Reader, node: Any, key: str, gates: dict[str, Gate]) -> str | None:
    if node is None:
        return None
    name = r.string(node, key)
    if name not in gates:
        known = ", ".join(gates) or "none declared"
        raise r.fail(node.line, key, f"unknown gate {name!r} (gates: {known})")
    return name


def _package(r: _Reader, node: Any, key: str, gates: dict[str, Gate], allow_local: bool) -> Package:
    allowed = {"requirement", "no_deps", "why", "gate"} | ({"local", "fallback"} if allow_local else set())
    m = r.mapping(node, key, allowed, {"requirement"}).value
    req = r.requirement(m["requirement"], f"{key}.requirement")
    no_deps = r.boolean(m["no_deps"], f"{key}.no_deps") if "no_deps" in m else False
    why = r.string(m["why"], f"{key}.why") if "why" in m else None
    if no_deps and not why:
        raise r.fail(node.line, f"{key}.why", "every no_deps install must say why")
    local = _local(r, m["local"], f"{key}.local") if "local" in m else None
    if local and not why:
        raise r.fail(node.line, f"{key}.why", "every local wheel must say why")
    fallback = None
    if "fallback" in m:
        if not local:
            raise r.fail(m["fallback"].key_line, f"{key}.fallback", "a fallback needs a local wheel to fall back from")
        fallback = _package(r, m["fallback"], f"{key}.fallback", gates, allow_local=False)
        if fallback.gate:
            raise r.fail(m["fallback"].value["gate"].line, f"{key}.fallback.gate", "a fallback follows its package's gate")
    if local and local.if_missing == "fallback" and not fallback:
        raise r.fail(m["local"].value["if_missing"].line, f"{key}.local.if_missing",
                     "policy 'fallback' needs a 'fallback' package")
    if local and local.if_missing != "fallback" and fallback:
        raise r.fail(m["fallback"].key_line, f"{key}.fallback", f"policy {local.if_missing!r} never uses the fallback")
    if local and not _glob_matches_name(local.glob, req.name):
        raise r.fail(m["local"].value["glob"].line, f"{key}.local.glob",
                     f"{local.glob!r} cannot match wheels of {req.name} (wheel names start with the normalized name)")
    return Package(req, no_deps, why, _gate_ref(r, m.get("gate"), f"{key}.gate", gates), local, fallback, node.line)


def _glob_matches_name(glob: str, name: str) -> bool:
    import fnmatch

    wheel_name = re.sub(r"[-_.]+", "_", name).lower()
    return fnmatch.fnmatchcase(f"{wheel_name}-1.0-py3-none-any.whl", glob.lower()) or \
        glob.lower().startswith(f"{wheel_name}-")


def _local(r: _Reader, node: Any, key: str) -> LocalWheel:
    m = r.mapping(node, key, {"glob", "built_against", "if_missing", "how_to_provide"}, {"glob", "if_missing"}).value
    glob = r.string(m["glob"], f"{key}.glob")
    if "/" in glob or ".." in glob or not _GLOB.match(glob):
        raise r.fail(m["glob"].line, f"{key}.glob",
                     f"{glob!r} is not a safe wheel glob: a file name in wheels/ ending in .whl, "
                     "made of letters, digits, '_', '.', '+', '-', '*', '?'")
    policy = r.string(m["if_missing"], f"{key}.if_missing")
    if policy not in POLICIES:
        raise r.fail(m["if_missing"].line, f"{key}.if_missing", f"{policy!r} is not one of: {', '.join(POLICIES)}")
    prov = Provenance(None, None, ())
    if "built_against" in m:
        b = r.mapping(m["built_against"], f"{key}.built_against", {"torch", "cuda", "arch_list"}).value
        arch = ()
        if "arch_list" in b:
            arch = tuple(r.string(a, f"{key}.built_against.arch_list[{i}]", _ARCH, "CUDA arch like '9.0'")
                         for i, a in enumerate(r.sequence(b["arch_list"], f"{key}.built_against.arch_list", 1)))
        prov = Provenance(
            torch=r.version(b["torch"], f"{key}.built_against.torch") if "torch" in b else None,
            cuda=r.version(b["cuda"], f"{key}.built_against.cuda") if "cuda" in b else None,
            arch_list=arch,
        )
    how = r.string(m["how_to_provide"], f"{key}.how_to_provide") if "how_to_provide" in m else \
        f"copy a wheel matching {glob} into wheels/"
    return LocalWheel(glob, prov, policy, how, node.line)


def _check_pins_agree(r: _Reader, shared: tuple[SharedPin, ...], sets: tuple[WheelSet, ...]) -> None:
    """A package that is also a shared pin must carry the shared pin's version."""
    by_name = {p.name: p for p in shared}
    for i, ws in enumerate(sets):
        for j, pkg in enumerate(ws.packages):
            pin = by_name.get(pkg.name)
            if pin and pin.version != pkg.version:
                raise r.fail(pkg.line, f"wheel_sets[{i}].packages[{j}].requirement",
                             f"pins {pkg.name}=={pkg.version} but the shared pin (line {pin.line}) is =={pin.version}")
