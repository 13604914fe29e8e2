"""Progress for the long commands, on a terminal only: what `report` has read from the index while it
waits, and the build's current step. Never in a log, a pipe or --json: there the output stays as it was."""
from __future__ import annotations

import contextlib
import re
import sys
import time
from typing import Callable, Iterator

from .common import err, escape

BUILD_PROGRESS = ("auto", "plain", "quiet")
_STEP = re.compile(r"^#\d+ \[[^\]]+\] .*")  # BuildKit's plain log: "#7 [image 3/9] RUN ..."


def on_terminal() -> bool:
    return sys.stderr.isatty()


class _IndexReads:
    """The line the status shows, read from the client's counters at each refresh."""

    def __init__(self, label: str, stats: dict[str, int]) -> None:
        from rich.spinner import Spinner
        self.label, self.stats, self.start = label, stats, time.monotonic()
        self.spinner = Spinner("dots")  # one spinner, so that it turns between refreshes

    def __rich__(self):
        from rich.text import Text
        s = self.stats
        text = (f"{self.label}: {s.get('page_requests', 0)} index pages fetched, "
                f"{s.get('metadata_requests', 0) + s.get('range_requests', 0)} metadata read, "
                f"{s.get('downloads', 0)} wheels downloaded ({time.monotonic() - self.start:.0f} s)")
        self.spinner.update(text=Text(text))  # Text: a label is never read as markup
        return self.spinner


@contextlib.contextmanager
def index_status(label: str, stats: dict[str, int] | None, enabled: bool) -> Iterator[None]:
    """While the body runs: a transient status line on stderr with the index reads so far, where stderr is a
    terminal and ``enabled`` (not --json, not -q); nothing at all otherwise."""
    if not (enabled and stats is not None and on_terminal()):
        yield
        return
    from rich.live import Live
    with Live(_IndexReads(label, stats), console=err(), refresh_per_second=4, transient=True):
        yield


@contextlib.contextmanager
def build_log(mode: str) -> Iterator[tuple[bool, Callable[[str], None] | None]]:
    """(stream the plain BuildKit log to stderr?, a callback for each log line) for --progress ``mode``:
    plain streams it, quiet shows nothing, auto shows the current step on one line on a terminal and
    streams the plain log anywhere else (a CI log keeps every line)."""
    if mode == "quiet":
        yield False, None
        return
    if mode == "plain" or not on_terminal():
        yield True, None
        return
    from rich.status import Status
    with Status("build: starting", console=err()) as status:
        def step(line: str) -> None:
            found = _STEP.match(line.rstrip())
            if found:
                status.update(f"build: {escape(found.group(0)[:160])}")
        yield False, step
