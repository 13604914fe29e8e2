"""run steps: a shell script the resolver does not judge (a make build, a binary download, a symlink), with a why.

The building block of kind `run` (HPC Container Maker's `shell` block is the model):
- manifest: a RunStep: `script` (run with bash `set -euo pipefail`), `env`
  (name -> value, exported for the script), `workdir` (made if missing, the
  script's directory), `downloads: [{url, sha256, dest}]`, `builder` (an image
  reference, or `base` for the variant's base: the script runs in a stage of
  its own) with `outputs` (absolute paths copied from that stage into the
  image), `cache` (paths kept in BuildKit cache mounts across builds, in no
  layer) and `verify: {paths: [...], command: ...}`;
- plan: it names no Python distributions;
- effect: none the resolver can judge: the report lists the step as opaque
  ("not judged by the resolver"), never hides it, with what the audit's RUN
  rules find in its script (``scripts``); the invariant's pins and
  `pip check` still see whatever it did to the Python environment;
- host: `build` downloads each file into the content-addressed cache and
  verifies it (a mismatch fails naming the URL, the expected and the found
  digest) and stages it in the context's runs/<step>/ (``stage``);
- partial: templates/steps/run.j2. The RUN that runs the script (in the
  builder stage `run-<step>` when there is a builder, else in the image) first
  checks each download's sha256 again and copies it to its `dest`; never
  `curl | sh`. The script is written out line by line, each line shell-quoted;
  with a builder, one RUN in the image copies each output from the stage;
- identity: the script's sha256, each download's url and sha256, the builder
  and the outputs (section `runs`); each download is an SBOM file component;
- invariant: after the last step, every `verify.paths` entry exists and
  `verify.command` exits 0, or the build fails naming the step.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..model.reader import Reader, StepReading
from ..model.source import BAD_CATEGORIES, Scalar, show
from .base import ADOPT_SHELL, Effect, KindView, SbomPart, Staging, StepKind
from .downloads import stage_file

if TYPE_CHECKING:
    from ..plan import Plan, Step

_PATH = re.compile(r"^/(?:[A-Za-z0-9_.+@-]+/?)*$")
_URL = re.compile(r"^https?://[A-Za-z0-9][A-Za-z0-9._~:@%+/=-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_IMAGE_REF = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")
MAX_SCRIPT = 64 << 10
MOUNT = "/tmp/pinwheel-run"  # where a step's downloads are mounted, and its script written
BASE = "base"  # `builder: base`: the variant's base image


@dataclass(frozen=True)
class Download:
    url: str
    sha256: str
    dest: str  # absolute path the file is copied to before the script runs
    line: int

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[1]


@dataclass(frozen=True)
class Verify:
    paths: tuple[str, ...]
    command: str | None


@dataclass(frozen=True)
class RunStep:
    kind: ClassVar[str] = "run"

    name: str
    why: str
    gate: str | None
    script: str
    env: tuple[tuple[str, str], ...]
    workdir: str | None
    downloads: tuple[Download, ...]
    builder: str | None  # an image reference, or BASE; None: the script runs in the image itself
    outputs: tuple[str, ...]
    cache: tuple[str, ...]
    verify: Verify | None
    line: int

    @property
    def script_sha256(self) -> str:
        return hashlib.sha256(self.script.encode()).hexdigest()


def context_dir(step_name: str) -> str:
    """Where the build context holds a step's downloads (relative to the context)."""
    return f"runs/{step_name}"


def context_name(index: int, download: Download) -> str:
    """A download's file name in the context, by position: two downloads may share a base name."""
    return f"{index:02d}-{download.filename}"


def _path(r: Reader, node: Any, key: str) -> str:
    path = r.string(node, key)
    if not _PATH.match(path) or any(part in (".", "..") for part in path.split("/")):
        raise r.fail(node.line, key, f"{show(path)} is not an absolute path of letters, digits and '_.+@-' "
                                     "(no '.' or '..' parts)")
    return path.rstrip("/") or "/"


