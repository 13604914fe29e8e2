"""apt steps: Debian packages, each pinned to an exact version with a why.

The building block of kind `apt`:
- manifest: an AptStep of DebianPackages (name, version, why). Names and
  versions follow Debian policy; a package is listed once in the whole manifest.
  `debs: [{name, version, url, sha256, why}]` installs .deb files downloaded
  from a URL (the nsight .deb), `sources: [{name, uris, suites, components,
  key: {url, sha256, fingerprint}, why}]` adds apt sources (NVIDIA's CUDA
  repository) whose signing key is pinned by its bytes and its fingerprint
  (checked on the host, steps/openpgp.py) and named by `Signed-By`, `hold: [name]` marks packages held after the
  install, and `remove: [{name, why}]` purges packages of the base first (held
  ones too: the base's held cuDNN);
- host: `build` downloads each .deb into the content-addressed cache,
  verifies its sha256 (a mismatch fails naming both digests) and stages it in
  the context's debs/<step>/ (``stage``); each .deb's url and sha256 join the
  image's identity (section `debs`) and its SBOM;
- plan: it names no Python distributions (Step.packages is empty);
- effect: none on the Python environment; what it installs is named for the report;
- lock: no part (the pins are in the manifest, which the image's identity hashes);
- partial: templates/steps/apt.j2, one RUN of
  `apt-get update && apt-get install -y --no-install-recommends name=version ...`
  that leaves no package lists or archives in its layer;
- invariant: after the last step, `dpkg-query` finds every package (and every
  .deb) installed at its pin, every removed one not installed and every held
  one held, or the build fails naming the package, the expected and the found
  version (or state). After the last step, not after its own: a later step that moves a
  Debian package fails the build too, and apt itself takes a pin loosely
  (`name=VERSION` matches the version whatever its letter case).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..model.reader import Reader, StepReading
from ..model.source import show
from .base import ADOPT_APT_INSTALL, Effect, KindView, SbomPart, Staging, StagingError, StepKind, read_unique
from .downloads import stage_file
from .openpgp import KeyFileError, armored, fingerprint

if TYPE_CHECKING:
    from ..plan import Plan, Step

# Debian policy 5.6.1: lowercase letters, digits, '+', '-', '.'; two characters at
# least, the first a letter or digit.
_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
# Debian policy 5.6.12: [epoch:]upstream_version[-debian_revision]. The epoch is an
# unsigned integer; the upstream version starts with a digit and holds letters,
# digits and '.', '+', '~' (and '-' only when a revision follows); the revision
# holds letters, digits and '.', '+', '~'.
_EPOCH = re.compile(r"^[0-9]+$")
_UPSTREAM = re.compile(r"^[0-9][A-Za-z0-9.+~-]*$")
_REVISION = re.compile(r"^[A-Za-z0-9.+~]+$")
_DEB_URL = re.compile(r"^https?://[A-Za-z0-9][A-Za-z0-9._~:@%+/=-]*\.deb$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
MOUNT = "/tmp/pinwheel-debs"  # where the build mounts the context's debs/<step>/
_URI = re.compile(r"^https?://[A-Za-z0-9][A-Za-z0-9._~:@%+/=-]*$")
_SUITE = re.compile(r"^[A-Za-z0-9_./-]{1,100}$")
_COMPONENTS = re.compile(r"^[a-z0-9-]+( [a-z0-9-]+)*$")
_SOURCE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
_FINGERPRINT = re.compile(r"^([0-9A-F]{40}|[0-9A-F]{64})$")
KEYRINGS = "/etc/apt/keyrings"


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str
    why: str
    line: int

    @property
    def pin(self) -> str:
        """What apt-get install is given: name=version."""
        return f"{self.name}={self.version}"


@dataclass(frozen=True)
class Deb:
    """A .deb file from a URL, pinned by its sha256; installed as the package name at version."""

    name: str
    version: str
    url: str
    sha256: str
    why: str
    line: int

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[1]


@dataclass(frozen=True)
class AptSource:
    """An apt source beyond the base's, its signing key pinned by sha256 and fingerprint."""

    name: str
    uris: str
    suites: str
    components: str
    key_url: str
    key_sha256: str
    fingerprint: str  # upper-case hex, no spaces
    why: str
    line: int

    @property
    def keyring(self) -> str:
        return f"{KEYRINGS}/pinwheel-{self.name}.asc"

    @property
    def lines(self) -> tuple[str, ...]:
        """Its deb822 .sources file."""
        return ("Types: deb", f"URIs: {self.uris}", f"Suites: {self.suites}",
                *((f"Components: {self.components}",) if self.components else ()), f"Signed-By: {self.keyring}")


