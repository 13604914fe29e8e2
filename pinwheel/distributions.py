"""The distributions an environment holds: one value, read from an image or derived from a plan.

Its three uses: step 0 of the resolver for a base that already has an
environment, the build's check of the plan against what was built, and
inspecting or comparing any image. Reading it from an image's layers is
pinwheel.image.inventory; this module holds only the value.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCHEMA = "pinwheel.inventory/1"


class InventoryError(Exception):
    """The image could not be read (not a docker save archive, unreadable layer)."""


@dataclass(frozen=True)
class Distribution:
    """One installed distribution, as its dist-info records it."""

    name: str  # canonical
    version: str
    requires_dist: tuple[str, ...]
    provides_extra: tuple[str, ...]
    installer: str | None
    direct_url: str | None  # direct_url.json's url, for git, local and URL installs
    top_level: tuple[str, ...]
    size: int  # bytes, summed from RECORD
    site: str  # the site-packages directory in the image
    layer: int  # the layer (0-based) that last wrote its METADATA


@dataclass(frozen=True)
class Inventory:
    image: str  # the reference it was read from
    image_id: str
    digest: str | None  # the repository digest, where the image has one
    distributions: tuple[Distribution, ...] = ()
    layers: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    # (name, why) of the base's packages whose modules import only with a driver, where the base is one
    # pinwheel built (its expect.json's import_skip)
    import_skip: tuple[tuple[str, str], ...] = ()
    # (name, check) of the base's packages with a check of their own (its expect.json's verify, in that
    # file's shape), where the base is one pinwheel built: an image that keeps the package keeps the check
    verify: tuple[tuple[str, dict], ...] = ()

    def by_name(self, site: str | None = None) -> dict[str, Distribution]:
        return {d.name: d for d in self.distributions if site is None or d.site == site}

    @property
    def sites(self) -> tuple[str, ...]:
        return tuple(sorted({d.site for d in self.distributions}))

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "image": self.image, "image_id": self.image_id, "digest": self.digest,
                "layers": self.layers, "notes": list(self.notes),
                "distributions": [{**asdict(d), "requires_dist": list(d.requires_dist),
                                   "provides_extra": list(d.provides_extra), "top_level": list(d.top_level)}
                                  for d in self.distributions],
                **({"import_skip": dict(self.import_skip)} if self.import_skip else {}),
                **({"verify": dict(self.verify)} if self.verify else {})}

    @classmethod
    def from_json(cls, data: dict) -> "Inventory":
        if data.get("schema") != SCHEMA:
            raise InventoryError(f"not a {SCHEMA} document (schema {data.get('schema')!r})")
        dists = tuple(Distribution(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
                      for d in data["distributions"])
        return cls(data["image"], data["image_id"], data.get("digest"), dists, data.get("layers", 0),
                   tuple(data.get("notes", ())), tuple(sorted(dict(data.get("import_skip", {})).items())),
                   tuple(sorted(dict(data.get("verify", {})).items())))
