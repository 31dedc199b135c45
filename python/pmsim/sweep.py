"""Parameter sweeps: many independent runs, in parallel, as one DataFrame.

Runs go to a local process pool by default (one process per core). Given a Dask scheduler
address or a ``distributed.Client``, they go to that cluster instead — Dask distributed reaches
Slurm and PBS through dask-jobqueue (``pmsim sweep --cluster slurm``). pmsim has no scheduler of
its own. Results do not depend on where or in what order runs execute: each run is deterministic
and rows come back sorted by their position in the sweep.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from pmsim.api import flatten, run


def job_name(job: dict) -> str:
    """A job as its error messages name it: design, workload and grid point."""
    point = "".join(f", {k}={v}" for k, v in job["label"].items())
    return f"design {job['design']}, workload {job['workload']}{point}"


def _one(job: dict) -> dict:
    from pmsim import PmsimError, cache

    use_cache = job.get("cache", True)
    k = cache.key(job["design"], workload=job["workload"], params=job["params"], config=job.get("config"))
    stats = cache.load(k) if use_cache else None
    flat = None
    if stats is not None:
        try:
            flat = flatten(stats)
        except (KeyError, TypeError, AttributeError, ValueError, PmsimError):  # damaged: rerun the job
            stats = None
    if stats is None:
        try:
            stats = run(job["design"], workload=job["workload"], config=job.get("config"), **job["params"])
        except PmsimError as e:
            # Which of the sweep's runs failed: the core's message names only what went wrong.
            raise PmsimError(f"{job_name(job)}: {e}") from None
        try:
            cache.store(k, stats)
        except OSError:  # a read-only or full cache folder never fails the run
            pass
        flat = flatten(stats)
    return job_row(job, flat)


STAT_PREFIX = "stats."


def job_row(job: dict, flat: dict) -> dict:
    """A sweep's row: the job's ``design``, ``workload`` and grid values, then the run's flat
    statistics. A statistic named as a grid parameter (``threads``: the trace threads simulated,
    one more than the workload's ``threads`` with a remote stream) never replaces the grid
    value: it goes under ``stats.<name>`` (a column for every row). So does a ``design`` or
    ``workload`` statistic that differs from the job's (the stat ``design`` is the job's)."""
    row = {"design": job["design"], "workload": job["workload"], **job["label"]}
    for k, v in flat.items():
        if k in job["label"] or (k in row and row[k] != v):
            row[STAT_PREFIX + k] = v
        else:
            row[k] = v
    return row


def jobs_for(
    designs: Sequence[str],
    workloads: Sequence[str],
    grid: dict[str, Iterable[Any]] | None = None,
    **fixed: Any,
) -> list[dict]:
    """The cartesian product designs × workloads × grid, each with the fixed parameters.

    ``designs`` and ``workloads`` are a name or a list of names; ``grid`` maps a parameter to a
    non-empty list of values. A parameter given twice (in the grid and fixed, or as both
    ``pm.write_ns`` and ``pm_write_ns``) is refused: one of the values would silently not run.
    ``config=FILE`` (a TOML machine configuration) is the base every job's machine parameters
    apply to, as ``--config`` of ``pmsim run``.
    """
    from pmsim import PmsimError
    from pmsim.api import check_once, names_arg, path_arg

    config = path_arg("config", fixed.pop("config", None))
    if config is not None:
        if not os.path.isfile(config):
            raise PmsimError(f"config {config}: no such file")
        config = os.path.abspath(config)

    designs = names_arg("designs", designs, allow_empty=True)
    workloads = names_arg("workloads", workloads, allow_empty=True)
    grid = {} if grid is None else grid
    if not isinstance(grid, dict):
        raise PmsimError(f"grid must be a dict of parameter -> list of values, got {grid!r}")
    values_of = {}
    for k, vs in grid.items():
        if isinstance(vs, (str, bytes)) or not isinstance(vs, Iterable):
            raise PmsimError(f"grid '{k}' must be a list of values (e.g. [90, 180]), got {vs!r}")
        values_of[k] = list(vs)
        if not values_of[k]:
            raise PmsimError(f"grid '{k}': no values (give at least one)")
    check_once([("grid", grid), ("fixed", fixed)])
    keys = list(grid)
    out = []
    for w in workloads:
        for values in itertools.product(*(values_of[k] for k in keys)) if keys else [()]:
            label = dict(zip(keys, values, strict=True))
            for d in designs:
                job = {"design": d, "workload": w, "label": label, "params": {**fixed, **label}}
                out.append({**job, "config": config} if config else job)
    return out


def check_jobs(jobs: list[dict]) -> None:
    """Rejects unknown designs, workloads and parameter names before any run starts.

    Parameter values are checked here too, so a bad ``--grid`` value stops the sweep before its
    progress bar starts, by the core's own checks: machine values (and a ``config`` file), and
    workload values (:func:`pmsim.api.check_workload_params`; what a workload checks only when it
    builds its trace is left to its run).
    """
    from pmsim import PmsimError, _core
    from pmsim.api import check_workload_params, config_params, designs, unknown_param_message, workloads

    have_d = [d for d, _ in designs()]
    have_w = {w["name"]: [p["name"] for p in w["params"]] for w in workloads()}
    cfg = set()
    for name, _, _ in config_params():
        cfg.add(name)
        cfg.add(name.replace(".", "_", 1))
    for j in jobs:
        if j["design"] not in have_d:
            raise PmsimError(f"unknown design '{j['design']}' (valid: {', '.join(have_d)})")
        if j["workload"] not in have_w:
            raise PmsimError(f"workload '{j['workload']}': unknown workload (valid: {', '.join(have_w)})")
        bad = sorted(k for k in j["params"] if k not in cfg and k not in have_w[j["workload"]])
        if bad:
            if not any(bad[0] in ps for ps in have_w.values()):
                # Neither a machine parameter nor any workload's: as pmsim.run words it.
                raise PmsimError(unknown_param_message(bad[0], j["workload"], have_w[j["workload"]]))
            valid = ", ".join(sorted(have_w[j["workload"]]))
            raise PmsimError(
                f"workload '{j['workload']}': parameter '{bad[0]}' does not apply to this workload "
                f"(workload parameters: {valid}; machine parameters: see 'pmsim config show')"
            )
    seen = set()
    seen_wl = set()
    for j in jobs:
        params = {str(k): str(v) for k, v in j["params"].items()}
        machine, wl = _core.split_kwargs(params)
        wl_key = (j["workload"], tuple(sorted(wl.items())))
        if wl_key not in seen_wl:
            seen_wl.add(wl_key)
            check_workload_params(j["workload"], wl)
        key = (j.get("config"), tuple(sorted(machine.items())))
        if key not in seen:
            seen.add(key)
            try:
                _core.config_show(key[0], machine)
            except PmsimError as e:
                # Name the grid point: a cartesian grid may pair values that are each valid
                # but not together (a cache size with an associativity).
                point = ", ".join(f"{k}={v}" for k, v in sorted(machine.items()))
                raise PmsimError(f"machine {point}: {e}" if point else str(e)) from None


def run_jobs(
    jobs: list[dict],
    *,
    workers: int | None = None,
    scheduler: Any = None,
    progress: bool = True,
    desc: str = "pmsim",
    cache: bool = True,
) -> pd.DataFrame:
    """Runs ``jobs`` (from :func:`jobs_for`) and returns one row per job, in job order.

    Each run's result is cached (:mod:`pmsim.cache`); ``cache=False`` reruns every job. The
    first failing run stops the sweep and its error (a :class:`pmsim.PmsimError`) is raised;
    runs not yet started are cancelled.
    """
    from pmsim.api import int_arg

    if workers is not None:
        workers = int_arg("workers", workers, 1, None)
    check_jobs(jobs)
    jobs = [{**j, "cache": cache} for j in jobs]
    rows: list[dict | None] = [None] * len(jobs)
    bar = tqdm(total=len(jobs), desc=desc, disable=not progress, unit="run")
    try:
        if scheduler is not None:
            client, owned = _dask_client(scheduler)
            try:
                from distributed import as_completed as dask_completed

                futures = {client.submit(_one, j, pure=False): i for i, j in enumerate(jobs)}
                try:
                    for f in dask_completed(futures):
                        rows[futures[f]] = f.result()
                        bar.update(1)
                except BaseException:
                    client.cancel(list(futures))
                    raise
            finally:
                if owned:
                    client.close()
        elif (workers or os.cpu_count() or 1) <= 1 or len(jobs) <= 1:
            for i, j in enumerate(jobs):
                rows[i] = _one(j)
                bar.update(1)
        else:
            ex = ProcessPoolExecutor(max_workers=min(workers or os.cpu_count() or 1, len(jobs)))
            try:
                futs = {ex.submit(_one, j): i for i, j in enumerate(jobs)}
                for f in as_completed(futs):
                    rows[futs[f]] = f.result()
                    bar.update(1)
            except BaseException:
                ex.shutdown(wait=False, cancel_futures=True)
                raise
            ex.shutdown()
    finally:
        bar.close()
    return pd.DataFrame(rows)


TABLE_FORMATS = {".csv": "CSV", ".parquet": "Parquet", ".json": "JSON"}


def table_format(path: str) -> str:
    """The format a sweep's rows are written in, from ``path``'s suffix; checked before a sweep runs.

    ``.csv``, ``.parquet`` and ``.json`` (one object per row); a path without a suffix (or a
    device such as ``/dev/stdout``) gets CSV. Any other suffix is refused rather than written as
    CSV under a name that promises something else (``results.xlsx``).
    """
    from pathlib import Path

    from pmsim import PmsimError

    suffix = Path(path).suffix.lower()
    if suffix in TABLE_FORMATS:
        return suffix
    if not suffix or str(path).startswith("/dev/"):
        return ".csv"
    known = ", ".join(TABLE_FORMATS)
    raise PmsimError(f"output {path}: unknown table format '{suffix}' (use {known}, or no suffix for CSV)")


def write_table(df: pd.DataFrame, path: str) -> None:
    """Writes a sweep's rows in the format of :func:`table_format`; atomically."""
    from pmsim.output import write_bytes

    fmt = table_format(path)
    if fmt == ".parquet":
        import io

        buf = io.BytesIO()
        df.to_parquet(buf, index=False, engine="pyarrow")
        write_bytes(path, buf.getvalue())
    elif fmt == ".json":
        write_bytes(path, df.to_json(orient="records", indent=1).encode() + b"\n")
    else:
        write_bytes(path, df.to_csv(index=False).encode())


