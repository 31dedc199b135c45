"""Shared helpers: run the installed ``pmsim`` command end to end."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _command() -> list[str]:
    exe = shutil.which("pmsim")
    if exe:
        return [exe]
    # The console script's directory is not on PATH (e.g. a --user install): same entry point.
    return [sys.executable, "-c", "import sys; from pmsim.cli import main; sys.exit(main())"]


PMSIM = _command()


def pmsim_cli(*args: str | Path, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Runs ``pmsim ARGS`` and returns the completed process (text stdout/stderr)."""
    p = subprocess.run(
        [*PMSIM, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    if check and p.returncode != 0:
        raise AssertionError(
            f"pmsim {' '.join(map(str, args))} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
        )
    return p


@pytest.fixture
def cli():
    return pmsim_cli


SAMPLE_TRACE = """\
# pmsim trace v1
threads 2
pm 0x100000000 0x40000000
# a hand-written trace using every event kind
T0 begin op
T0 compute 10
T0 store 0x100000000 8 2a
T0 ofence
T1 acquire 0x2000
T1 load 4294967296 8
T0 ntstore 0x100000040 16 0x00ff
T0 rmw 0x2000 8 1
T1 release 0x2000 8 0

T0 clwb 0x100000000
T0 clflushopt 0x100000040
T0 clflush 0x100000080
T0 sfence
T0 mfence
T1 strand
T1 store 0x100000100 64 0102030405060708090a0b0c0d0e0f10
T1 dfence
T0 release 0x3000
T1 acquire 0x3000 8
T0 end op
"""


@pytest.fixture
def sample_trace(tmp_path: Path) -> Path:
    p = tmp_path / "sample.trace"
    p.write_text(SAMPLE_TRACE)
    return p


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="session")
def _private_run_cache(tmp_path_factory):
    """Every test session gets its own run cache (never a user's ~/.cache/pmsim)."""
    import os

    os.environ["PMSIM_CACHE"] = str(tmp_path_factory.mktemp("run-cache"))
