"""What a version bump breaks, before a single image is built: two Plans compared.

``pinwheel bump torch==2.14.1 --cuda 13`` takes today's image for one variant
(from its committed lock when there is one, else one plain pip install per
wheel set, exactly as ``pinwheel report`` sees it) and the same image with the
bump applied, then says per package what has to happen:

``ok``                nothing to do (a stable-ABI wheel, a requirement that still holds);
``upgrade``/``downgrade``/``add``
                      the package moves along by itself: the bumped package's own
                      pins demand it, or a re-lock would pick the nearest version
                      that accepts the bump;
``rebuild``           a compiled wheel imports torch's unstable C++ ABI and was built
                      against another torch: it fails with ``undefined symbol``;
``blocked``           the bumped image cannot be installed as the manifest stands, or
                      would break at run time (a pin or a package excludes the new
                      version, a shared pin becomes unsatisfiable, a stable-ABI wheel
                      needs a newer torch); every blocked row carries the nearest fix;
``unchecked``         the facts were not available (offline and not cached).

Only changes the bump forces are shown as moves: a package keeps today's version
unless a changed package's requirements exclude it, so a week-old lock does not
turn into a list of unrelated upgrades.

Index metadata comes from the index cache that ``report`` shares; compiled wheels
are classified through ``pinwheel.abi.cache``. A warm run reads only cached files.

The rooms, in the order a comparison runs through them:

- ``model``: the report's values (BumpReport and its rows), verdicts, the bump's input;
- ``context``: one variant's comparison (Plan, sources, bumps) and the lookups it shares;
- ``images``: today's image and the image after the bump, with the moves it forces;
- ``findings``: moves, requirements, shared pins and ABI coupling, one kind each;
- ``fixes``: the nearest fix of each finding;
- ``judge``: ``bump()``, the verdict of every package, top to bottom;
- ``printing``: the report as rich tables;
- ``versions``: small version and specifier helpers.
"""
from .judge import PAGE_MAX_AGE, bump, bump_platforms
from .model import BumpInputError, BumpReport, parse_bumps
from .printing import print_bump

__all__ = ["PAGE_MAX_AGE", "BumpInputError", "BumpReport", "bump", "bump_platforms", "parse_bumps", "print_bump"]
