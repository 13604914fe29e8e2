"""Reading a manifest file, within bounds, into YAML nodes that know their lines.

Loading is bounded whatever the input: only a regular file of at most
MAX_FILE_BYTES is read, strings are at most MAX_STRING_CHARS, nesting at most
MAX_DEPTH levels, and YAML anchors, aliases and tags are refused. Every error
is a ManifestError that names the file, the line and the dotted key.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml

from ..fsutil import UnreadableFile, read_regular

# Bounds on what a manifest may be, so that no input can make loading slow or
# large: the file's size, each string's length and how deep the YAML nests.
# Anchors and aliases are refused outright (an alias bomb expands without end).
MAX_FILE_BYTES = 256 * 1024
MAX_STRING_CHARS = 4096
MAX_DEPTH = 32

# Characters no manifest text may hold, anywhere in the file: C0 controls but tab,
# newline and carriage return; DEL and the C1 controls (NEL included: YAML would
# break the line there, and editors would not); the Unicode line and paragraph
# separators; surrogates and the two non-characters YAML refuses.
_BAD_RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")
# Unicode categories refused inside a string value: controls, format characters
# (bidi overrides, zero-width joiners), surrogates, line and paragraph separators.
BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


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


# ------------------------------------------------------- YAML with positions


class Node:
    """A YAML mapping or sequence that remembers where each entry stands."""

    def __init__(self, value: Any, line: int, lines: dict[Any, int]):
        self.value, self.line, self.lines = value, line, lines
        self.key_line = line  # the line of the key that holds it, where there is one


class Scalar:
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

    def __init__(self, node: Node, key: str):
        self.node, self.key = node, key
        self.pending: str | None = None  # a mapping's key whose value comes next
        self.pending_line = 0

    def child_key(self) -> str:
        if isinstance(self.node.value, list):
            return f"{self.key}[{len(self.node.value)}]"
        return self.key if self.pending is None else join(self.key, self.pending)


def compose(text: str, path: Path) -> Any:
    """Compose the YAML event stream into Node/Scalar trees, iteratively and within bounds.

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
                stack.append(_Frame(Node(value, line, {}), key))
                continue
            # a scalar
            raw = event.value
            if len(raw) > MAX_STRING_CHARS:
                raise fail(line, key, f"a value of {len(raw)} characters; the limit is {MAX_STRING_CHARS}")
            if is_key:
                assert top is not None
                if any(unicodedata.category(c) in BAD_CATEGORIES for c in raw):
                    raise fail(line, key, f"key {show(raw)} holds a control character; keys must be plain strings")
                if raw in top.node.value:
                    raise fail(line, join(top.key, raw), f"duplicate key (first on line {top.node.lines[raw]})")
                top.pending, top.pending_line = raw, line
                continue
            attach(Scalar(_scalar_value(event, path, line, key), line))
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
        raise ManifestError(path, line, key, f"{show(event.value)} reads as a {kind} but is not a valid one; "
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


def show(value: str, limit: int = 60) -> str:
    """A value quoted for a message, cut if long."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def join(prefix: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    return key if prefix == "(top)" else f"{prefix}.{key}"


# ------------------------------------------------------------------ the file


def read_text(path: Path) -> tuple[str, str]:
    """The text of the manifest file at path and the sha256 of its bytes; any problem is located."""
    data = _read(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ManifestError(path, line, "(file)", f"not UTF-8: {exc.reason} (byte 0x{data[exc.start]:02x})") from None
    return text, hashlib.sha256(data).hexdigest()


def _read(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES (fsutil.read_regular: a FIFO would block and a
    device like /dev/zero never ends); anything else is a located error."""
    try:
        return read_regular(path, MAX_FILE_BYTES, "manifest")
    except UnreadableFile as exc:
        raise ManifestError(path, 0, "(file)", exc.message) from None