def _script(r: Reader, node: Any, key: str) -> str:
    if not isinstance(node, Scalar) or not isinstance(node.value, str) or not node.value.strip():
        raise r.fail(node.line, key, "must be a non-empty string (a YAML block `|` for several lines)")
    text = node.value
    if len(text.encode()) > MAX_SCRIPT:
        raise r.fail(node.line, key, f"is {len(text.encode())} bytes; at most {MAX_SCRIPT} (keep a long build in "
                                     "a file the script downloads)")
    bad = next((c for c in text if c not in "\n\t" and unicodedata.category(c) in BAD_CATEGORIES), None)
    if bad is not None:
        raise r.fail(node.line, key, f"holds the control character U+{ord(bad):04X}; only printable text, tabs "
                                     "and newlines are allowed")
    return text.rstrip("\n")


def _download(r: Reader, node: Any, key: str) -> Download:
    m = r.mapping(node, key, {"url", "sha256", "dest"}, {"url", "sha256", "dest"}).value
    url = r.string(m["url"], f"{key}.url")
    if not _URL.fullmatch(url) or url.endswith("/"):
        raise r.fail(m["url"].line, f"{key}.url", f"{show(url)} is not a URL of a file this kind downloads "
                                                  "(https:// or http://, no spaces, quotes or query)")
    sha256 = r.string(m["sha256"], f"{key}.sha256")
    if not _SHA256.fullmatch(sha256):
        raise r.fail(m["sha256"].line, f"{key}.sha256", f"{show(sha256)} is not a sha256 (64 lowercase hex digits)")
    return Download(url, sha256, _path(r, m["dest"], f"{key}.dest"), node.line)


def _env(r: Reader, node: Any, key: str) -> tuple[tuple[str, str], ...]:
    m = r.mapping(node, key, set(node.value) if isinstance(getattr(node, "value", None), dict) else set()).value
    out = []
    for name, value in m.items():
        if not isinstance(name, str) or not _VAR.match(name):
            raise r.fail(node.lines[name], f"{key}.{name}", f"{show(str(name))} is not an environment variable name")
        out.append((name, r.string(value, f"{key}.{name}")))
    return tuple(out)


def _verify(r: Reader, node: Any, key: str) -> Verify:
    m = r.mapping(node, key, {"paths", "command"}).value
    if not m:
        raise r.fail(node.line, key, "needs `paths`, `command` or both")
    paths = tuple(_path(r, p, f"{key}.paths[{i}]") for i, p in enumerate(r.sequence(m["paths"], f"{key}.paths", 1))) \
        if "paths" in m else ()
    return Verify(paths, r.string(m["command"], f"{key}.command") if "command" in m else None)


def _paths(r: Reader, node: Any, key: str) -> tuple[str, ...]:
    return tuple(_path(r, p, f"{key}[{i}]") for i, p in enumerate(r.sequence(node, key, 1)))