@dataclass(frozen=True)
class Removed:
    name: str
    why: str
    line: int


@dataclass(frozen=True)
class AptStep:
    kind: ClassVar[str] = "apt"

    name: str
    why: str
    gate: str | None
    packages: tuple[DebianPackage, ...]
    line: int
    debs: tuple[Deb, ...] = ()
    hold: tuple[str, ...] = ()
    remove: tuple[Removed, ...] = ()
    sources: tuple[AptSource, ...] = ()


def context_dir(step_name: str) -> str:
    return f"debs/{step_name}"


def context_name(index: int, deb: Deb) -> str:
    return f"{index:02d}-{deb.filename}"


def source_key_name(source: AptSource) -> str:
    """A source's signing key in the context's debs/<step>/."""
    return f"key-{source.name}.asc"


def debian_version_problem(version: str) -> str | None:
    """Why a string is not a Debian version under policy 5.6.12, or None if it is one."""
    epoch, colon, rest = version.partition(":")
    if not colon:
        epoch, rest = "", version
    elif not _EPOCH.match(epoch):
        return f"its epoch {epoch!r} is not an unsigned integer"
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    elif not _REVISION.match(revision):
        return f"its revision {revision!r} may hold only letters, digits, '.', '+' and '~'"
    if not _UPSTREAM.match(upstream):
        return (f"its upstream version {upstream!r} must start with a digit and hold only letters, digits, "
                "'.', '+', '~' (and '-' where a revision follows)")
    return None


def _name(r: Reader, node: Any, key: str) -> str:
    name = r.string(node, key)
    if not _NAME.match(name):
        raise r.fail(node.line, key, f"{name!r} is not a Debian package name (lowercase letters, "
                                     "digits, '+', '-', '.'; at least two, the first a letter or digit)")
    return name


def _deb(r: Reader, node: Any, key: str) -> Deb:
    m = r.mapping(node, key, {"name", "version", "url", "sha256", "why"}, {"name", "version", "url", "sha256", "why"}).value
    pkg = _package(r, node, key, {"url", "sha256"})
    url = r.string(m["url"], f"{key}.url")
    if not _DEB_URL.fullmatch(url):
        raise r.fail(m["url"].line, f"{key}.url", f"{show(url)} is not a URL of a .deb file (https:// or http://, "
                                                  "no spaces, quotes or query)")
    sha256 = r.string(m["sha256"], f"{key}.sha256")
    if not _SHA256.fullmatch(sha256):
        raise r.fail(m["sha256"].line, f"{key}.sha256", f"{show(sha256)} is not a sha256 (64 lowercase hex digits)")
    return Deb(pkg.name, pkg.version, url, sha256, pkg.why, node.line)


def _source(r: Reader, node: Any, key: str) -> AptSource:
    m = r.mapping(node, key, {"name", "uris", "suites", "components", "key", "why"},
                  {"name", "uris", "suites", "key", "why"}).value
    name = r.string(m["name"], f"{key}.name", _SOURCE_NAME, "source name (lowercase letters, digits, '-')")
    uris = r.string(m["uris"], f"{key}.uris", _URI, "http(s) URI without spaces, quotes or query")
    suites = r.string(m["suites"], f"{key}.suites", _SUITE, "suite (letters, digits, '_', '.', '/', '-')")
    components = r.string(m["components"], f"{key}.components", _COMPONENTS,
                          "list of components (lowercase words, one space apart)") if "components" in m else ""
    k = r.mapping(m["key"], f"{key}.key", {"url", "sha256", "fingerprint"}, {"url", "sha256", "fingerprint"}).value
    url = r.string(k["url"], f"{key}.key.url", _URI, "http(s) URL of the key file")
    sha256 = r.string(k["sha256"], f"{key}.key.sha256")
    if not _SHA256.fullmatch(sha256):
        raise r.fail(k["sha256"].line, f"{key}.key.sha256", f"{show(sha256)} is not a sha256 (64 lowercase hex digits)")
    fpr = r.string(k["fingerprint"], f"{key}.key.fingerprint").replace(" ", "").upper()
    if not _FINGERPRINT.fullmatch(fpr):
        raise r.fail(k["fingerprint"].line, f"{key}.key.fingerprint", "is not an OpenPGP fingerprint (40 hex digits, "
                                                                      "or 64 for a v6 key; spaces allowed)")
    return AptSource(name, uris, suites, components, url, sha256, fpr, r.string(m["why"], f"{key}.why"), node.line)


def _removed(r: Reader, node: Any, key: str) -> Removed:
    m = r.mapping(node, key, {"name", "why"}, {"name", "why"}).value
    return Removed(_name(r, m["name"], f"{key}.name"), r.string(m["why"], f"{key}.why"), node.line)


def _package(r: Reader, node: Any, key: str, more: set[str] = frozenset()) -> DebianPackage:
    m = r.mapping(node, key, {"name", "version", "why"} | more, {"name", "version", "why"}).value
    name = _name(r, m["name"], f"{key}.name")
    version = r.string(m["version"], f"{key}.version")
    problem = debian_version_problem(version)
    if problem:
        raise r.fail(m["version"].line, f"{key}.version", f"{version!r} is not a Debian version "
                                                          f"([epoch:]upstream[-revision]): {problem}")
    return DebianPackage(name, version, r.string(m["why"], f"{key}.why"), node.line)


@dataclass(frozen=True)
class Check:
    """One thing the invariant checks after the last step: a package at its pin, gone, or held."""

    what: str  # "pin" | "gone" | "held"
    name: str
    version: str = ""


@dataclass(frozen=True)
class AptView(KindView):
    """An apt step as its partial reads it."""

    spec: AptStep

    @property
    def packages(self) -> tuple[DebianPackage, ...]:
        return self.spec.packages

    @property
    def mismatch_prefix(self) -> str:
        return f"pinwheel: ERROR: apt step {self.step.name}:"

    @property
    def mount(self) -> str:
        return f"{MOUNT}/{self.step.name}"

    @property
    def context_dir(self) -> str:
        return context_dir(self.step.name)

    @property
    def debs(self) -> tuple[dict, ...]:
        return tuple({"deb": d, "file": f"{self.mount}/{context_name(i, d)}",
                      "mismatch": f"pinwheel: ERROR: apt step {self.step.name}: {d.url}: sha256 mismatch: expected "
                                  f"{d.sha256}, found"} for i, d in enumerate(self.spec.debs))

    @property
    def installs(self) -> bool:
        return bool(self.spec.packages or self.spec.debs)

    @property
    def mounts_context(self) -> bool:
        return bool(self.spec.debs or self.spec.sources)

    @property
    def sources(self) -> tuple[dict, ...]:
        return tuple({"source": src, "file": f"{self.mount}/{source_key_name(src)}",
                      "list": f"/etc/apt/sources.list.d/pinwheel-{src.name}.sources",
                      "mismatch": f"pinwheel: ERROR: apt step {self.step.name}: {src.key_url}: sha256 mismatch: "
                                  f"expected {src.key_sha256}, found"} for src in self.spec.sources)


class Apt(StepKind):
    name = "apt"
    noun = "apt step"

    def adopted_entry(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, adopted_entry below: asked through the kind, so import names no kind module."""
        return adopted_entry(*args, **kwargs)

    def deb_url(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, deb_url below: asked through the kind, so import names no kind module."""
        return deb_url(*args, **kwargs)

    def source_url(self, *args: Any, **kwargs: Any) -> Any:
        """import's builder, source_url below: asked through the kind, so import names no kind module."""
        return source_url(*args, **kwargs)

    def adopted(self, *args: Any, **kwargs: Any) -> "AdoptedApt":
        """import's apt findings of one RUN (AdoptedApt below), made through the kind."""
        return AdoptedApt(*args, **kwargs)

    adopts = ADOPT_APT_INSTALL

    def read(self, node: Any, key: str, reading: StepReading) -> AptStep:
        r = reading.reader
        m = r.mapping(node, key, {"name", "why", "gate", "packages", "debs", "hold", "remove", "sources"}
                      | reading.common_keys, {"name", "why"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        if not any(k in m for k in ("packages", "debs", "remove")):
            raise r.fail(node.key_line, f"{key}.packages", "an apt step needs `packages`, `debs` or `remove`")
        packages = read_unique(reading, m["packages"], key, self.name, _package, "listed twice") \
            if "packages" in m else []
        claimed: dict[str, int] = reading.claimed(self.name)
        debs = []
        for j, item in enumerate(r.sequence(m["debs"], f"{key}.debs", 1) if "debs" in m else ()):
            deb = _deb(r, item, f"{key}.debs[{j}]")
            if deb.name in claimed:
                raise r.fail(deb.line, f"{key}.debs[{j}].name", f"{deb.name} is listed twice (first on line "
                                                                f"{claimed[deb.name]})")
            claimed[deb.name] = deb.line
            debs.append(deb)
        remove = tuple(_removed(r, item, f"{key}.remove[{j}]")
                       for j, item in enumerate(r.sequence(m["remove"], f"{key}.remove", 1))) if "remove" in m else ()
        for j, gone in enumerate(remove):
            if gone.name in claimed:
                raise r.fail(gone.line, f"{key}.remove[{j}].name", f"{gone.name} is installed by the manifest (line "
                                                                   f"{claimed[gone.name]}) and removed here")
        mine = {p.name for p in packages} | {d.name for d in debs}
        hold = []
        for j, item in enumerate(r.sequence(m["hold"], f"{key}.hold", 1) if "hold" in m else ()):
            held = _name(r, item, f"{key}.hold[{j}]")
            if held not in mine:
                raise r.fail(item.line, f"{key}.hold[{j}]", f"{held} is not installed by this step: hold the "
                                                           "packages or .debs it pins")
            hold.append(held)
        sources = tuple(_source(r, item, f"{key}.sources[{j}]")
                        for j, item in enumerate(r.sequence(m["sources"], f"{key}.sources", 1))) \
            if "sources" in m else ()
        return AptStep(name, r.string(m["why"], f"{key}.why"), gate, tuple(packages), node.line, tuple(debs),
                       tuple(hold), remove, sources)

    def effect(self, step: Step) -> Effect:
        """No Python distribution; the Debian packages, named for the report."""
        spec = step.spec
        assert isinstance(spec, AptStep)
        if not step.active:
            return Effect()
        return Effect(outside=tuple(f"apt source {src.name}: {src.uris} {src.suites}, key {src.fingerprint}"
                                    for src in spec.sources)
                      + tuple(f"apt {p.pin}" for p in spec.packages)
                      + tuple(f"apt {d.name}={d.version} from {d.url} (sha256 {d.sha256[:12]})" for d in spec.debs)
                      + tuple(f"apt hold {n}" for n in spec.hold)
                      + tuple(f"apt remove {g.name}: {g.why}" for g in spec.remove))

    def invariant(self, step: Step) -> tuple[Check, ...]:
        """After the last step: dpkg finds every package and .deb at its pin, every removed one gone, every
        held one held."""
        spec = step.spec
        assert isinstance(spec, AptStep)
        return (tuple(Check("pin", p.name, p.version) for p in spec.packages)
                + tuple(Check("pin", d.name, d.version) for d in spec.debs)
                + tuple(Check("gone", g.name) for g in spec.remove)
                + tuple(Check("held", n) for n in spec.hold))

    def view(self, step: Step) -> AptView:
        assert isinstance(step.spec, AptStep)
        return AptView(step, step.spec, self)

    identity_section = "debs"

    def stage(self, step: Step, staging: Staging) -> None:
        """Each .deb verified into the context's debs/<step>/ (the directory whatever the gates say)."""
        spec = step.spec
        assert isinstance(spec, AptStep)
        if not (spec.debs or spec.sources):
            return
        directory = staging.context / context_dir(step.name)
        directory.mkdir(parents=True, exist_ok=True)
        if not step.active:
            return
        for i, d in enumerate(spec.debs):
            stage_file(d.url, d.sha256, staging.cache, directory / context_name(i, d))
        for src in spec.sources:  # the pinned bytes, and the key the fingerprint names
            data = stage_file(src.key_url, src.key_sha256, staging.cache, directory / source_key_name(src)).read_bytes()
            try:
                found = fingerprint(data)
            except KeyFileError as exc:
                raise StagingError(f"apt step {step.name}: {src.key_url} is not an OpenPGP public key: {exc}") from None
            if found != src.fingerprint:
                raise StagingError(f"apt step {step.name}: {src.key_url}: fingerprint mismatch: expected "
                                   f"{src.fingerprint}, found {found}")
            if not armored(data):
                raise StagingError(f"apt step {step.name}: {src.key_url} is a binary key: pin its armored export "
                                   "(gpg --armor --export), which apt reads as a .asc keyring")

    def identity(self, step: Step, plan: Plan, root: Path) -> tuple[dict, ...]:
        assert isinstance(step.spec, AptStep)
        if not step.active:
            return ()
        return tuple({"step": step.name, "name": d.name, "version": d.version, "url": d.url, "sha256": d.sha256}
                     for d in step.spec.debs) + tuple(
            {"step": step.name, "source": src.name, "url": src.key_url, "sha256": src.key_sha256,
             "fingerprint": src.fingerprint} for src in step.spec.sources)

    def sbom(self, step: Step, entry: dict) -> tuple[SbomPart, ...]:
        if "fingerprint" in entry:  # a source's signing key
            return (SbomPart("file", entry["url"].rsplit("/", 1)[1], f"apt-key:{step.name}:{entry['source']}", None,
                             (("sha256", entry["sha256"]),),
                             (("step", step.name), ("source", "apt-key"), ("fingerprint", entry["fingerprint"])),
                             ("distribution", entry["url"])),)
        return (SbomPart("file", entry["url"].rsplit("/", 1)[1], f"deb:{step.name}:{entry['name']}", None,
                         (("sha256", entry["sha256"]),),
                         (("step", step.name), ("source", "deb"), ("package", f"{entry['name']}={entry['version']}")),
                         ("distribution", entry["url"])),)


KIND = Apt()


@dataclass
class AdoptedApt:
    """What `import` found for one apt step: packages (name, version or None: unpinned), .debs (name, version,
    url), holds, removals and sources ({name, uris, suites, components, key_url})."""

    packages: list[tuple[str, str | None]]
    debs: list[tuple[str, str, str]]
    hold: list[str]
    remove: list[str]
    sources: list[dict]


def adopted_entry(found: AdoptedApt, why: str, gate: str | None, todo_version: str, zero_sha256: str
                  ) -> tuple[dict, list[tuple[str, str, tuple]]]:
    """The manifest entry `import` writes, and its TODOs as (key, what, how --pin finds it): an unpinned
    package gets a placeholder version, a .deb and a source's key a placeholder sha256, a key a placeholder
    fingerprint."""
    first = next(iter([n for n, _ in found.packages] + [d[0] for d in found.debs] + found.remove), "")
    entry: dict = {"name": f"apt-{first}" if first else "", "kind": KIND.name, "why": why}
    if gate:
        entry["gate"] = gate
    todos: list[tuple[str, str, tuple]] = []
    if found.sources:
        entry["sources"] = [{"name": s["name"], "uris": s["uris"], "suites": s["suites"],
                             **({"components": s["components"]} if s.get("components") else {}),
                             "key": {"url": s["key_url"], "sha256": zero_sha256, "fingerprint": "0" * 40},
                             "why": why} for s in found.sources]
        for i, s in enumerate(found.sources):
            todos.append((f"sources[{i}].key.sha256", f"the sha256 of the signing key {s['key_url']}",
                          ("asset", s["key_url"])))
            todos.append((f"sources[{i}].key.fingerprint", f"the fingerprint of {s['key_url']} (`gpg --show-keys "
                          "KEYFILE` prints it), checked against its publisher's", ()))
    if found.remove:
        entry["remove"] = [{"name": n, "why": why} for n in found.remove]
    if found.packages:
        entry["packages"] = [{"name": n, "version": v or todo_version, "why": why} for n, v in found.packages]
        todos += [(f"packages[{i}].version", f"{n} is unpinned in the Dockerfile: write the version "
                   "`apt-cache policy` shows for the base", ()) for i, (n, v) in enumerate(found.packages) if not v]
    if found.debs:
        entry["debs"] = [{"name": n, "version": v, "url": u, "sha256": zero_sha256, "why": why}
                         for n, v, u in found.debs]
        todos += [(f"debs[{i}].sha256", f"the sha256 of {u} (the .deb the Dockerfile downloaded unchecked)",
                   ("asset", u)) for i, (_, _, u) in enumerate(found.debs)]
    if found.hold:
        entry["hold"] = list(found.hold)
    return entry, todos


def deb_url(url: str) -> bool:
    return bool(_DEB_URL.fullmatch(url))


def source_url(url: str) -> bool:
    return bool(_URI.fullmatch(url))