def _dask_client(scheduler: Any):
    """A Dask client for ``scheduler`` and whether we created it (and so must close it)."""
    try:
        from distributed import Client
    except ImportError as e:  # pragma: no cover - depends on the install
        from pmsim import PmsimError

        raise PmsimError("cluster sweeps need Dask distributed: pip install 'pmsim[cluster]'") from e
    if isinstance(scheduler, Client):
        return scheduler, False
    from pmsim import PmsimError

    try:
        # An address (tcp://host:8786) or a cluster object (LocalCluster, SLURMCluster, PBSCluster, ...).
        return Client(scheduler, timeout="30s"), True
    except OSError as e:
        raise PmsimError(f"--scheduler {scheduler}: cannot reach the Dask scheduler: {e}") from e
    except (ValueError, TypeError, KeyError) as e:
        # Dask's address parser: 'foo' (no port), 'tcp://host:abc', 'http://...' (no such scheme).
        raise PmsimError(
            f"--scheduler {scheduler}: not a Dask scheduler address ({type(e).__name__}: {e}); "
            "expected tcp://HOST:PORT"
        ) from e


def sweep(
    designs: Sequence[str],
    workloads: Sequence[str],
    grid: dict[str, Iterable[Any]] | None = None,
    *,
    workers: int | None = None,
    scheduler: Any = None,
    progress: bool = True,
    cache: bool = True,
    **fixed: Any,
) -> pd.DataFrame:
    """Runs every design on every workload for every point of ``grid``; the same columns as
    ``pmsim sweep -o results.parquet`` writes. Runs are cached (``cache=False`` reruns them).
    ``designs`` and ``workloads`` are a name or a list of names; ``workers`` is at least 1. A
    parameter both in ``grid`` and fixed (or spelled twice: ``pm.write_ns``, ``pm_write_ns``) is
    refused. ``config=FILE`` runs every job on that TOML machine configuration (the grid and
    fixed machine parameters apply on top of it).

    >>> sweep(["baseline", "eadr"], ["array"], grid={"pm_write_ns": [90, 180]}, ops=200)
    """
    from pmsim.api import bool_arg, names_arg

    progress, cache = bool_arg("progress", progress), bool_arg("cache", cache)
    # An empty list would return an empty table: surely not what was meant.
    designs, workloads = names_arg("designs", designs), names_arg("workloads", workloads)
    return run_jobs(
        jobs_for(designs, workloads, grid, **fixed),
        workers=workers,
        scheduler=scheduler,
        progress=progress,
        cache=cache,
    )
