"""How a push is shown: a live bar per layer on a terminal, else one line per layer state change, and
the summary of what was pushed and what the registry held already."""
from __future__ import annotations

from rich.progress import BarColumn, Progress, TextColumn

from .engine import PushEvent, PushResult


def human_bytes(n: int | None) -> str:
    if n is None:
        return "size unknown"
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


_STATE_WORDS = {"exists": "already in the registry", "mounted": "mounted from another repository",
                "pushing": "pushing", "pushed": "pushed"}


def summary(result: PushResult) -> str:
    """`12 layers: 3 pushed (4.2 GB), 9 already in the registry (1.6 GB)`."""
    pushed = [layer for layer in result.layers if layer.transferred]
    present = [layer for layer in result.layers if not layer.transferred]
    text = (f"{len(result.layers)} layers: {len(pushed)} pushed ({human_bytes(result.bytes_pushed)}), "
            f"{len(present)} already in the registry ({human_bytes(result.bytes_present)})")
    if result.sizes_from != "registry":
        text += "; sizes uncompressed, from the push progress"
    return text


class PushPrinter:
    """Shows a push: a live bar per layer on a terminal, else one line per layer state change."""

    def __init__(self, console, live: bool | None = None) -> None:
        self.console = console
        self.live = console.is_terminal if live is None else live
        self._states: dict[str, str] = {}
        self._totals: dict[str, int] = {}
        self._progress = None
        self._tasks: dict[str, int] = {}

    def start(self, ref: str, layers: int) -> None:
        self._states, self._totals, self._tasks = {}, {}, {}
        self.console.print(f"pushing {ref} ({layers} layers)", markup=False)
        if self.live:
            self._progress = Progress(TextColumn("  {task.description}"), BarColumn(bar_width=30),
                                      TextColumn("{task.fields[detail]}"), console=self.console)
            self._progress.start()

    def event(self, event: PushEvent) -> None:
        if event.total:
            self._totals[event.layer] = event.total
        if self._progress is not None:
            self._live_event(event)
            return
        if self._states.get(event.layer) == event.status or event.status in ("preparing", "waiting"):
            self._states[event.layer] = event.status
            return
        self._states[event.layer] = event.status
        if event.status == "pushing":
            words = f"pushing {human_bytes(event.total)}" if event.total else "pushing"
        elif event.status == "pushed":
            total = self._totals.get(event.layer)
            words = f"pushed {human_bytes(total)}" if total else "pushed"
        elif event.status in ("mounted", "retrying"):
            words = event.text[:1].lower() + event.text[1:]
        else:
            words = _STATE_WORDS.get(event.status, event.status)
        self.console.print(f"  layer {event.layer}: {words}", markup=False)

    def _live_event(self, event: PushEvent) -> None:
        assert self._progress is not None
        task = self._tasks.get(event.layer)
        if task is None:
            task = self._tasks[event.layer] = self._progress.add_task(f"layer {event.layer}", total=None, detail="")
        total = self._totals.get(event.layer)
        if event.status == "pushing":
            current = event.current or 0
            detail = f"{human_bytes(current)} / {human_bytes(total)}" if total else human_bytes(current)
            self._progress.update(task, total=total or None, completed=current, detail=detail)
        elif event.status == "pushed":
            self._progress.update(task, total=total or 1, completed=total or 1,
                                  detail=f"pushed {human_bytes(total)}" if total else "pushed")
        elif event.status in ("exists", "mounted"):
            self._progress.update(task, total=1, completed=1, detail=_STATE_WORDS[event.status])
        else:
            self._progress.update(task, detail=event.text)

    def done(self, result: PushResult) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self.console.print(f"  {summary(result)}", markup=False)
