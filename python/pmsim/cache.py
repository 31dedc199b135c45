"""The run cache: every run's result kept under a key of everything that decides it.

Why: a sweep or a reproduction is hundreds of independent deterministic runs. Keeping each
result as it finishes means an interrupted ``pmsim sweep`` or ``pmsim reproduce`` restarted
reruns only what had not finished, and gives byte-identical tables (a run is deterministic, so
a cached result is the result). The key is a SHA-256 of: the pmsim version and a hash of the
compiled core (so a rebuilt simulator never reuses an old answer), the design, the workload
name with all its parameters (or the trace file's content hash), and the *full* effective
machine configuration (``config show`` after overrides, so a changed default changes the key).

Entries are small JSON files (the run's stats) under ``$PMSIM_CACHE`` or ``~/.cache/pmsim``,
written atomically, so a killed run never leaves a half entry. Deleting the folder is always
safe. ``--no-cache`` (``cache=False``) reruns and refreshes the entries.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pmsim import _core


def cache_dir() -> Path:
    env = os.environ.get("PMSIM_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pmsim"


@functools.cache
def _core_hash() -> str:
    """Version plus the compiled core's content hash: results of another build never match."""
    h = hashlib.sha256(_core.__version__.encode())
    path = getattr(_core, "__file__", None)
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=4096)
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def key(
    design: str,
    *,
    workload: str | None = None,
    trace: str | None = None,
    params: dict[str, Any],
    config: str | None = None,
) -> str:
    """The cache key of one run (``params`` mixes machine and workload parameters; ``config``
    is a TOML machine configuration file, keyed by the configuration it gives, not its name)."""
    str_params = {str(k): str(v) for k, v in params.items()}
    cfg, wl = _core.split_kwargs(str_params)
    full_config = _core.config_show(config, cfg)
    if trace is not None:
        st = os.stat(trace)
        source = {"trace_sha256": _file_hash(os.path.realpath(trace), st.st_mtime_ns, st.st_size)}
    else:
        source = {"workload": workload, "params": dict(sorted(wl.items()))}
    blob = json.dumps(
        {"core": _core_hash(), "design": design, "source": source, "config": full_config},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


# The keys every run's stats have (pmsim-engine's RunStats), with their JSON types: an entry
# without one of them (or of another type) is not a result, whatever wrote it.
_NUM = (int, float)
RESULT_KEYS: dict[str, type | tuple[type, ...]] = {
    "pmsim_version": str,
    "design": str,
    "promise": str,
    "threads": int,
    "sim_time_ps": int,
    "sim_time_ns": _NUM,
    "drain_time_ns": _NUM,
    "events": int,
    "instructions": int,
    "operations": int,
    "roi_start_ns": _NUM,
    "roi_time_ns": _NUM,
    "ops_per_sec": _NUM,
    "op_latency_avg_ns": _NUM,
    "op_latency_max_ns": _NUM,
    "pm_stores": int,
    "pm_reads": int,
    "pm_writes": int,
    "stall_cycles": dict,
    "cores": list,
    "mcs": list,
    "caches": dict,
    "design_stats": dict,
    "artifact": dict,
    "engine_events": int,
    "net": dict,
}


def is_result(stats: object) -> bool:
    """Whether ``stats`` has the shape of a run's stats (every key of a fresh run, each of its type)."""
    if not isinstance(stats, dict):
        return False
    for k, t in RESULT_KEYS.items():
        v = stats.get(k)
        if not isinstance(v, t) or isinstance(v, bool):
            return False
    return all(isinstance(m, dict) for m in stats["mcs"])


def load(k: str, design: str | None = None) -> dict | None:
    """The cached result of key ``k``; None if absent, or if the entry is not a complete result
    (bad JSON, JSON nested too deep to read, another type, missing keys: a damaged or foreign
    file) or, given ``design``, is another design's (an entry copied or misfiled), so the run is
    redone and its entry overwritten."""
    p = cache_dir() / k[:2] / f"{k}.json"
    try:
        stats = json.loads(p.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not is_result(stats) or (design is not None and stats.get("design") != design):
        return None
    return stats


def store(k: str, stats: dict) -> None:
    d = cache_dir() / k[:2]
    d.mkdir(parents=True, exist_ok=True)
    # A unique temporary file, created exclusively and removed if writing it fails (a full
    # cache disk left one empty file per run behind).
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f"{k[:16]}.", suffix=".partial")
    try:
        from pmsim.output import current_umask

        with open(fd, "w") as f:
            os.fchmod(fd, 0o666 & ~current_umask())  # as a plain write (mkstemp's is 0600): shared caches
            f.write(json.dumps(stats))  # key order kept: it is the column order of a sweep
        os.replace(tmp, d / f"{k}.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
