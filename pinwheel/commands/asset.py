"""`asset add URL`: a release wheel downloaded into the asset cache, and its manifest entry printed."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..workspace import Workspace
from .common import EXIT_OK, UsageError


def cmd_asset(args: argparse.Namespace) -> int:
    """`asset add URL`: download a release wheel into the asset cache and print its manifest entry."""
    from ..index.transfer import LimitError, check_bounds
    from ..steps.asset import AssetError, add as add_asset
    try:
        check_bounds()
        entry = add_asset(args.url, Workspace(Path(args.manifest).parent, "").asset_cache)
    except (AssetError, LimitError) as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(entry)
    return EXIT_OK


def add_asset_parser(sub) -> None:
    asset = sub.add_parser("asset", help="release assets: `asset add URL` prints a manifest entry, sha256 filled in")
    asset_sub = asset.add_subparsers(dest="asset_command", required=True)
    asset_add = asset_sub.add_parser("add", help="download URL (a wheel) into the asset cache and print its entry")
    asset_add.add_argument("url", help="the wheel's URL (https:// or http://)")
    asset_add.set_defaults(func=cmd_asset, needs_manifest=False)
