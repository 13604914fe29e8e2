"""Container image references (``[host[:port]/]path[:tag][@sha256:<hex>]``), split by oras' container
reference and then held to the distribution grammar piece by piece: oras splits, but accepts any
character in a piece, and a reference lands in a Dockerfile's FROM."""
from __future__ import annotations

import re
from dataclasses import dataclass

# The distribution reference grammar, per piece (the split itself is oras').
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                   r"|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
MAX_LENGTH = 255  # the distribution spec's limit on a repository name, used for the whole reference
WHAT = "image reference ([host[:port]/]name[:tag][@sha256:<64 hex>])"


@dataclass(frozen=True)
class ImageRef:
    registry: str | None  # host[:port] as written; None: the engine's default registry
    path: str  # namespace/.../repository
    tag: str | None  # as written; None where the reference names no tag
    digest: str | None  # sha256:<hex>, where it pins one

    def __str__(self) -> str:
        text = f"{self.registry}/{self.path}" if self.registry else self.path
        return text + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    @property
    def repository(self) -> str:
        """The name without tag or digest: [host[:port]/]path."""
        return f"{self.registry}/{self.path}" if self.registry else self.path


def parse_image_ref(text: str) -> ImageRef:
    """The reference ``text`` names; ValueError saying which piece is wrong."""
    import oras.container  # small: only oras' defaults come with it

    if not text or len(text) > MAX_LENGTH or text != text.strip():
        raise ValueError(f"must be 1 to {MAX_LENGTH} characters without surrounding blanks")
    try:
        parsed = oras.container.Container(text)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    registry = parsed.registry if text.startswith(f"{parsed.registry}/") else None
    path = f"{parsed.namespace}/{parsed.repository}" if parsed.namespace else parsed.repository
    # oras fills in a default tag; only one written in the reference is kept
    named = text.split("@", 1)[0].rsplit("/", 1)[-1]
    ref = ImageRef(registry, path, parsed.tag if ":" in named else None, parsed.digest)
    if str(ref) != text:  # oras searches rather than matches: a reference it read only part of is refused
        raise ValueError("is not one reference")
    if registry is not None and not _HOST.fullmatch(registry):
        raise ValueError(f"registry {registry!r} is not a host[:port]")
    bad = next((c for c in path.split("/") if not _PATH_COMPONENT.fullmatch(c)), None)
    if bad is not None:
        raise ValueError(f"name component {bad!r} is not lowercase letters and digits joined by . _ __ or -")
    if ref.tag is not None and not _TAG.fullmatch(ref.tag):
        raise ValueError(f"tag {ref.tag!r} is not 1-128 letters, digits, _ . - (not starting with . or -)")
    if ref.digest is not None and not _DIGEST.fullmatch(ref.digest):
        raise ValueError(f"digest {ref.digest!r} is not sha256:<64 lowercase hex>")
    return ref
