"""What a push says: the docker CLI's push output, read under a pseudo-terminal (the only place the CLI
reports a push's bytes), as layer events, and the result of a push (engine.Engine.push)."""
from __future__ import annotations

import codecs
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class PushEvent:
    """One line of a push's progress: a layer (short diff id) and what it is doing.

    ``status`` is one of preparing, waiting, pushing, pushed, exists (already
    in the registry), mounted (from another repository), retrying, or the
    engine's own words in lower case. ``current``/``total`` are the bytes the
    progress shows while pushing (``total`` is None where the engine did not
    say); they are the engine's rounded figures, uncompressed.
    """

    layer: str
    status: str
    text: str
    current: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class PushedLayer:
    diff_id: str
    state: str  # pushed | exists | mounted (the last state the push reported)
    size: int | None  # bytes: the blob in the registry, else the progress total, else unknown

    @property
    def transferred(self) -> bool:
        return self.state == "pushed"


@dataclass(frozen=True)
class PushResult:
    ref: str
    digest: str
    layers: tuple[PushedLayer, ...]
    sizes_from: str  # "registry" (the manifest's blob sizes) or "progress" (uncompressed, rounded)

    @property
    def bytes_pushed(self) -> int:
        return sum(layer.size or 0 for layer in self.layers if layer.transferred)

    @property
    def bytes_present(self) -> int:
        return sum(layer.size or 0 for layer in self.layers if not layer.transferred)


_PUSH_STATES = {"layer already exists": "exists"}
_LAYER_LINE = re.compile(r"^([0-9a-f]{12}): (.+?)\s*$")
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SIZE = r"(\d+(?:\.\d+)?)\s*([kKMGTP]?B)"
_PROGRESS = re.compile(_SIZE + r"(?:/" + _SIZE + r")?\s*$")
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}


def _human_bytes(number: str, unit: str) -> int:
    """``'1.377', 'MB'`` -> 1377000 (the CLI's decimal units)."""
    return int(float(number) * _UNITS[unit.upper()])


def parse_push_line(line: str) -> PushEvent | None:
    """One line of ``docker push`` output (escapes removed) as a layer event; None for other lines."""
    match = _LAYER_LINE.match(line)
    if not match:
        return None
    layer, text = match.groups()
    head = text.split("[", 1)[0].strip()
    lowered = head.lower()
    if lowered.startswith("mounted from"):
        status = "mounted"
    elif lowered.startswith("retrying"):
        status = "retrying"
    elif lowered.startswith("pushing"):
        status = "pushing"
    else:
        status = _PUSH_STATES.get(lowered, lowered)
    current = total = None
    if status == "pushing":
        progress = _PROGRESS.search(text)
        if progress:
            current = _human_bytes(progress.group(1), progress.group(2))
            if progress.group(3):
                total = _human_bytes(progress.group(3), progress.group(4))
    return PushEvent(layer, status, text, current, total)


class _PushOutputParser:
    """Turns the CLI's push output (terminal or not) into layer events and other message lines."""

    def __init__(self, on_event: Callable[[PushEvent], None]) -> None:
        self._on_event = on_event
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self.messages: list[str] = []

    def feed(self, data: bytes) -> None:
        self._pending += self._decoder.decode(data)
        *complete, self._pending = re.split(r"[\r\n]", self._pending)
        for fragment in complete:
            self._line(fragment)

    def close(self) -> None:
        self._pending += self._decoder.decode(b"", final=True)
        if self._pending:
            self._line(self._pending)
        self._pending = ""

    def _line(self, fragment: str) -> None:
        line = _ESCAPE.sub("", fragment).strip()
        if not line:
            return
        event = parse_push_line(line)
        if event is not None:
            self._on_event(event)
        elif line not in self.messages:
            self.messages.append(line)


def _run_in_pty(command: Sequence[str], feed: Callable[[bytes], None]) -> int | None:
    """Run ``command`` with a pseudo-terminal as its stdout and stderr; None where there is none."""
    try:
        master, slave = pty.openpty()
    except OSError:
        return None
    try:
        # Wide, so that the CLI never shortens a progress line.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
        proc = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                                close_fds=True)
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    os.close(slave)
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the CLI has closed the terminal
                break
            if not data:
                break
            feed(data)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        os.close(master)
    return proc.wait()
