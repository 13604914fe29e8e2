"""Label keys pinwheel sets on images: one prefix for all of them, and the OCI keys it fills."""

PREFIX = "io.pinwheel"
BASE_SUITE = f"{PREFIX}.base.suite"  # the Debian suite of a bootstrap base
BASE_PYTHON = f"{PREFIX}.base.python"  # its interpreter's full version
SMOKE = f"{PREFIX}.smoke"  # publish: how the pushed image's smoke went
INPUTS = f"{PREFIX}.inputs"  # JSON: everything that decides the image (image/identity.py)
INPUTS_SHA256 = f"{PREFIX}.inputs.sha256"  # its digest; the immutable tag is <variant>-<first 12>[-<arch>]
CONTENT_TAG = f"{PREFIX}.content-tag"  # that immutable tag's name: what publish pushes the image by
SBOM = f"{PREFIX}.sbom"  # the SBOM's tag beside the image in its repository
SBOM_SHA256 = f"{PREFIX}.sbom.sha256"  # the sha256 of the SBOM document's bytes
SBOM_MEDIA_TYPE = "application/vnd.cyclonedx+json"
# what the base.digest label is: "manifest" (a registry manifest digest) or "image-id" (the local image's
# config digest: a bootstrap base, or one never pulled from a registry, has no manifest)
BASE_DIGEST_KIND = f"{PREFIX}.base.digest-kind"

# org.opencontainers.image.* (the OCI image spec's annotation keys, set as labels)
OCI = "org.opencontainers.image"
OCI_CREATED = f"{OCI}.created"
OCI_SOURCE = f"{OCI}.source"
OCI_REVISION = f"{OCI}.revision"
OCI_VERSION = f"{OCI}.version"
OCI_TITLE = f"{OCI}.title"
OCI_BASE_NAME = f"{OCI}.base.name"
OCI_BASE_DIGEST = f"{OCI}.base.digest"


def sbom_tag(immutable_tag: str) -> str:
    """Where the SBOM of the image tagged ``<variant>-<hash>`` is pushed: ``<variant>-<hash>.sbom``."""
    return f"{immutable_tag}.sbom"
