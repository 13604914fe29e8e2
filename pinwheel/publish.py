"""Push an image's tags to a registry, only when its smoke passed.

The check is by image id: a tag that moved to another build after the smoke
ran is refused. Pushing is idempotent: the same tags on the same image push
the same digest again.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .engine import Engine
from .smoke import recorded


class PublishRefused(Exception):
    """Nothing was pushed; the message says why."""


@dataclass(frozen=True)
class Published:
    image_id: str
    refs: tuple[str, ...]
    digests: dict[str, str]


def publish(engine: Engine, tags: list[str], registry: str, root: Path, require_gpu: bool = False) -> Published:
    if not tags:
        raise PublishRefused("no tags to publish")
    ids = {t: engine.image_id(t) for t in tags}
    if len(set(ids.values())) != 1:
        raise PublishRefused(f"the tags point at different images: {ids}")
    image_id = next(iter(ids.values()))
    smoke = recorded(image_id, root)
    if smoke is None:
        raise PublishRefused(f"no smoke result for image {image_id[:19]}: run `build.py smoke` first")
    if not smoke["ok"]:
        raise PublishRefused(f"the smoke of image {image_id[:19]} failed: {smoke['levels']}")
    if require_gpu and smoke["levels"].get("gpu") != "passed":
        raise PublishRefused(f"the GPU smoke of image {image_id[:19]} did not pass "
                             f"(gpu: {smoke['levels'].get('gpu', 'not run')})")
    refs, digests = [], {}
    for tag in tags:
        remote = f"{registry.rstrip('/')}/{tag}"
        engine.tag(tag, remote)
        digests[remote] = engine.push(remote).digest
        refs.append(remote)
    return Published(image_id, tuple(refs), digests)
