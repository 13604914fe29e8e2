#!/usr/bin/env python3
"""Thin entry point: `python build.py <command>` is the `pinwheel` command line."""
import sys

from pinwheel.cli import main

if __name__ == "__main__":
    sys.exit(main())
