"""uv-project steps: a project installed from its own pyproject.toml and uv.lock with `uv sync --frozen`.

The building block of kind `uv-project`:
- manifest: a UvProjectStep: `project` (a directory next to the manifest
  holding pyproject.toml and uv.lock, read when the manifest is read) and
  `install_project` (default true: the project itself is installed too, not
  editable). The image must install with uv into pinwheel's venv;
- plan: it names no index distribution;
- effect: the uv.lock's packages that the project's own dependencies reach
  (not its dev groups; markers evaluated for Linux), as a fixed set: each
  installed at its locked version with its dependencies from the set, so the
  resolver judges their requirements like an index package's (metadata read
  from the index), never as suppressed;
- lock: no slice; the uv.lock's sha256 is its lock part, so a changed uv.lock
  makes the lock stale; identity: that sha256 and the sha256 of every file of
  the project directory (section `uv_projects`);
- host: `build` copies the project directory into the context's
  uv-projects/<step>/ and checks the uv.lock against the manifest's reading;
- partial: templates/steps/uv-project.j2, one RUN of `uv sync --frozen
  --inexact --no-dev` into the venv: uv installs exactly the lock's versions,
  each file checked against the lock's hashes, and leaves earlier steps'
  packages in place;
- invariant: after the last step, every package of the set is installed at
  its uv.lock version, or the build fails naming it.
"""
from __future__ import annotations

import hashlib
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from packaging.markers import InvalidMarker, Marker, default_environment
from packaging.utils import canonicalize_name

from ..fsutil import sha256_file
from ..model.reader import Reader, StepReading
from ..model.source import show
from .base import ADOPT_UV_SYNC, DirectInstall, Effect, KindView, Staging, StagingError, StepKind

if TYPE_CHECKING:
    from ..plan import Plan, Step

MAX_LOCK = 16 << 20
MAX_FILES = 2000  # a project directory, not a checkout with its history
MOUNT = "/tmp/pinwheel-uv-project"
_SKIP = {".git", ".venv", "__pycache__", ".mypy_cache", ".pytest_cache"}
# Markers of the uv.lock's dependency edges are evaluated for Linux (the image's OS) on the host's Python.
_LINUX = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}


@dataclass(frozen=True)
class UvProjectStep:
    kind: ClassVar[str] = "uv-project"

    name: str
    why: str
    gate: str | None
    project: str  # the directory, relative to the manifest's
    install_project: bool
    root: str  # the project's own name in its uv.lock
    packages: tuple[tuple[str, str], ...]  # (name, version) the project's dependencies reach, sorted
    uv_lock_sha256: str
    line: int


def project_files(directory: Path) -> list[Path]:
    """The project's files, sorted, without version-control and cache directories."""
    out = []
    for path in sorted(directory.rglob("*")):
        if any(part in _SKIP for part in path.relative_to(directory).parts):
            continue
        if path.is_file() and not path.is_symlink():
            out.append(path)
    return out


def tree_sha256(directory: Path) -> str:
    """The sha256 of every file's relative path and bytes: a changed source file moves it."""
    digest = hashlib.sha256()
    for path in project_files(directory):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0" + sha256_file(path).encode() + b"\n")
    return digest.hexdigest()


def reached(lock: dict) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(the project's name, the (name, version) its dependencies reach) in a parsed uv.lock."""
    packages = {canonicalize_name(p["name"]): p for p in lock.get("package", [])}
    roots = [n for n, p in packages.items() if set(p.get("source", {})) & {"editable", "virtual"}
             and next(iter(p["source"].values())) == "."]
    if len(roots) != 1:
        raise ValueError("its uv.lock holds no project at '.' (source editable or virtual '.')")
    env = {**default_environment(), **_LINUX}
    seen: dict[str, str] = {}
    todo = [roots[0]]
    while todo:
        name = todo.pop()
        for dep in packages[name].get("dependencies", []):
            dep_name = canonicalize_name(dep["name"])
            marker = dep.get("marker")
            if marker and not Marker(marker).evaluate({**env, "extra": ""}):
                continue
            if dep_name not in seen and dep_name in packages:
                seen[dep_name] = str(packages[dep_name]["version"])
                todo.append(dep_name)
    return roots[0], tuple(sorted(seen.items()))


def _project(r: Reader, node: Any, key: str) -> tuple[str, str, tuple[tuple[str, str], ...], str]:
    """(the directory, the project's name, the packages it reaches, the uv.lock's sha256)."""
    directory = r.string(node, key)
    parts = directory.split("/")
    if directory.startswith("/") or ".." in parts or not all(parts):
        raise r.fail(node.line, key, f"{show(directory)} is not a relative path inside the manifest's directory")
    path = Path(r.path).parent / directory
    if not (path / "pyproject.toml").is_file() or not (path / "uv.lock").is_file():
        raise r.fail(node.line, key, f"{directory} holds no pyproject.toml and uv.lock (`uv lock` makes the lock)")
    if len(project_files(path)) > MAX_FILES:
        raise r.fail(node.line, key, f"{directory} holds over {MAX_FILES} files: name the project, not a checkout")
    data = (path / "uv.lock").read_bytes()
    if len(data) > MAX_LOCK:
        raise r.fail(node.line, key, f"{directory}/uv.lock is over {MAX_LOCK >> 20} MiB")
    try:
        root, packages = reached(tomllib.loads(data.decode()))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError, KeyError, TypeError, InvalidMarker) as exc:
        raise r.fail(node.line, key, f"{directory}/uv.lock cannot be read: {str(exc).splitlines()[0]}") from None
    return directory, root, packages, hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class UvProjectView(KindView):
    """A uv-project step as its partial reads it."""

    spec: UvProjectStep

    @property
    def context_dir(self) -> str:
        return context_dir(self.step.name)

    @property
    def mount(self) -> str:
        return f"{MOUNT}/{self.step.name}"

    @property
    def sync_flags(self) -> str:
        return "--no-editable" if self.spec.install_project else "--no-install-project"

    @property
    def lock_mismatch_message(self) -> str:
        return f"pinwheel: ERROR: uv-project step {self.step.name}: {self.spec.project}/uv.lock is not the one the manifest read"

    @property
    def versions_json(self) -> str:
        import json

        return json.dumps(dict(self.spec.packages), sort_keys=True, separators=(",", ":"))

    @property
    def mismatch_prefix(self) -> str:
        return f"pinwheel: ERROR: uv-project step {self.step.name}: not as its uv.lock says:"