@dataclass(frozen=True)
class RunView(KindView):
    """A run step as its partial reads it."""

    spec: RunStep

    @property
    def stage(self) -> str:
        """The builder stage's name; only a step with a builder has one (Dockerfile.j2 asks `is defined`)."""
        if self.spec.builder is None:
            raise AttributeError("stage")
        return f"run-{self.step.name}"

    @property
    def stage_from(self) -> str:
        return "${BASE}" if self.spec.builder == BASE else str(self.spec.builder)

    @property
    def context_dir(self) -> str:
        return context_dir(self.step.name)

    @property
    def mount(self) -> str:
        return f"{MOUNT}/{self.step.name}/downloads"

    @property
    def script_file(self) -> str:
        return f"{MOUNT}-{self.step.name}.sh"

    @property
    def mounts(self) -> tuple[str, ...]:
        """The script RUN's mounts (cache paths, the downloads), one per line in the partial: the paths are
        checked to hold no character a Dockerfile or shell gives a meaning to."""
        mounts = [f"--mount=type=cache,target={c},sharing=locked" for c in self.spec.cache]
        if self.spec.downloads:
            mounts.append(f"--mount=type=bind,source={self.context_dir},target={self.mount}")
        return tuple(mounts)

    @property
    def output_mount(self) -> str:
        return f"{MOUNT}/{self.step.name}/from-builder"

    @property
    def script_lines(self) -> tuple[str, ...]:
        return tuple(self.spec.script.split("\n"))

    @property
    def downloads(self) -> tuple[dict, ...]:
        return tuple({
            "download": d,
            "file": f"{self.mount}/{context_name(i, d)}",
            "dest_dir": d.dest.rsplit("/", 1)[0] or "/",
            "mismatch": f"pinwheel: ERROR: run step {self.step.name}: {d.url}: sha256 mismatch: expected {d.sha256}, "
                        "found",
        } for i, d in enumerate(self.spec.downloads))

    @property
    def outputs(self) -> tuple[dict, ...]:
        return tuple({"path": p, "parent": p.rsplit("/", 1)[0] or "/", "from": f"{self.output_mount}{p}",
                      "missing": f"pinwheel: ERROR: run step {self.step.name}: output {p} is not in its builder "
                                 "stage"} for p in self.spec.outputs)

    @property
    def no_bash_message(self) -> str:
        return f"pinwheel: ERROR: run step {self.step.name}: bash is not in the image it runs in"

    @property
    def failed_message(self) -> str:
        return f"pinwheel: ERROR: run step {self.step.name}: its script failed with exit"

    @property
    def verify_path_prefix(self) -> str:
        return f"pinwheel: ERROR: run step {self.step.name}: verify: missing"

    @property
    def verify_command_message(self) -> str:
        return f"pinwheel: ERROR: run step {self.step.name}: verify: its command failed with exit"


