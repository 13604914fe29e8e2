"""A lock directory replaced whole (no stale slice survives), and a replacement a kill interrupted
finished or undone before anything reads the directory."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Mapping


def recover_swap(out_dir: Path, log: Callable[[str], None] = lambda _m: None) -> None:
    """Finish or undo a swap of write_dir that a kill interrupted, before anything reads the lock dir.

    Killed after the old lock moved aside and before the new one took its place: the old one is put back.
    Killed after the new one took its place: the other platforms' lock directories still in the old one are
    moved in, as the swap would have. An unfinished new one is dropped either way."""
    parent = out_dir.parent
    if not parent.is_dir():
        return
    for old in sorted(parent.glob(f".{out_dir.name}.old-*")):
        if not old.is_dir() or old.is_symlink():
            continue
        if not out_dir.exists():
            os.replace(old, out_dir)
            log(f"{out_dir.name}: restored the lock an interrupted run had moved aside")
            continue
        for sub in old.iterdir():
            if sub.is_dir() and not sub.is_symlink() and not (out_dir / sub.name).exists():
                os.replace(sub, out_dir / sub.name)
                log(f"{out_dir.name}: moved {sub.name}/ back in, where an interrupted run left it aside")
        shutil.rmtree(old, ignore_errors=True)
    for stage in parent.glob(f".{out_dir.name}.new-*"):
        if stage.is_dir() and not stage.is_symlink():
            shutil.rmtree(stage, ignore_errors=True)


def write_dir(out_dir: Path, files: Mapping[str, str]) -> None:
    """Replace the lock dir with exactly these files (no stale slices survive); recover_swap finishes or
    undoes it after a kill at any point."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    recover_swap(out_dir)
    stage = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.new-"))
    try:
        for name, text in files.items():
            (stage / name).write_text(text)
            os.chmod(stage / name, 0o644)
        os.chmod(stage, 0o755)
        old = None
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old-"))
            os.rmdir(old)
            os.replace(out_dir, old)
        os.replace(stage, out_dir)
        if old is not None:
            # the other platforms' locks live in subdirectories (lock/<variant>/<arch>/): not ours to drop
            for sub in old.iterdir():
                if sub.is_dir() and not (out_dir / sub.name).exists():
                    os.replace(sub, out_dir / sub.name)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
