"""Fixtures shared by every test directory: the local HTTP index, and the real engine,
bootstrap base image and registry (skipped with the reason without an engine; failed
when CI is set, because CI must provide them: scripts/engine-up, scripts/registry-up)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import urllib.request
from typing import Iterator

from pathlib import Path

import pytest

from pinwheel.image.base import BaseImageError, base_ref, ensure_base
from pinwheel.image.engine import Engine

from tests.support import disk, scheduling
from tests.support.engine import BASE_PYTHON, BASE_SUITE, REGISTRY_ADDR, REPO_ROOT, engine_unavailable
from tests.support.local_index import LocalIndex


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--e2e", action="store_true", default=False,
                     help="run the end-to-end tests too (the real multi-GB images; `make test` passes it)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "holds(name): the module changes engine state others read (see "
                                       "tests/support/scheduling.py): modules holding the same run one at a time")


GROUPS = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist's controller, starting a worker under --dist loadgroup: where the workers write the module groups."""
    if node.config.getoption("dist", "no") == "loadgroup":
        node.workerinput[scheduling.GROUPS_FILE] = str(_groups_file(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadgroup: each module whole on one worker, modules sharing engine state together
    (tests/support/scheduling.py)."""
    if config.getoption("dist", "no") != "loadgroup":
        return None
    return scheduling.scheduler(config, log, _groups_file(config))


def _groups_file(config: pytest.Config) -> Path:
    if GROUPS not in config.stash:
        config.stash[GROUPS] = scheduling.new_groups_file()
    return config.stash[GROUPS]


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(GROUPS, None)
    if path is not None and not hasattr(config, "workerinput"):
        shutil.rmtree(path.parent, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker under --dist loadgroup: the groups written for the scheduler, the slowest first."""
    path = getattr(config, "workerinput", {}).get(scheduling.GROUPS_FILE)
    if path:
        scheduling.write_groups(Path(path), scheduling.plan(items))


LEDGER = pytest.StashKey[disk.DiskLedger]()
LAST_MODULE = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers
def pytest_sessionstart(session: pytest.Session) -> None:
    """With workers (-n): the disk budget once, before any of them starts. A worker must not reclaim while
    the other one builds: what it removed could be the other's base or cache."""
    config = session.config
    if disk.FLOOR_BYTES <= 0 or hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    ledger = config.stash.setdefault(LEDGER, disk.DiskLedger(when="before the run"))
    ledger.start = {name: disk.usage(host) for name, host in disk.answering_engines()}
    disk.keep_floor(ledger, "the run")


@pytest.hookimpl(tryfirst=True)  # before the runner sets up the module's fixtures, which may build
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the first test of each module that builds on an engine: the disk budget (tests/support/disk.py).
    On an xdist worker, none: the budget ran once before the workers started."""
    if disk.FLOOR_BYTES <= 0 or hasattr(item.config, "workerinput"):
        return
    if not any(item.get_closest_marker(m) for m in ("engine", "e2e")):
        return
    module = item.nodeid.split("::", 1)[0]
    if item.config.stash.get(LAST_MODULE, None) == module:
        return
    item.config.stash[LAST_MODULE] = module
    ledger = item.config.stash.setdefault(LEDGER, disk.DiskLedger())
    if not ledger.start:
        ledger.start = {name: disk.usage(host) for name, host in disk.answering_engines()}
    disk.keep_floor(ledger, module)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    ledger = config.stash.get(LEDGER, None)
    if ledger is None:
        return
    ledger.end = {name: disk.usage(host) for name, host in disk.answering_engines()}
    for line in ledger.summary():
        terminalreporter.write_line(line)


@pytest.fixture
def local_index(tmp_path):
    """A LocalIndex under tmp_path (call .add(...), then .serve() for its URL); stopped afterwards."""
    index = LocalIndex(tmp_path / "local-index")
    try:
        yield index
    finally:
        index.close()


@pytest.fixture
def local_project(tmp_path, monkeypatch):
    """project(index_url) -> an empty project root under tmp_path that locks against that index: pip's (and so
    pinwheel's and uv's) index URL is it, and pinwheel, uv and pip-tools keep their caches in the test's own."""
    def project(index_url: str) -> Path:
        monkeypatch.setenv("PIP_INDEX_URL", index_url)
        monkeypatch.setenv("PINWHEEL_CACHE_DIR", str(tmp_path / "pinwheel-cache"))
        monkeypatch.setenv("PIP_TOOLS_CACHE_DIR", str(tmp_path / "pip-tools-cache"))
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
        root = tmp_path / "project"
        root.mkdir()
        return root

    return project


@pytest.fixture(scope="session")
def engine() -> Engine:
    eng = Engine()
    reason = eng.unavailable_reason()
    if reason is not None:
        engine_unavailable(reason)
    return eng


@pytest.fixture(scope="session")
def base_image(engine: Engine) -> str:
    """The local bootstrap base (created with debootstrap when missing)."""
    ref = base_ref(BASE_SUITE, BASE_PYTHON)
    try:
        ensure_base(ref, BASE_PYTHON, engine, suite=BASE_SUITE, cache_dir=REPO_ROOT / ".cache" / "base")
    except BaseImageError as exc:
        engine_unavailable(f"cannot make the bootstrap base {ref}: {exc}")
    return ref


def _registry_answers(addr: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{addr}/v2/", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def registry(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a registry started with scripts/registry-up.

    One that already answers is reused (tests use fresh repository names);
    one this fixture started, on fresh storage, is stopped afterwards.
    """
    if _registry_answers(REGISTRY_ADDR):
        yield REGISTRY_ADDR
        return
    state = tmp_path_factory.mktemp("registry-state")
    storage = tmp_path_factory.mktemp("registry-storage")
    env = dict(os.environ, TMPDIR=str(state), PINWHEEL_REGISTRY_ADDR=REGISTRY_ADDR)
    proc = subprocess.run(
        [str(REPO_ROOT / "scripts" / "registry-up"), str(storage)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        engine_unavailable(f"scripts/registry-up failed (exit {proc.returncode}): {proc.stderr.strip()}")
    pid_file = state / f"pinwheel-registry-{REGISTRY_ADDR.rsplit(':', 1)[1]}" / "registry.pid"
    try:
        yield REGISTRY_ADDR
    finally:
        if pid_file.is_file():
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass
