"""The image's CycloneDX SBOM, from what decides it: the lock, the local wheels, release assets, git
sources, and the base (with its inventory's distributions).

Every component carries the hash that pins it: a locked package every sha256
its lock accepts (pip with --require-hashes installs one of those files), a
local wheel or a release asset its file's sha256, a git source its commit, the
base its digest. The base's own distributions have no file hashes of their
own; they are listed inside the base component, which the base digest pins.

The document is made before the build, so the image can name its digest in a
label, and it is reproducible: its serial number and timestamp come from the
inputs and the source date, not from the clock.
"""
from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from ..distributions import Inventory, InventoryError
from ..lock import read_lock
from ..plan import Plan
from ..steps import kind_of
from ..steps.base import SbomPart
from ..workspace import Workspace
from .identity import ContentInputs

SCHEMA = SchemaVersion.V1_6
PROPERTY = "pinwheel"  # namespace of the properties below (CycloneDX property names are free text)


class SbomError(Exception):
    """The SBOM could not be made or is not valid CycloneDX."""


def _sha256(hexdigest: str) -> HashType:
    return HashType(alg=HashAlgorithm.SHA_256, content=hexdigest.removeprefix("sha256:"))


def _pypi(name: str, version: str, ref: str, hashes: list[HashType], properties: dict[str, str]) -> Component:
    return Component(type=ComponentType.LIBRARY, name=name, version=version, bom_ref=ref,
                     purl=PackageURL(type="pypi", name=name, version=version), hashes=hashes,
                     properties=[Property(name=f"{PROPERTY}:{k}", value=v) for k, v in properties.items() if v])


_ALGORITHMS = {"sha256": HashAlgorithm.SHA_256, "sha1": HashAlgorithm.SHA_1}
_LINKS = {"distribution": ExternalReferenceType.DISTRIBUTION, "vcs": ExternalReferenceType.VCS}


def _component(part: SbomPart) -> Component:
    """The CycloneDX component of what a step's kind says (StepKind.sbom)."""
    hashes = [HashType(alg=_ALGORITHMS[alg], content=value) for alg, value in part.hashes]
    if part.type == "library":
        c = _pypi(part.name, part.version or "", part.ref, hashes, dict(part.properties))
    else:
        c = Component(type=ComponentType.FILE, name=part.name, bom_ref=part.ref, hashes=hashes,
                      properties=[Property(name=f"{PROPERTY}:{k}", value=v) for k, v in part.properties if v])
    if part.link is not None:
        c.external_references.add(ExternalReference(type=_LINKS[part.link[0]], url=XsUri(part.link[1])))
    return c


def base_inventory(plan: Plan, root: Path) -> Inventory | None:
    """The committed inventory of the variant's base, where there is one."""
    if plan.resolution.base_inventory is not None:
        return plan.resolution.base_inventory
    path = Workspace(Path(root), plan.image).inventory_file(plan.variant.name)
    try:
        return Inventory.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, InventoryError):
        return None


def make_sbom(plan: Plan, root: Path, inputs: ContentInputs, image_tag: str, created: dt.datetime) -> Bom:
    """The SBOM of ``plan``'s image tagged ``image_tag`` (repository:<variant>-<hash>)."""
    ws = Workspace(Path(root), plan.image)
    lock = read_lock(ws.plan_lock_dir(plan))
    repository, _, version = image_tag.rpartition(":")
    image = Component(type=ComponentType.CONTAINER, name=repository, version=version, bom_ref="image",
                      hashes=[_sha256(inputs.digest)],
                      properties=[Property(name=f"{PROPERTY}:hash", value="sha256 of the image's inputs "
                                                                           "(io.pinwheel.inputs)")])
    components: list[Component] = []

    base_hashes = [_sha256(inputs.base_digest)] if inputs.base_digest else []
    inventory = base_inventory(plan, root)
    inside = [_pypi(d.name, d.version, f"base:{d.site}:{d.name}", [], {"site": d.site, "layer": str(d.layer)})
              for d in (inventory.distributions if inventory else ())]
    components.append(Component(type=ComponentType.CONTAINER, name=inputs.base, bom_ref="base", hashes=base_hashes,
                                components=inside,
                                properties=[Property(name=f"{PROPERTY}:role", value="base image")]))

    missing = {w.package for w in inputs.local_wheels if w.wheel is None}
    why = {p.name: p.why or "" for p in plan.packages()}
    for part in lock.slices + tuple(f for f in lock.fallbacks if f.fallback_for in missing):
        if not part.active:
            continue
        for pkg in part.packages:
            props = {"step": part.step, "source": "fallback" if part.fallback_for else "index",
                     "lock-file": part.file, "why": why.get(pkg.name, "")}
            components.append(_pypi(pkg.name, pkg.version, f"lock:{part.file}:{pkg.name}",
                                    [_sha256(h) for h in pkg.hashes if h.startswith("sha256:")], props))
    for wheel in inputs.local_wheels:
        if wheel.wheel is None:
            continue
        name, version = wheel.wheel.split("-")[:2]  # a wheel file name: name-version-tags.whl
        components.append(_pypi(wheel.package, version, f"local:{wheel.wheel}", [_sha256(wheel.sha256 or "")],
                                {"source": "local", "file": wheel.wheel, "why": why.get(wheel.package, "")}))
    by_name = {step.name: step for step in plan.steps}
    for _, entries in inputs.sections:  # what each step's kind says of the entries it added to the identity
        for entry in entries:
            step = by_name[entry["step"]]
            components.extend(_component(part) for part in kind_of(step).sbom(step, entry))

    bom = Bom(components=components,
              serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"pinwheel:{inputs.digest}"),
              metadata=BomMetaData(component=image, timestamp=created))
    for c in components:
        bom.register_dependency(image, [c])
    return bom


def render(bom: Bom) -> str:
    """The SBOM as CycloneDX 1.6 JSON, checked against the schema (SbomError when it is not valid)."""
    text = JsonV1Dot6(bom).output_as_string(indent=2) + "\n"
    error = validate(text)
    if error is not None:
        raise SbomError(f"the SBOM is not valid CycloneDX {SCHEMA.to_version()}: {error}")
    return text


def validate(text: str) -> str | None:
    """None when ``text`` is valid CycloneDX JSON of the schema version written here, else why not."""
    error = JsonStrictValidator(SCHEMA).validate_str(text)
    return None if error is None else str(error)
