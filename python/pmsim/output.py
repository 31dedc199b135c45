"""Writing result files so that nothing a user has is destroyed and nothing is half-written.

The one place the front end writes files: the CLI (``-o``), sweeps and every reproduction write
through :func:`write_atomic`, create their folders with :func:`folder`, and render their Markdown
tables with :func:`markdown` / :func:`pipe_table`, so a result file looks and behaves the same
whichever command wrote it.

A regular file (or a new path) is written atomically: to a temporary file beside it, then
renamed onto it, so an interrupted run leaves the old file or the new one, never a mix. A
symlink is followed and its target written the same way (the link survives). A device node or
FIFO (``-o /dev/stdout``) is written through: renaming onto it would replace the device with a
regular file. Missing parent folders are created. The Rust core follows the same rules
(``crates/pmsim-py/src/output.rs``) for the files it writes itself.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pmsim._core import PmsimError

if TYPE_CHECKING:
    import pandas as pd


def _refuse_dangling_or_dir(p: Path) -> None:
    """An output path pmsim never writes: a symlink to nothing, or a directory."""
    if p.is_symlink() and not p.exists():
        raise PmsimError(f"{p}: is a symlink to a missing file ({os.readlink(p)}); not writing through it")
    if p.is_dir():
        raise PmsimError(f"{p}: is a directory")


def resolve(path: str | Path) -> tuple[Path, bool]:
    """The path to write and whether to write it atomically (False: write through)."""
    p = Path(path)
    _refuse_dangling_or_dir(p)
    if p.exists():
        real = p.resolve()
        return (real, True) if real.is_file() else (p, False)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = (
            "a file on that path is not a folder"
            if isinstance(e, (FileExistsError, NotADirectoryError))
            else e.strerror
        )
        raise PmsimError(f"{p}: cannot create its folder {p.parent}: {why}") from None
    return p, True


def check_writable(path: str | Path) -> None:
    """Refuses, before any work is done, an output path that :func:`write_bytes` would refuse
    only after it (a sweep's ``-o``): a directory, a dangling symlink, a path under a file, a
    file or folder we may not write. Creates nothing."""
    p = Path(path)
    _refuse_dangling_or_dir(p)
    if p.exists():
        if not os.access(p, os.W_OK):  # through a symlink or /dev/stdout, as the kernel resolves it
            raise PmsimError(f"{path}: cannot write: Permission denied")
        # A regular file is replaced by a renamed temporary file beside it: its folder is written.
        real = p.resolve()
        if real.is_file() and not os.access(real.parent, os.W_OK | os.X_OK):
            raise PmsimError(f"{path}: cannot write: its folder {real.parent} is not writable")
        return
    anc = p.absolute().parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise PmsimError(f"{p}: cannot create its folder {p.parent}: a file on that path is not a folder")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise PmsimError(f"{path}: cannot write: the folder {anc} is not writable")


def write_bytes(path: str | Path, data: bytes) -> None:
    target, atomic = resolve(path)
    if not atomic:
        try:
            with open(target, "wb") as f:
                f.write(data)
        except OSError as e:
            raise PmsimError(f"{path}: cannot write: {e.strerror or e}") from None
        return
    tmp = target.with_name(target.name + ".partial")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError as e:
        # Named as the user gave it: the temporary file beside it is ours.
        tmp.unlink(missing_ok=True)
        raise PmsimError(f"{path}: cannot write: {e.strerror or e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_atomic(path: str | Path, text: str) -> None:
    """Writes a result file atomically (regular files), through (devices), never half-written."""
    write_text(path, text)


def folder(out: str | Path, *parts: str) -> Path:
    """The output folder ``OUT/PARTS...``, created with its parents if missing."""
    d = Path(out).joinpath(*parts)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        # Which folder could not be made, and that making it is what failed.
        raise PmsimError(f"cannot create the output folder {d}: {e.strerror or e}") from None
    return d


def pipe_table(head: Sequence[object], rows: Iterable[Sequence[object]], align: str) -> list[str]:
    """The lines of a Markdown pipe table: ``align`` has one letter per column, ``l`` (text,
    left) or ``r`` (numbers, right); cells are written as given (format them first)."""
    if len(align) != len(head) or set(align) - {"l", "r"}:
        raise ValueError(f"align '{align}' must be one l or r per column ({len(head)})")
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    lines = ["| " + " | ".join(map(str, head)) + " |", rule]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return lines


def markdown(table: pd.DataFrame, fmt: str = "{:.4g}") -> str:
    """A DataFrame as a pipe table (pandas' to_markdown needs the optional tabulate package):
    the index as the first column, numbers formatted with ``fmt`` and right-aligned."""

    def cell(v: object) -> str:
        return fmt.format(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else str(v)

    head = [table.index.name or "", *table.columns]
    rows = ([str(idx), *map(cell, row)] for idx, row in table.iterrows())
    return "\n".join(pipe_table(head, rows, "l" + "r" * len(table.columns))) + "\n"
