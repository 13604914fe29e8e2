"""What every command shares: exit codes, consoles, variant and platform selection, the index
client, and the checks that run before anything reads a lock or an inventory."""
from __future__ import annotations

import argparse
import json
import os
import sys
from json.encoder import encode_basestring_ascii as _str
from pathlib import Path

from ..index import DEFAULT_DEADLINE, IndexClient, metadata_source, transfer
from ..lock import check_lock
from ..manifest import Manifest
from ..plan import LockState, Plan, plan_platforms, plan_variant
from ..resolve import reads_base, with_inventory
from ..workspace import Workspace


EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT, EXIT_UNCHECKED = 0, 1, 2, 3


def program() -> str:
    """How the user ran the command line, for the commands that messages and files tell them to run."""
    return "build.py" if Path(sys.argv[0]).name == "build.py" else "pinwheel"


class UsageError(Exception):
    """Bad arguments or environment the user must fix; exit 2."""


# Without a terminal (CI logs, pipes) nothing is wrapped or cut: tables take the width they need.
UNBOUNDED_WIDTH = 100_000


# --color, as main() read it for this run: auto (colour on a terminal), always, never.
_COLOR = {"mode": "auto"}


def set_color(mode: str) -> None:
    _COLOR["mode"] = mode


def _console(stream):
    from rich.console import Console  # rich loads when something is printed, not for `--json` or `--help`
    width = None if stream.isatty() else UNBOUNDED_WIDTH
    mode = _COLOR["mode"]
    # emoji off: a manifest key like ":thumbs_up:" must print as written; on a terminal long lines wrap at
    # spaces (soft_wrap off), elsewhere a line stays one line
    return Console(file=stream, highlight=False, soft_wrap=width is not None, width=width, emoji=False,
                   force_terminal=True if mode == "always" else None, no_color=True if mode == "never" else None)


def out():
    return _console(sys.stdout)


class JsonStdout:
    """With --json, stdout holds one JSON document and nothing else. While a command runs, whatever else
    would reach stdout (a print, a rich console, a child process such as debootstrap or buildx) goes to
    stderr; ``emit`` writes the document to the real stdout. Held by ``main`` for the command's duration."""

    def __init__(self) -> None:
        self._document_stream = None
        self._saved_fd: int | None = None
        self._saved_stdout = None

    def __enter__(self) -> "JsonStdout":
        sys.stdout.flush()
        self._saved_stdout = sys.stdout
        try:
            fd = sys.stdout.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory stdout (a test's capture): no fd to move
            fd = None
        if fd is not None:
            self._saved_fd = os.dup(fd)
            os.dup2(sys.stderr.fileno(), fd)  # child processes inherit fd 1: it is stderr now
            self._document_stream = os.fdopen(os.dup(self._saved_fd), "w", encoding="utf-8")
        else:
            self._document_stream = sys.stdout
            sys.stdout = sys.stderr
        return self

    def emit(self, document) -> None:
        self._document_stream.write(indented_json(document) + "\n")
        self._document_stream.flush()

    def __exit__(self, *exc) -> None:
        sys.stdout.flush()
        if self._saved_fd is not None:
            self._document_stream.close()
            os.dup2(self._saved_fd, self._saved_stdout.fileno())
            os.close(self._saved_fd)
        sys.stdout = self._saved_stdout



class _NotPlain(Exception):
    """A value json.dumps would hand to its default hook (and so reject): json.dumps says how."""


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == float("inf"):
        return "Infinity"
    if o == -float("inf"):
        return "-Infinity"
    return float.__repr__(o)


def _key(k) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, float):
        return _float(k)
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, int):
        return int.__repr__(k)
    raise _NotPlain


def _put(o, out: list, nl: str) -> None:  # noqa: C901 - the order is json's own: str, None, bools, int, float
    """Append o's text; ``nl`` is a newline and the indent of o's own level."""
    if isinstance(o, str):
        out.append(_str(o))
    elif o is None:
        out.append("null")
    elif o is True:
        out.append("true")
    elif o is False:
        out.append("false")
    elif isinstance(o, int):
        out.append(int.__repr__(o))
    elif isinstance(o, float):
        out.append(_float(o))
    elif isinstance(o, (list, tuple)):
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        for v in o:
            out.append(sep)
            sep = "," + inner
            _put(v, out, inner)
        out.append(nl + "]")
    elif isinstance(o, dict):
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        for k, v in o.items():
            out.append(sep + _str(_key(k)) + ": ")
            sep = "," + inner
            _put(v, out, inner)
        out.append(nl + "}")
    else:
        raise _NotPlain


