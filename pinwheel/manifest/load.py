"""The manifest's top level: load() and parse() build a validated Manifest.

Each section is read in turn (image, gates, variants, shared pins, then the
install steps), every value through a Reader, so the first problem found is
reported as file:line: key: message. Each step is read by its kind
(pinwheel/steps): `steps:` entries name theirs, and every entry of
`wheel_sets:`, the older spelling, is a wheel set.
"""
from __future__ import annotations

import hashlib
import re
import string
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..index.target import CONTAINER_MACHINES, container_platform
from ..model.manifest import GATE_ARCHES, GATE_VARIABLES, MANIFEST_VERSION, TAG_FIELDS, ArchSpec, Gate, ImageSpec, INSTALLERS, LAYERS, Manifest, \
    NamedIndex, SharedPin, StepSpec, Variant
from ..model.reader import STEP_NAME, Reader, StepReading, node_kind
from ..model.source import Node, Scalar, compose, read_text, show
from ..steps.registry import KINDS, kind_listed_as

TOP_KEYS = {"manifest_version", "image", "shared_pins", "gates", "variants", "steps", "wheel_sets", "todo",
            "indexes"}

_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,30}$")
_ARG_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
ENVIRONMENTS = ("venv", "base")
_REPOSITORY = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*$")
_PLATFORM = re.compile(r"^(manylinux_2_\d+|musllinux_1_\d+)_(x86_64|aarch64)$")
_ABS_PATH = re.compile(r"^/[A-Za-z0-9_./-]{1,200}$")
_GATE_EXPR = re.compile(r"^\s*(?P<var>[a-z]+)\s*(?P<spec>(==|!=|>=|<=|~=|>|<).*)$")
_PACKAGE_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)  # PEP 508


def load(path: Path | str) -> Manifest:
    """Read and validate the manifest at path (taken as given: relative stays relative)."""
    path = Path(path)
    text, sha256 = read_text(path)
    return parse(text, path, sha256=sha256)


def parse(text: str, path: Path | str = "wheels_manifest.yaml", sha256: str | None = None) -> Manifest:
    path = Path(path)
    r = Reader(path)
    root = r.mapping(
        compose(text, path),
        "(top)",
        TOP_KEYS,
        {"manifest_version", "image", "variants"},
    )
    top = root.value
    steps_key = _steps_key(r, root)
    mv = top["manifest_version"]
    if not isinstance(mv, Scalar) or mv.value != MANIFEST_VERSION or isinstance(mv.value, bool):
        raise r.fail(mv.line, "manifest_version", f"must be {MANIFEST_VERSION}")

    image = _image(r, top["image"])
    gates = _gates(r, top.get("gates"))
    variants = _variants(r, top["variants"])
    shared = _shared_pins(r, top.get("shared_pins"))
    indexes = _indexes(r, top.get("indexes"))
    steps = _steps(StepReading(r, steps_key, gates, shared, variants, indexes=indexes), top[steps_key])
    return Manifest(
        path=path,
        sha256=sha256 or hashlib.sha256(text.encode()).hexdigest(),
        image=image,
        shared_pins=shared,
        gates=gates,
        variants=variants,
        steps=steps,
        todos=_todos(r, top.get("todo")),
    )


def _todos(r: Reader, node: Any) -> tuple[str, ...]:
    """`todo:` — the values `import` could not know, each {at: the key, what: what to fill in}."""
    if node is None:
        return ()
    out = []
    for i, item in enumerate(r.sequence(node, "todo")):
        m = r.mapping(item, f"todo[{i}]", {"at", "what"}, {"at", "what"}).value
        out.append(f"{r.string(m['at'], f'todo[{i}].at')}: {r.string(m['what'], f'todo[{i}].what')}")
    return tuple(out)


