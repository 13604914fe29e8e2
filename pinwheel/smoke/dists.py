"""The installed distributions, as importlib.metadata sees them."""
from __future__ import annotations

import os
import re

from .requirements import normalize


def installed_distributions() -> dict:
    """normalised name -> [{"name", "version", "location"}], in sys.path order."""
    import importlib.metadata  # here, not at the top: pinwheel's manifest reader imports this module (NAMED_CHECKS)

    found: dict = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        try:
            location = str(dist.locate_file(""))
        except Exception:  # pragma: no cover - exotic finders
            location = None
        found.setdefault(normalize(name), []).append(
            {"name": name, "version": dist.version, "location": location}
        )
    return found


IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def top_level_modules(dist) -> list:
    """A distribution's top-level modules: top_level.txt, else the first path part of its RECORD. An
    extension built for another interpreter (foreign_extensions) is none: this Python never finds it."""
    names = []
    text = dist.read_text("top_level.txt")
    if text:
        names = [line.strip().replace("/", ".") for line in text.splitlines() if line.strip()]
        # only what is there: a top_level.txt may name a directory it never shipped (Debian's setuptools: debian)
        names = [n for n in names if _on_disk(dist, n.split(".")[0])]
    else:
        for f in dist.files or ():  # only here: parsing a RECORD into paths is most of this function's time
            parts = f.parts
            if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith((".dist-info", ".data", ".pth")):
                continue
            if len(parts) == 1:
                if parts[0].endswith(".py"):
                    names.append(parts[0][:-3])
                elif parts[0].endswith(".so") and _loadable(parts[0]):
                    names.append(parts[0].split(".", 1)[0])
            elif parts[-1].endswith((".py", ".so")) and IDENT.match(parts[0]):  # not numpy.libs/ (auditwheel)
                names.append(parts[0])
    return sorted({n for n in names if all(IDENT.match(x) for x in n.split("."))})


def foreign_extensions(dist, listings: dict | None = None) -> list:
    """The top-level extension modules a distribution ships for another interpreter: a file such as
    `_mscclpp.cpython-310-x86_64-linux-gnu.so` in a wheel installed on 3.12, which no import here can load.
    `listings` keeps each site directory's foreign files, so that only a distribution in a directory that
    holds one has its RECORD read."""
    try:
        base = str(dist.locate_file(""))
        listings = {} if listings is None else listings
        if base not in listings:
            listings[base] = {f for f in os.listdir(base) if f.endswith(".so") and not _loadable(f)}
        if not listings[base]:
            return []
        return sorted(str(f) for f in dist.files or () if len(f.parts) == 1 and str(f) in listings[base])
    except (OSError, TypeError, NotImplementedError):
        return []


def _loadable(filename: str) -> bool:
    """An extension this Python imports: a module name, then one of its own suffixes (a 3.10 build's
    `x.cpython-310-x86_64-linux-gnu.so` would be the module `x.cpython-310-x86_64-linux-gnu` here: none)."""
    import importlib.machinery  # here, as below: the manifest reader imports this module

    return any(filename.endswith(sfx) and IDENT.match(filename[:-len(sfx)])
               for sfx in importlib.machinery.EXTENSION_SUFFIXES)


def _on_disk(dist, name: str) -> bool:
    """A top-level package directory, module or extension this Python loads, named `name`, next to the
    distribution's metadata."""
    try:
        base = str(dist.locate_file(""))
        return (os.path.isdir(os.path.join(base, name)) or os.path.exists(os.path.join(base, name + ".py"))
                or any(f.startswith(name + ".") and f.endswith(".so") and _loadable(f) for f in os.listdir(base)))
    except (OSError, TypeError, NotImplementedError):
        return True  # cannot tell: import it, and let the import say


def dist_version(*names):
    """The version of the first of `names` that is installed; None if none is."""
    import importlib.metadata  # as above: it loads email and zipfile, which pinwheel's report does not need

    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None
