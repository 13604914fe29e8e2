"""What the walk over a Dockerfile's RUNs carries: the placeholders import writes, its TODOs, what earlier
instructions told it, and one RUN's findings."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .shell import Shell

ZERO_COMMIT = "0" * 40
ZERO_SHA256 = "0" * 64
TODO_VERSION = "0+todo"  # a PEP 440 version no index serves: the requirement loads and can never resolve
TODO_DEB = "0~todo"  # a Debian version below every real one
WHY = "TODO: why"


@dataclass
class Todo:
    """A value import could not know: where it goes in a step, what to fill in, and how `--pin` finds it
    (("index", requirement), ("git", url, ref) or ("asset", url)), if it can."""

    step: dict
    key: str
    what: str
    pin: tuple = ()


@dataclass
class Context:
    """What earlier instructions told the walk: the working directory, files copied in from the build
    context, the apt entries so far, signing keys downloaded, apt sources waiting for an apt step, the named
    indexes, and whether the file installs torch itself."""

    workdir: str = "/"
    copied: list[str] = field(default_factory=list)  # image paths; a directory ends in '/'
    copies: list[tuple[tuple[str, ...], str]] = field(default_factory=list)  # (context sources, image dest)
    apt_of: dict[str, dict] = field(default_factory=dict)  # Debian package -> the apt entry installing it
    keys: dict[str, str] = field(default_factory=dict)  # keyring path -> the key's URL
    sources: list[tuple[int, dict]] = field(default_factory=list)  # (line, source) waiting for an apt entry
    indexes: dict[str, dict] = field(default_factory=dict)  # name -> {url, why, flat}
    torch: bool = False
    venv: str | None = None  # where a `uv sync` puts its environment
    project_base: tuple = ()  # (the Dockerfile's directory, the manifest's): a uv project is named from the latter
    context: Path | None = None  # the build context: where a `-r` file the Dockerfile COPYs in is read from


@dataclass
class RunResult:
    line: int = 0
    entries: list[dict] = field(default_factory=list)  # steps, in order
    listed: list[str] = field(default_factory=list)
    todos: list[Todo] = field(default_factory=list)
    verifies: list[str] = field(default_factory=list)  # python -c snippets that check the image
    wheels_names: list[str] = field(default_factory=list)
    debs: list[str] = field(default_factory=list)
    reads: set[str] = field(default_factory=set)  # the ARGs its run steps read


@dataclass
class RunState:
    args: dict[str, str | None]
    line: int
    downloads: dict[str, str] = field(default_factory=dict)  # file name -> URL (wget/curl -o)
    clone: tuple[str, str, str | None] | None = None  # (url, dir, branch)
    checkout: str | None = None
    cwd_in_clone: str | None = None  # the path inside the clone that `cd` went to
    ctx: Context = field(default_factory=Context)
    cwd: str = "/"
    pos: int = 0  # the command's place in the RUN
    raw: tuple[str, ...] = ()  # its words as written (ARGs not filled in)
    shell: Shell = field(default_factory=Shell)
    submodules: bool = False
    clone_used: bool = False
    exports: dict[str, str] = field(default_factory=dict)  # literal `export X=v` and `X=v cmd` values
    index: tuple[str, str | None] | None = None  # the current install's named index, and its TODO


def under(cwd: str, path: str) -> str:
    """An image path as a RUN or COPY in working directory ``cwd`` names it."""
    return path if path.startswith("/") else f"{cwd.rstrip('/')}/{path.removeprefix('./')}".rstrip("/") or "/"