def _steps_key(r: Reader, root: Node) -> str:
    """Which spelling of the step list the manifest uses: `steps`, or `wheel_sets` (wheel sets only)."""
    top = root.value
    if "steps" in top and "wheel_sets" in top:
        second = max(("steps", "wheel_sets"), key=lambda k: root.lines[k])
        raise r.fail(root.lines[second], second, "steps and wheel_sets are two spellings of one list; keep steps "
                                                 "(wheel_sets is the older one, for wheel sets only)")
    if "steps" in top:
        return "steps"
    if "wheel_sets" in top:
        return "wheel_sets"
    raise r.fail(root.key_line, "steps", "required key is missing (the install steps, in order; "
                                         "wheel_sets is its older spelling, for wheel sets only)")


def _steps(reading: StepReading, node: Any) -> tuple[StepSpec, ...]:
    """Every step in order, each read by its kind; then each kind's checks across its steps."""
    r = reading.reader
    every = kind_listed_as(reading.key)  # an older list's entries are all of its one kind
    entries: list[tuple[str, StepSpec]] = []
    for i, item in enumerate(r.sequence(node, reading.key, 1)):
        key = f"{reading.key}[{i}]"
        kind = every or KINDS[_kind_name(r, item, key, KINDS)]
        entries.append((key, kind.read(item, key, reading)))
    for name in KINDS:
        mine = [(key, spec) for key, spec in entries if spec.kind == name]
        if mine:  # a kind's checks look across its own steps only: with none there is nothing to check
            KINDS[name].check(mine, reading)
    return tuple(spec for _, spec in entries)


def _kind_name(r: Reader, node: Any, key: str, kinds: dict) -> str:
    """The `kind:` a `steps:` entry names; its other keys are its kind's to check."""
    if not isinstance(node, Node) or not isinstance(node.value, dict):
        raise r.fail(node.line, key, f"must be a mapping, got {node_kind(node)}")
    if "kind" not in node.value:
        raise r.fail(node.key_line, f"{key}.kind", f"required key is missing (kinds: {', '.join(kinds)})")
    name = r.string(node.value["kind"], f"{key}.kind")
    if name not in kinds:
        raise r.fail(node.value["kind"].line, f"{key}.kind",
                     f"unknown step kind {show(name)} (kinds: {', '.join(kinds)})")
    return name


def _image(r: Reader, node: Any) -> ImageSpec:
    m = r.mapping(node, "image", {"name", "repository", "title", "venv", "installer", "layers"},
                  {"name", "repository"}).value
    installer = r.string(m["installer"], "image.installer") if "installer" in m else "uv"
    if installer not in INSTALLERS:
        raise r.fail(m["installer"].line, "image.installer", f"{installer!r} is not one of: {', '.join(INSTALLERS)}")
    layers = r.string(m["layers"], "image.layers") if "layers" in m else "chained"
    if layers not in LAYERS:
        raise r.fail(m["layers"].line, "image.layers", f"{layers!r} is not one of: {', '.join(LAYERS)}")
    return ImageSpec(
        name=r.string(m["name"], "image.name", STEP_NAME, "image name (lowercase letters, digits, '-')"),
        repository=r.string(m["repository"], "image.repository", _REPOSITORY, "image repository"),
        title=r.string(m["title"], "image.title") if "title" in m else "",
        venv=r.string(m["venv"], "image.venv", _ABS_PATH, "absolute path") if "venv" in m else "/opt/venv",
        installer=installer,
        layers=layers,
    )


_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
_INDEX_URL = re.compile(r"^https?://[A-Za-z0-9][A-Za-z0-9._~:@%+/=-]*$")


def _indexes(r: Reader, node: Any) -> dict[str, NamedIndex]:
    """`indexes: {NAME: {url, why, flat}}`: the package indexes (or find-links pages) packages may name."""
    if node is None:
        return {}
    if not isinstance(node, Node) or not isinstance(node.value, dict):
        raise r.fail(node.line, "indexes", f"must be a mapping, got {node_kind(node)}")
    out: dict[str, NamedIndex] = {}
    for name, entry in node.value.items():
        key = f"indexes.{name}"
        if not isinstance(name, str) or not _INDEX_NAME.match(name):
            raise r.fail(node.lines[name], key, "index names are lowercase letters, digits and '-'")
        m = r.mapping(entry, key, {"url", "why", "flat"}, {"url", "why"}).value
        url = r.string(m["url"], f"{key}.url")
        if not _INDEX_URL.fullmatch(url):
            raise r.fail(m["url"].line, f"{key}.url", f"{show(url)} is not an http(s) URL without spaces, quotes "
                                                      "or query")
        flat = r.boolean(m["flat"], f"{key}.flat") if "flat" in m else False
        out[name] = NamedIndex(name, url, r.string(m["why"], f"{key}.why"), flat, node.lines[name])
    return out