def context_dir(step_name: str) -> str:
    return f"uv-projects/{step_name}"


class UvProject(StepKind):
    name = "uv-project"
    adopts = ADOPT_UV_SYNC
    noun = "uv-project step"

    def adopted_entry(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, adopted_entry below: asked through the kind, so import names no kind module."""
        return adopted_entry(*args, **kwargs)

    def read(self, node: Any, key: str, reading: StepReading) -> UvProjectStep:
        r = reading.reader
        m = r.mapping(node, key, {"name", "why", "gate", "project", "install_project"} | reading.common_keys,
                      {"name", "why", "project"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        for variant in reading.builds(gate):
            if getattr(variant, "environment", "venv") != "venv":
                raise r.fail(m["project"].line, f"{key}.project", f"variant {variant.name} installs into its base's "
                                                                  "python: `uv sync` installs into pinwheel's venv only")
        directory, root, packages, sha = _project(r, m["project"], f"{key}.project")
        install = r.boolean(m["install_project"], f"{key}.install_project") if "install_project" in m else True
        return UvProjectStep(name, r.string(m["why"], f"{key}.why"), gate, directory, install, root, packages, sha,
                             node.line)

    def effect(self, step: Step) -> Effect:
        """The set its uv.lock fixes: each package at its version, judged with its requirements."""
        spec = step.spec
        assert isinstance(spec, UvProjectStep)
        if not step.active:
            return Effect()

        def reader(name: str, version: str):
            def read(source):
                try:
                    return source.metadata(name, version), ""
                except Exception as exc:  # an index error: the verdict says unchecked, with why
                    return None, f"{name} {version} from the uv.lock of {spec.project}: {exc}"
            return read

        why = f"locked by {spec.project}/uv.lock"
        return Effect(direct=tuple(DirectInstall(n, v, "uv-project", (), why, read=reader(n, v), no_deps=False)
                                   for n, v in spec.packages))

    def provides(self, step: Step) -> tuple[str, ...]:
        assert isinstance(step.spec, UvProjectStep)
        return tuple(n for n, _ in step.spec.packages)

    def lock_part(self, step: Step) -> dict:
        assert isinstance(step.spec, UvProjectStep)
        return {"uv_lock": step.spec.uv_lock_sha256}

    def invariant(self, step: Step) -> tuple[UvProjectStep, ...]:
        assert isinstance(step.spec, UvProjectStep)
        return (step.spec,) if step.spec.packages else ()

    def view(self, step: Step) -> UvProjectView:
        assert isinstance(step.spec, UvProjectStep)
        return UvProjectView(step, step.spec, self)

    identity_section = "uv_projects"

    def stage(self, step: Step, staging: Staging) -> None:
        """The project directory into the context's uv-projects/<step>/, its uv.lock the manifest's."""
        spec = step.spec
        assert isinstance(spec, UvProjectStep)
        source, dest = staging.root / spec.project, staging.context / context_dir(step.name)
        dest.mkdir(parents=True, exist_ok=True)
        for path in project_files(source):
            target = dest / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        found = sha256_file(dest / "uv.lock") if (dest / "uv.lock").is_file() else "missing"
        if found != spec.uv_lock_sha256:
            raise StagingError(f"uv-project step {step.name}: {spec.project}/uv.lock changed while building: expected "
                               f"sha256 {spec.uv_lock_sha256}, found {found}")

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        spec = step.spec
        assert isinstance(spec, UvProjectStep)
        if not step.active:
            return ()
        return ({"step": step.name, "project": spec.project, "uv_lock_sha256": spec.uv_lock_sha256,
                 "files_sha256": tree_sha256(root / spec.project)},)


KIND = UvProject()


def adopted_entry(project: str, install_project: bool, why: str, gate: str | None) -> dict:
    """The manifest entry `import` writes for a `uv sync` of a project the Dockerfile copied from its context
    (``project``: that directory, relative to the manifest's)."""
    entry: dict = {"name": f"uv-{project.rstrip('/').rsplit('/', 1)[-1].strip('.') or 'project'}",
                   "kind": KIND.name, "why": why, "project": project}
    if gate:
        entry["gate"] = gate
    if not install_project:
        entry["install_project"] = False
    return entry