def indented_json(document) -> str:
    """json.dumps(document, indent=2), byte for byte (tests/cli/test_indented_json.py), in half its time: json's
    indenting encoder is pure-Python generators, and a real-size report's document is 750 KB of them."""
    out: list = []
    try:
        _put(document, out, "\n")
    except (_NotPlain, RecursionError):
        return json.dumps(document, indent=2)
    return "".join(out)


_json_stdout: list[JsonStdout] = []  # the command's JsonStdout while one is held (set by main, never at import)


def emit_json(document) -> None:
    """Write the command's one JSON document: to the real stdout under ``JsonStdout``, else to stdout."""
    if _json_stdout:
        _json_stdout[-1].emit(document)
    else:
        sys.stdout.write(indented_json(document) + "\n")


def json_stdout(enabled: bool):
    """The context ``main`` holds around a command: ``JsonStdout`` when --json was given, else nothing."""
    import contextlib

    @contextlib.contextmanager
    def held():
        if not enabled:
            yield
            return
        guard = JsonStdout()
        with guard:
            _json_stdout.append(guard)
            try:
                yield
            finally:
                _json_stdout.pop()
    return held()


def err():
    return _console(sys.stderr)


def escape(text: str) -> str:
    """rich's markup escape, with rich loaded only once a message is printed."""
    from rich.markup import escape as rich_escape  # see _console
    return rich_escape(text)


# ------------------------------------------------------------------ plans


def plans_for(m: Manifest, variant: str | None) -> list[Plan]:
    names = [variant] if variant else list(m.variants)
    return [plan_variant(m, n) for n in names]


def select_variant(m: Manifest, args: argparse.Namespace) -> str:
    """--variant NAME, or --cuda MAJOR (the variant whose CUDA major matches), or the first."""
    if getattr(args, "variant", None):
        if args.variant not in m.variants:
            raise UsageError(f"--variant {args.variant}: no such variant in {m.path.name} "
                             f"(variants: {', '.join(m.variants)})")
        return args.variant
    cuda = getattr(args, "cuda", None)
    if cuda:
        try:
            major = int(str(cuda).split(".")[0])
        except ValueError:
            raise UsageError(f"--cuda {cuda!r}: expected a CUDA major version like 13") from None
        hits = [v.name for v in m.variants.values() if v.cuda_major == major]
        if len(hits) != 1:
            known = ", ".join(f"{v.name} (CUDA {v.cuda})" for v in m.variants.values())
            raise UsageError(f"--cuda {cuda}: {'no' if not hits else 'more than one'} variant matches; variants: {known}")
        return hits[0]
    return next(iter(m.variants))


def add_platform_arg(p: argparse.ArgumentParser, every: bool = False) -> None:
    p.add_argument("--platform", metavar="OS/ARCH",
                   help="one of the variant's platforms, e.g. linux/arm64 (default: "
                        + ("every platform it lists)" if every else "its own platform's tag)"))


def select_plan(m: Manifest, args: argparse.Namespace) -> Plan:
    """The Plan of the selected variant for --platform (default: the variant's own platform)."""
    name = select_variant(m, args)
    platform = getattr(args, "platform", None)
    variant = m.variant(name)
    if platform and platform not in variant.container_platforms:
        raise UsageError(f"--platform {platform}: variant {name} is built for "
                         f"{', '.join(variant.container_platforms)} (its platforms: key)")
    return plan_variant(m, name, platform=platform)


def select_platform_plans(m: Manifest, args: argparse.Namespace) -> list[Plan]:
    """Each selected variant's Plans: the --platform one, else one per platform it lists."""
    if getattr(args, "platform", None):
        names = select_variants(m, args)
        missing = [n for n in names if args.platform not in m.variant(n).container_platforms]
        if missing:
            raise UsageError(f"--platform {args.platform}: not a platform of {', '.join(missing)}")
        return [plan_variant(m, n, platform=args.platform) for n in names]
    return [p for n in select_variants(m, args) for p in plan_platforms(m, n)]


def add_deadline_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index-deadline", type=float, metavar="SECONDS", default=None,
                   help=f"the most seconds this command spends on the index, retries and slow bodies included "
                        f"(default {DEFAULT_DEADLINE:g})")


def add_variant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", help="variant name from the manifest (e.g. cu130)")
    p.add_argument("--cuda", help="pick the variant by CUDA major version (e.g. 13)")


def index_client(args: argparse.Namespace, m: Manifest, plan: Plan | None = None):
    """Where metadata comes from: pip's index, and torch from the variant's extra index where it names one."""
    try:
        transfer.check_bounds()
    except transfer.LimitError as exc:
        raise UsageError(str(exc)) from None
    client = IndexClient(index_url=getattr(args, "index_url", None), cache_dir=Workspace.of(m).index_cache,
                         offline=getattr(args, "offline", False),
                         deadline=getattr(args, "index_deadline", None) or DEFAULT_DEADLINE,
                         refresh=getattr(args, "refresh", False))
    return client if plan is None else metadata_source(plan, client)


def lock_state(plan: Plan, root: Path):
    """The committed lock against the manifest, compared before anything else reads the lock."""
    check = check_lock(plan, root)
    return LockState(check.status, check.detail)


def inventory_engine(plan: Plan):
    """The engine that tells an unpinned base's identity (where none answers, check_inventory says the identity
    was not checked); None for a pinned base."""
    if not reads_base(plan) or not plan.variant.base:
        return None
    from ..image.engine import Engine  # the engine adapter loads only for a variant that reads its base
    from ..image.inventory import pinned_digest

    if pinned_digest(plan.variant.base):
        return None
    return Engine()  # not probed: the one CLI call that reads the base's id is the probe


def require_fresh_inventory(plan: Plan, root: Path) -> Plan:
    """build, lock, bump and publish never act on a missing or stale base inventory; the Plan with it."""
    plan = with_inventory(plan, root, inventory_engine(plan))
    state = plan.resolution.inventory_state
    if state is not None and state.status != "ok":
        raise UsageError(f"the base inventory of variant {plan.variant.name} is {state.status} ({state.detail}): "
                         f"run `build.py base inventory --variant {plan.variant.name}` and commit it")
    return plan


def require_fresh_lock(plan: Plan, root: Path) -> None:
    """build, bump and publish never act on a stale lock (nor on a stale base inventory)."""
    plan = require_fresh_inventory(plan, root)
    state = lock_state(plan, root)
    if state.status == "stale":
        raise UsageError(f"the lock of variant {plan.variant.name} is stale ({state.detail}): "
                         f"run `make lock` (build.py lock --variant {plan.variant.name})")



BUILDER_ENV = "PINWHEEL_BUILDER"
# Where images are published unless --registry says otherwise; the default cache refs live there too.
DEFAULT_REGISTRY = "127.0.0.1:5000"
ENGINE_HOST_ENV = "PINWHEEL_ENGINE_HOST"


def add_engine_args(p: argparse.ArgumentParser, default=None) -> None:
    """Where engine commands run: a buildx builder, a remote engine or a docker context."""
    p.add_argument("--builder", metavar="NAME", default=default,
                   help=f"build on this buildx builder (default: ${BUILDER_ENV}, else the engine's own)")
    p.add_argument("--engine-host", metavar="URL", default=default,
                   help=f"the engine to use: unix:///path.sock, tcp://host:2376, ssh://user@host "
                        f"(default: ${ENGINE_HOST_ENV}, else the docker CLI's own: DOCKER_HOST or its context)")
    p.add_argument("--engine-context", metavar="NAME", default=default,
                   help="the docker context to use instead of --engine-host")


def engine_for(args: argparse.Namespace | None):
    """The engine the command's --builder/--engine-host/--engine-context (or their variables) name."""
    builder = getattr(args, "builder", None) or os.environ.get(BUILDER_ENV) or None
    host = getattr(args, "engine_host", None) or os.environ.get(ENGINE_HOST_ENV) or None
    context = getattr(args, "engine_context", None)
    if host and context:
        raise UsageError("--engine-host and --engine-context name two engines; give one")
    from ..image.engine import Engine  # see inventory_engine
    return Engine(host=host, context=context, builder=builder)


def engine_or_fail(args: argparse.Namespace | None = None):
    engine = engine_for(args)
    reason = engine.unavailable_reason()
    if reason:
        raise UsageError(f"no Docker engine with buildx ({engine.describe()}): {reason}. "
                         f"Run `scripts/engine-up` (or `make engine`).")
    return engine


def select_variants(m: Manifest, args: argparse.Namespace) -> list[str]:
    """--variant NAME or --cuda MAJOR select one variant (see select_variant); neither: all of them."""
    if getattr(args, "variant", None) or getattr(args, "cuda", None):
        return [select_variant(m, args)]
    return list(m.variants)