def _gates(r: Reader, node: Any) -> dict[str, Gate]:
    if node is None:
        return {}
    if not isinstance(node, Node) or not isinstance(node.value, dict):
        raise r.fail(node.line, "gates", f"must be a mapping, got {node_kind(node)}")
    m = node
    gates: dict[str, Gate] = {}
    for name, g in m.value.items():
        key = f"gates.{name}"
        if not _ARG_NAME.match(name):
            raise r.fail(m.lines[name], key, "gate names are Dockerfile ARG names: UPPER_CASE letters, digits, '_'")
        gm = r.mapping(g, key, {"when", "why"}, {"when", "why"}).value
        when = r.string(gm["when"], f"{key}.when")
        match = _GATE_EXPR.match(when)
        if not match or match["var"] not in GATE_VARIABLES:
            raise r.fail(gm["when"].line, f"{key}.when",
                         f"{when!r} is not a gate expression like 'cuda >= 13' (variables: {', '.join(GATE_VARIABLES)})")
        if match["var"] == "arch":
            spec = _arch_spec(r, match["spec"], gm["when"].line, f"{key}.when")
        else:
            try:
                spec = SpecifierSet(match["spec"].replace(" ", ""))
            except InvalidSpecifier:
                raise r.fail(gm["when"].line, f"{key}.when",
                             f"{match['spec'].strip()!r} is not a PEP 440 specifier") from None
        gates[name] = Gate(name, when, match["var"], spec, r.string(gm["why"], f"{key}.why"), m.lines[name])
    return gates


def _arch_spec(r: Reader, text: str, line: int, key: str) -> ArchSpec:
    """`== arm64` or `!= amd64`: the container architecture, compared by name."""
    m = re.fullmatch(r"\s*(==|!=)\s*([a-z0-9]+)\s*", text)
    if not m or m.group(2) not in GATE_ARCHES:
        raise r.fail(line, key, f"arch gates read 'arch == arm64' or 'arch != amd64' "
                                f"(architectures: {', '.join(GATE_ARCHES)}), got {show(text.strip())}")
    return ArchSpec(m.group(1), m.group(2))


def _platforms(r: Reader, m: dict, key: str, platform: str) -> tuple[str, ...]:
    """`platforms: [linux/amd64, linux/arm64]`: the container platforms, each at `platform`'s libc level."""
    if "platforms" not in m:
        return ()
    out: list[str] = []
    for j, n in enumerate(r.sequence(m["platforms"], f"{key}.platforms", 1)):
        value = r.string(n, f"{key}.platforms[{j}]")
        if value not in CONTAINER_MACHINES:
            raise r.fail(n.line, f"{key}.platforms[{j}]", f"{show(value)} is not a container platform "
                                                          f"(platforms: {', '.join(CONTAINER_MACHINES)})")
        if value in out:
            raise r.fail(n.line, f"{key}.platforms[{j}]", f"{value} is listed twice (first as item {out.index(value)})")
        out.append(value)
    own = container_platform(platform)
    if own not in out:
        raise r.fail(m["platforms"].line, f"{key}.platforms",
                     f"must list {own}, the platform of {key}.platform ({platform}); the others are built "
                     "at its libc level")
    return tuple(out)


def _no_gpu_smoke(r: Reader, m: dict, key: str, platform: str) -> tuple[tuple[str, str], ...]:
    """`no_gpu_smoke: {linux/arm64: "why"}`: platforms published without a GPU smoke, and why."""
    if "no_gpu_smoke" not in m:
        return ()
    node = m["no_gpu_smoke"]
    if not isinstance(node, Node) or not isinstance(node.value, dict) or not node.value:
        raise r.fail(node.line, f"{key}.no_gpu_smoke", "must map a platform of `platforms` to why it has no GPU smoke")
    listed = _platforms(r, m, key, platform)
    out = []
    for name, why in node.value.items():
        where = f"{key}.no_gpu_smoke.{name}"
        if name not in listed:
            raise r.fail(node.lines[name], where, f"{name} is not one of the variant's platforms "
                                                  f"({', '.join(listed) or 'none listed'})")
        text = " ".join(r.string(why, where).split())
        if not text:
            raise r.fail(node.lines[name], where, "needs the reason (recorded in the published index)")
        out.append((name, text))
    return tuple(out)


