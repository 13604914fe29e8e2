"""pinwheel's smoke payload: checks a built image from the inside. Standard library only.

The build ships this package into the image as one zipapp file (pinwheel.image.payload), run there as
`python smoke_payload.pyz --expect expect.json --level gpu`; the cli module says what it checks. pinwheel
itself imports three names from here: NAMED_CHECKS (the manifest reader), level_status (the smoke
stage, which judges a recorded document the way the payload does) and expect.verify_entries (the base
inventory, which keeps a pinwheel-built base's own checks in the shape the payload reads).
"""
from .checks import NAMED_CHECKS
from .records import level_status

__all__ = ["NAMED_CHECKS", "level_status"]
