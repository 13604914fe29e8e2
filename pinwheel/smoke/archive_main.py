"""The payload archive's entry: the build copies this file to the zipapp's root as __main__.py.

`python smoke_payload.pyz --expect ... --level ...` runs the checks (cli.main); the payload's own child
processes run the same archive with children.CHILD_ENV set, which names the child to run instead.
"""
import os
import sys

if __name__ == "__main__":
    _child = os.environ.pop("PINWHEEL_SMOKE_CHILD", None)  # children.CHILD_ENV; not handed on to what it runs
    if _child is not None:
        from pinwheel_smoke import children

        sys.exit(children.run(_child))
    from pinwheel_smoke import cli

    sys.exit(cli.main())