def _variants(r: Reader, node: Any) -> dict[str, Variant]:
    if not isinstance(node, Node) or not isinstance(node.value, dict):
        raise r.fail(node.line, "variants", f"must be a mapping, got {node_kind(node)}")
    if not node.value:
        raise r.fail(node.line, "variants", "needs at least one variant")
    allowed = {"cuda", "torch", "python", "platform", "platforms", "base", "tag", "torch_index_env", "environment",
               "system_site_packages", "interpreter", "base_variant", "no_gpu_smoke"}
    optional = {"torch_index_env", "environment", "system_site_packages", "interpreter", "base_variant", "base",
                "platforms", "no_gpu_smoke"}
    out: dict[str, Variant] = {}
    for name, v in node.value.items():
        key = f"variants.{name}"
        if not _VARIANT_NAME.match(name):
            raise r.fail(node.lines[name], key, "variant names are lowercase letters, digits, '-' and '_'")
        m = r.mapping(v, key, allowed, allowed - optional).value
        python = r.version(m["python"], f"{key}.python")
        if len(Version(python).release) != 2:
            raise r.fail(m["python"].line, f"{key}.python", f"{python!r} must be MAJOR.MINOR, e.g. '3.12'")
        tag = r.string(m["tag"], f"{key}.tag")
        _check_tag(r, tag, m["tag"].line, f"{key}.tag")
        platform = r.string(m["platform"], f"{key}.platform", _PLATFORM, "wheel platform like manylinux_2_28_x86_64")
        out[name] = Variant(
            name=name,
            cuda=r.version(m["cuda"], f"{key}.cuda"),
            torch=r.version(m["torch"], f"{key}.torch"),
            python=python,
            platform=platform,
            platforms=_platforms(r, m, key, platform),
            no_gpu_smoke=_no_gpu_smoke(r, m, key, platform),
            base=_base(r, m, key, node.lines[name]),
            tag=tag,
            torch_index_env=(r.string(m["torch_index_env"], f"{key}.torch_index_env", _ENV_NAME, "environment variable name")
                             if "torch_index_env" in m else None),
            line=node.lines[name],
            **_environment(r, m, key),
        )
    for name, variant in out.items():
        if variant.base_variant is not None:
            key = f"variants.{name}.base_variant"
            line = node.value[name].value["base_variant"].line
            if variant.base_variant not in out or variant.base_variant == name:
                raise r.fail(line, key, f"{variant.base_variant!r} is not another variant of this manifest "
                                        f"(variants: {', '.join(out)})")
            if out[variant.base_variant].base_variant is not None:
                raise r.fail(line, key, f"{variant.base_variant!r} is itself built on another variant; "
                                        "one level is supported")
            _check_base_platforms(r, node.value[name].value, name, variant, out[variant.base_variant], line)
    return out


def _check_base_platforms(r: Reader, m: dict, name: str, variant: Variant, base: Variant, line: int) -> None:
    """Each platform of a variant built on another variant's image is built FROM that variant's image for
    the same platform, so the base variant must be built for every one of them."""
    lacking = [p for p in variant.container_platforms if p not in base.container_platforms]
    if not lacking:
        return
    key, at = (f"variants.{name}.platforms", m["platforms"].line) if variant.platforms else \
        (f"variants.{name}.base_variant", line)
    raise r.fail(at, key, f"{', '.join(lacking)}: variant {name} is built there FROM variant {base.name}'s image, "
                          f"which is built for {', '.join(base.container_platforms)} only; add "
                          f"{', '.join(lacking)} to variants.{base.name}.platforms, or build {name} without it")


def _base(r: Reader, m: dict, key: str, line: int) -> str:
    """`base` (an image reference, maybe pinned by digest), or "" when `base_variant` names the base."""
    if ("base" in m) == ("base_variant" in m):
        raise r.fail(line, key, "needs exactly one of base (an image) or base_variant (another variant's image)")
    if "base" not in m:
        return ""
    return r.image_ref(m["base"], f"{key}.base")


def _environment(r: Reader, m: dict, key: str) -> dict:
    env = r.string(m["environment"], f"{key}.environment") if "environment" in m else "venv"
    if env not in ENVIRONMENTS:
        raise r.fail(m["environment"].line, f"{key}.environment",
                     f"{env!r} is not one of {', '.join(ENVIRONMENTS)} (venv: a fresh venv; base: the base's python)")
    ssp = r.boolean(m["system_site_packages"], f"{key}.system_site_packages") if "system_site_packages" in m else False
    if ssp and env != "venv":
        raise r.fail(m["system_site_packages"].line, f"{key}.system_site_packages", "only with environment: venv")
    interpreter = None
    if "interpreter" in m:
        interpreter = r.string(m["interpreter"], f"{key}.interpreter", _ABS_PATH, "absolute path")
        if env != "base" and not ssp:
            raise r.fail(m["interpreter"].line, f"{key}.interpreter",
                         "only with environment: base, or a venv with system_site_packages (the base's python)")
    base_variant = (r.string(m["base_variant"], f"{key}.base_variant", _VARIANT_NAME, "variant name")
                    if "base_variant" in m else None)
    return {"environment": env, "system_site_packages": ssp, "interpreter": interpreter, "base_variant": base_variant}


def _check_tag(r: Reader, tag: str, line: int, key: str) -> None:
    try:
        parts = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(tag) if f is not None]
    except ValueError as exc:
        raise r.fail(line, key, f"bad tag pattern: {exc}") from None
    for f, spec, conv in parts:
        if f not in TAG_FIELDS:
            raise r.fail(line, key, f"unknown placeholder {{{f if len(f) <= 40 else f[:37] + '...'}}}; "
                                    f"known: {', '.join('{' + t + '}' for t in TAG_FIELDS)}")
        if spec or conv:
            raise r.fail(line, key, f"placeholder {{{f}}} takes no format spec or conversion")
    sample = tag.format(**{f: "x" for f in TAG_FIELDS})
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", sample):
        raise r.fail(line, key, f"{tag!r} does not make a valid image tag (letters, digits, '_', '.', '-')")


def _shared_pins(r: Reader, node: Any) -> tuple[SharedPin, ...]:
    if node is None:
        return ()
    pins: list[SharedPin] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(r.sequence(node, "shared_pins")):
        key = f"shared_pins[{i}]"
        m = r.mapping(item, key, {"requirement", "needed_by", "why"}, {"requirement", "needed_by", "why"}).value
        req = r.requirement(m["requirement"], f"{key}.requirement")
        needed = _needed_by(r, m["needed_by"], f"{key}.needed_by")
        name = canonicalize_name(req.name)
        if name in seen:
            raise r.fail(item.line, f"{key}.requirement", f"{name} is already a shared pin (line {seen[name]})")
        seen[name] = item.line
        pins.append(SharedPin(req, needed, r.string(m["why"], f"{key}.why"), item.line))
    return tuple(pins)


def _needed_by(r: Reader, node: Any, key: str) -> tuple[str, ...]:
    names: list[str] = []
    seen: dict[str, int] = {}
    for j, n in enumerate(r.sequence(node, key, 1)):
        name = r.string(n, f"{key}[{j}]")
        if not _PACKAGE_NAME.fullmatch(name):
            raise r.fail(n.line, f"{key}[{j}]", f"{show(name)} is not a package name "
                                               "(PEP 508: letters, digits, '.', '_', '-')")
        canonical = canonicalize_name(name)
        if canonical in seen:
            raise r.fail(n.line, f"{key}[{j}]", f"{name} is listed twice (first as item {seen[canonical]})")
        seen[canonical] = j
        names.append(name)
    return tuple(names)

