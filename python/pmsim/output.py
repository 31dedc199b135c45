"""Writing result files so that nothing a user has is destroyed and nothing is half-written.

A regular file (or a new path) is written atomically: to a temporary file beside it, then
renamed onto it, so an interrupted run leaves the old file or the new one, never a mix. A
symlink is followed and its target written the same way (the link survives). A device node or
FIFO (``-o /dev/stdout``) is written through: renaming onto it would replace the device with a
regular file. Missing parent folders are created. The Rust core follows the same rules
(``crates/pmsim-py/src/output.rs``) for the files it writes itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from pmsim._core import PmsimError


def resolve(path: str | Path) -> tuple[Path, bool]:
    """The path to write and whether to write it atomically (False: write through)."""
    p = Path(path)
    if p.is_symlink() and not p.exists():
        raise PmsimError(f"{p}: is a symlink to a missing file ({os.readlink(p)}); not writing through it")
    if p.exists():
        if p.is_dir():
            raise PmsimError(f"{p}: is a directory")
        real = p.resolve()
        return (real, True) if real.is_file() else (p, False)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p, True


def write_bytes(path: str | Path, data: bytes) -> None:
    target, atomic = resolve(path)
    if not atomic:
        with open(target, "wb") as f:
            f.write(data)
        return
    tmp = target.with_name(target.name + ".partial")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode())