class Run(StepKind):
    name = "run"
    adopts = ADOPT_SHELL
    noun = "run step"

    def adopted_entry(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, adopted_entry below: asked through the kind, so import names no kind module."""
        return adopted_entry(*args, **kwargs)

    def expressible_path(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, expressible_path below: asked through the kind, so import names no kind module."""
        return expressible_path(*args, **kwargs)

    def expressible_url(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, expressible_url below: asked through the kind, so import names no kind module."""
        return expressible_url(*args, **kwargs)

    def read(self, node: Any, key: str, reading: StepReading) -> RunStep:
        r = reading.reader
        own = {"name", "why", "gate", "script", "env", "workdir", "downloads", "builder", "outputs", "cache", "verify"}
        m = r.mapping(node, key, own | reading.common_keys, {"name", "why", "script"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        builder = None
        if "builder" in m:
            builder = r.string(m["builder"], f"{key}.builder", _IMAGE_REF,
                               f"builder (an image reference, or `{BASE}` for the variant's base)")
        outputs = _paths(r, m["outputs"], f"{key}.outputs") if "outputs" in m else ()
        if builder is not None and not outputs:
            raise r.fail(m["builder"].line, f"{key}.outputs", "a step with a builder needs `outputs`: the paths the "
                                                              "image takes from its stage")
        if builder is None and outputs:
            raise r.fail(m["outputs"].line, f"{key}.outputs", "`outputs` are copied from a builder stage: set "
                                                              f"`builder` (an image, or `{BASE}`)")
        downloads = tuple(_download(r, item, f"{key}.downloads[{j}]")
                          for j, item in enumerate(r.sequence(m["downloads"], f"{key}.downloads", 1))) \
            if "downloads" in m else ()
        return RunStep(
            name=name, why=r.string(m["why"], f"{key}.why"), gate=gate, script=_script(r, m["script"], f"{key}.script"),
            env=_env(r, m["env"], f"{key}.env") if "env" in m else (),
            workdir=_path(r, m["workdir"], f"{key}.workdir") if "workdir" in m else None,
            downloads=downloads, builder=builder, outputs=outputs,
            cache=_paths(r, m["cache"], f"{key}.cache") if "cache" in m else (),
            verify=_verify(r, m["verify"], f"{key}.verify") if "verify" in m else None,
            line=node.line,
        )

    def effect(self, step: Step) -> Effect:
        """Nothing the resolver can judge; the step named for the report as opaque."""
        assert isinstance(step.spec, RunStep)
        where = f" in builder {step.spec.builder}, copying {', '.join(step.spec.outputs)}" if step.spec.builder else ""
        got = f", {len(step.spec.downloads)} checked download(s)" if step.spec.downloads else ""
        return Effect(outside=(f"not judged by the resolver (a script{where}{got}): {step.why}",)
                      if step.active else ())

    def scripts(self, step: Step) -> tuple[tuple[int, str], ...]:
        """Its script, as the partial runs it (bash, `set -euo pipefail` first), for the audit's rules."""
        assert isinstance(step.spec, RunStep)
        return ((step.spec.line, "set -euo pipefail\n" + step.spec.script),) if step.active else ()

    def invariant(self, step: Step) -> tuple[Verify, ...]:
        assert isinstance(step.spec, RunStep)
        return (step.spec.verify,) if step.spec.verify else ()

    def view(self, step: Step) -> RunView:
        assert isinstance(step.spec, RunStep)
        return RunView(step, step.spec, self)

    identity_section = "runs"

    def stage(self, step: Step, staging: Staging) -> None:
        """Each download verified into the context's runs/<step>/; the directory whatever the gates say."""
        assert isinstance(step.spec, RunStep)
        directory = staging.context / context_dir(step.name)
        directory.mkdir(parents=True, exist_ok=True)
        if step.active:
            for i, d in enumerate(step.spec.downloads):
                stage_file(d.url, d.sha256, staging.cache, directory / context_name(i, d))

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        spec = step.spec
        assert isinstance(spec, RunStep)
        if not step.active:
            return ()
        return ({"step": step.name, "script_sha256": spec.script_sha256, "builder": spec.builder,
                 "outputs": list(spec.outputs), "downloads": [{"url": d.url, "sha256": d.sha256, "dest": d.dest}
                                                              for d in spec.downloads]},)

    def sbom(self, step: Step, entry: dict) -> tuple[SbomPart, ...]:
        return tuple(SbomPart("file", d["dest"], f"run:{step.name}:{i}", None, (("sha256", d["sha256"]),),
                              (("step", step.name), ("source", "run")), ("distribution", d["url"]))
                     for i, d in enumerate(entry["downloads"]))


KIND = Run()


def adopted_entry(name: str, script: str, why: str, downloads: list[tuple[str, str]], env: dict[str, str],
                  cache: list[str], gate: str | None, zero_sha256: str) -> tuple[dict, list[tuple[str, str, tuple]]]:
    """The manifest entry `import` writes for shell commands no other kind expresses, and its TODOs as
    (key, what, how --pin finds it): each download (url, dest) has a placeholder sha256 until one is written."""
    entry: dict = {"name": name, "kind": KIND.name, "why": why, "script": script}
    if gate:
        entry["gate"] = gate
    if env:
        entry["env"] = dict(env)
    if cache:
        entry["cache"] = list(cache)
    todos = []
    if downloads:
        entry["downloads"] = [{"url": url, "sha256": zero_sha256, "dest": dest} for url, dest in downloads]
        todos = [(f"downloads[{i}].sha256", f"the sha256 of {url} (the file the Dockerfile downloaded unchecked)",
                  ("asset", url)) for i, (url, _) in enumerate(downloads)]
    return entry, todos


def expressible_path(path: str) -> bool:
    """Whether a path can be a download's `dest`, a `workdir` or a `cache` path of a run step."""
    return bool(_PATH.match(path)) and not any(part in (".", "..") for part in path.split("/"))


def expressible_url(url: str) -> bool:
    return bool(_URL.fullmatch(url)) and not url.endswith("/")
