"""pmsim: simulate persistent-memory ordering hardware, crash it, and check it recovers.

The Rust core (``pmsim._core``) does the simulation; this package is the front: the ``pmsim``
command, an API returning dicts and pandas DataFrames, parallel sweeps and plots.

>>> import pmsim
>>> stats = pmsim.run("baseline", workload="array", threads=2, ops=100)
>>> df = pmsim.sweep(designs=["baseline", "eadr"], workloads=["array"], ops=100)
"""

from pmsim._core import PmsimError, __version__
from pmsim.analysis import analyze
from pmsim.api import (
    config_params,
    config_show,
    crash,
    describe_violation,
    designs,
    flatten,
    run,
    trace_convert,
    trace_generate,
    trace_lint,
    trace_stats,
    workloads,
)
from pmsim.sweep import sweep

# The extension names its exception's module "_core", which pickle cannot import: errors raised in
# worker processes (local pools, Dask) would then fail to travel back. Name the public module.
PmsimError.__module__ = "pmsim"

__all__ = [
    "PmsimError",
    "__version__",
    "analyze",
    "config_params",
    "config_show",
    "crash",
    "describe_violation",
    "designs",
    "flatten",
    "run",
    "sweep",
    "trace_convert",
    "trace_generate",
    "trace_lint",
    "trace_stats",
    "workloads",
]
