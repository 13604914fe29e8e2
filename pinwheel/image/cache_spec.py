"""`build --cache-from/--cache-to` as buildx spells them: a bare REF, or ``key=value`` pairs
(``type=registry,ref=REF,mode=max``), read and checked before the build starts."""
from __future__ import annotations

import csv
from dataclasses import dataclass

from ..imageref import parse_image_ref

MODES = ("min", "max")
# buildx types pinwheel does not speak: each has its own storage, not the registry the images go to
OTHER_TYPES = ("local", "gha", "s3", "azblob")


@dataclass(frozen=True)
class CacheSpec:
    """One cache argument: ``ref`` None for the variant's own cache ref (a bare --cache-to/--cache-from);
    ``mode`` how much of the build a written registry cache holds (buildx's min or max)."""

    ref: str | None = None
    mode: str = "max"


def parse_cache_spec(text: str, writing: bool) -> CacheSpec:
    """``text`` as buildx reads --cache-from (``writing`` False) or --cache-to; ValueError saying what is
    wrong, so that a bad one stops the command before anything is built."""
    if text == "":
        return CacheSpec()
    if "=" not in text:  # buildx's shorthand: a bare registry ref
        return CacheSpec(_checked_ref(text))
    fields = next(csv.reader([text]))
    pairs: dict[str, str] = {}
    for field in fields:
        key, eq, value = field.partition("=")
        if not eq or not key:
            raise ValueError(f"{field!r} is not key=value (e.g. type=registry,ref=host:5000/repo:cache,mode=max)")
        if key in pairs:
            raise ValueError(f"{key} is given twice")
        pairs[key.strip().lower()] = value.strip()
    kind = pairs.pop("type", "registry")
    if kind in OTHER_TYPES or kind not in ("registry", "inline"):
        raise ValueError(f"type={kind} is not supported: pinwheel reads and writes the registry cache "
                         f"(type=registry,ref=REF) beside its images")
    if kind == "inline":
        raise ValueError("type=inline has no ref to push to: give type=registry,ref=REF (pinwheel writes the "
                         "inline cache itself where the builder has no registry cache)")
    allowed = ("ref", "mode") if writing else ("ref",)
    unknown = sorted(set(pairs) - set(allowed))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)} (pinwheel takes {', '.join(('type',) + allowed)})")
    mode = pairs.get("mode", "max")
    if mode not in MODES:
        raise ValueError(f"mode={mode} is not one of {', '.join(MODES)}")
    if "ref" not in pairs:
        raise ValueError("type=registry needs ref=REF")
    return CacheSpec(_checked_ref(pairs["ref"]), mode)


def _checked_ref(ref: str) -> str:
    try:
        parse_image_ref(ref)
    except ValueError as exc:
        raise ValueError(f"ref {ref!r} is not an image reference: {exc}") from None
    return ref


def cache_from_arg(text: str) -> CacheSpec:
    """argparse type of --cache-from."""
    return _as_argument_error(text, writing=False)


def cache_to_arg(text: str) -> CacheSpec:
    """argparse type of --cache-to."""
    return _as_argument_error(text, writing=True)


def _as_argument_error(text: str, writing: bool) -> CacheSpec:
    import argparse
    try:
        return parse_cache_spec(text, writing)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def buildx_cache_to(cache_to: str | None, cache_kind: str | None, cache_mode: str) -> dict[str, str] | None:
    """buildx's --cache-to: a registry cache where the builder exports one, else the inline cache."""
    if cache_to and cache_kind == "registry":
        return {"type": "registry", "ref": cache_to, "mode": cache_mode}
    if cache_to:
        return {"type": "inline"}
    return None
