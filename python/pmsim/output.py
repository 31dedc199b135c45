"""Writing result files so that nothing a user has is destroyed and nothing is half-written.

The one place the front end writes files: the CLI (``-o``), sweeps and every reproduction write
through :func:`write_atomic`, create their folders with :func:`folder`, and render their Markdown
tables with :func:`markdown` / :func:`pipe_table`, so a result file looks and behaves the same
whichever command wrote it.

A regular file (or a new path) is written atomically: to a temporary file beside it (a unique
name, created exclusively, with the mode of the file it replaces), then renamed onto it, so an
interrupted run leaves the old file or the new one, never a mix. A hard link to the old file
keeps the old content (the name is replaced, not the file). A symlink is followed and its
target written the same way (the link survives). A device node or FIFO (``-o /dev/stdout``) is
written through: renaming onto it would replace the device with a regular file. Missing parent
folders are created. The Rust core follows the same rules
(``crates/pmsim-py/src/output.rs``) for the files it writes itself.
"""

from __future__ import annotations

import contextlib
import errno
import numbers
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
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


def _same_regular_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one regular file (through symlinks and hard links)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(sa.st_mode) and (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_not_input(path: str | Path, option: str, inputs: Iterable[tuple[str, str | Path | None]]) -> None:
    """Refuses an output path that is one of the command's input files (``run --trace X -o X``
    would replace a trace, perhaps one recorded from a program and not to be had again, with
    its stats). ``inputs`` are (option, path) pairs; a path None is not given. Devices and FIFOs
    (``/dev/stdin``, ``/dev/stdout``) are not files to lose: only regular files count."""
    for flag, given in inputs:
        if given is not None and _same_regular_file(path, given):
            raise PmsimError(
                f"{option} {path} is the input {flag} {given}: writing it would destroy the input "
                "(give another output path)"
            )


def is_stdout(path: str | Path) -> bool:
    """Whether writing ``path`` writes this process' standard output (``/dev/stdout``,
    ``/dev/fd/1``, or the file or pipe stdout goes to): human messages then go to stderr, so
    that they do not end up in the data. Checked before writing (a regular file is replaced)."""
    try:
        so = os.fstat(1)
        st = os.stat(path)
        null = os.stat(os.devnull)
    except (OSError, ValueError):
        return False
    same = (st.st_dev, st.st_ino) == (so.st_dev, so.st_ino)
    # `-o /dev/null >/dev/null`: both discarded, the messages stay where they were asked to go.
    return same and (st.st_dev, st.st_ino) != (null.st_dev, null.st_ino)


def write_bytes(path: str | Path, data: bytes) -> None:
    target, atomic = resolve(path)
    if not atomic:
        try:
            with open(target, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            raise  # the reader of a pipe (`pmsim ... -o /dev/stdout | head`) is done: not an error
        except OSError as e:
            raise PmsimError(f"{path}: cannot write: {e.strerror or e}") from None
        return
    tmp: str | None = None
    try:
        fd, tmp = _temp_beside(target)
        with open(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as e:
        # Named as the user gave it: the temporary file beside it is ours.
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise PmsimError(f"{path}: cannot write: {e.strerror or e}") from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def current_umask() -> int:
    """The process' umask, read without changing it where Linux tells it (another thread may
    be creating files meanwhile)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def keep_mode(new: str | Path, old: str | Path) -> None:
    """Gives file ``new``, about to be renamed onto ``old``, the mode of ``old`` (or, if there
    is none, the umask's default)."""
    with contextlib.suppress(OSError):
        os.chmod(new, _mode_replacing(old))


def _mode_replacing(old: str | Path) -> int:
    """The mode a file written in place of ``old`` gets: ``old``'s, or for a new file the
    umask's default, as ``open`` would have given it."""
    try:
        return stat.S_IMODE(os.stat(old).st_mode)
    except FileNotFoundError:
        return 0o666 & ~current_umask()


def _temp_beside(target: Path) -> tuple[int, str]:
    """A new temporary file in ``target``'s folder, to be renamed onto it: its open descriptor
    and name. The name is unique and short (``.pmsim-XXXXXXXX.partial``, whatever the length of
    ``target``'s, which may already be NAME_MAX long); the file is created exclusively (never
    through a file or symlink someone put there, never shared with a concurrent writer of the
    same target) and has the mode of the file it replaces (a ``chmod 600`` result stays
    private), or for a new file the umask's default, as ``open`` would have given it."""
    mode = _mode_replacing(target)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=".pmsim-", suffix=".partial")
    try:
        os.fchmod(fd, mode)
    except OSError:
        pass  # a file system without modes (vfat): the file keeps what it was given
    except BaseException:
        os.close(fd)
        os.unlink(name)
        raise
    return fd, name


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


@contextlib.contextmanager
def replaced_folder(out: str | Path, name: str) -> Iterator[Path]:
    """The folder ``OUT/NAME`` written whole or not at all: yields a fresh sibling folder
    ``OUT/.NAME.partial-XXXXXXXX`` to write into; when the block ends normally the sibling
    replaces ``OUT/NAME`` (the old folder renamed away, the new one renamed into place, the old
    one deleted), else the sibling is deleted. So a run interrupted (Ctrl-C, a failed write, a
    full disk) leaves an earlier complete ``OUT/NAME`` untouched, never a mix of its files and
    the new ones; a run killed outright leaves the ``.partial-`` folder beside it, named as
    such. ``OUT/NAME`` a symlink to a folder: the folder it points to is replaced."""
    final = Path(out) / name
    parent = folder(out)
    if final.is_symlink() and final.is_dir():
        final = final.resolve()
        parent = final.parent
    elif final.exists() and not final.is_dir():
        raise PmsimError(f"cannot create the output folder {final}: a file on that path is not a folder")
    try:
        old_mode = stat.S_IMODE(os.stat(final).st_mode)
    except OSError:
        old_mode = None
    try:
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{final.name}.partial-"))
        # mkdtemp's folder is private (0700): give it what mkdir would (the old folder's mode
        # once written: that may not let us write).
        os.chmod(staging, 0o777 & ~current_umask())
    except OSError as e:
        raise PmsimError(f"cannot create the output folder {final}: {e.strerror or e}") from None
    try:
        yield staging
        if old_mode is not None:
            with contextlib.suppress(OSError):
                os.chmod(staging, old_mode)
        _swap_in(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_in(staging: Path, final: Path) -> None:
    """Puts ``staging`` in the place of ``final`` (a folder, or nothing), then deletes the old
    one. Another pmsim may be doing the same with the same ``final``: whoever renames last wins,
    each attempt moving away what is in the place at the time."""
    for _ in range(100):
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.old-"))
            try:
                os.rename(final, old)  # onto an empty folder: allowed
            except FileNotFoundError:
                old.rmdir()
                old = None
            except OSError as e:
                old.rmdir()
                raise PmsimError(f"cannot replace the output folder {final}: {e.strerror or e}") from None
        try:
            os.rename(staging, final)
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST) and final.exists():
                # A concurrent run put its folder there meanwhile: move it away too.
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
                continue
            if old is not None:
                with contextlib.suppress(OSError):
                    os.rename(old, final)  # put the earlier results back
            raise PmsimError(f"cannot replace the output folder {final}: {e.strerror or e}") from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return
    raise PmsimError(f"cannot replace the output folder {final}: other runs keep replacing it")


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
