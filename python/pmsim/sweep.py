"""Parameter sweeps: many independent runs, in parallel, as one DataFrame.

Runs go to a local process pool by default (one process per CPU this process may use). Given a Dask scheduler
address or a ``distributed.Client``, they go to that cluster instead — Dask distributed reaches
Slurm and PBS through dask-jobqueue (``pmsim sweep --cluster slurm``). pmsim has no scheduler of
its own. Results do not depend on where or in what order runs execute: each run is deterministic
and rows come back sorted by their position in the sweep.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from pmsim.api import flatten, run


def job_name(job: dict) -> str:
    """A job as its error messages name it: design, workload and grid point."""
    point = "".join(f", {k}={v}" for k, v in job["label"].items())
    return f"design {job['design']}, workload {job['workload']}{point}"


# In a local pool's worker: per job (by its index), the pid of the worker running it, else 0.
_running: Any = None


def _one(job: dict) -> dict:
    index = job.get("_index")
    if _running is not None and index is not None:
        _running[index] = os.getpid()
        try:
            return _run_one(job)
        finally:
            _running[index] = 0
    return _run_one(job)


def _run_one(job: dict) -> dict:
    from pmsim import PmsimError, cache

    use_cache = job.get("cache", True)
    k = cache.key(job["design"], workload=job["workload"], params=job["params"], config=job.get("config"))
    stats = cache.load(k, design=job["design"]) if use_cache else None
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


def default_workers() -> int:
    """The local pool's default size: one worker per CPU this process may run on. That is its
    CPU affinity (``taskset``, a Slurm or cgroup cpuset), not the host's count: a job given 4
    cores of a 128-core node starts 4 workers, not 128."""
    count = getattr(os, "process_cpu_count", None)  # Python 3.13: the affinity's
    if count is not None:
        return count() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this platform (macOS, Windows)
        return os.cpu_count() or 1


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

    config = path_arg("config", fixed.pop("config", None))  # a TOML file: checked there
    if config is not None:
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
    an interrupt (Ctrl-C: KeyboardInterrupt) stops it too, within about a second. Either way runs
    not yet started are cancelled and the local worker processes terminated: the runs they had
    in progress are lost (a cache entry is written whole or not at all), the finished ones stay
    cached, so the sweep restarted picks up where it stopped. SIGTERM or SIGHUP (``kill PID``)
    stops a local pool the same way, then raises :class:`Terminated` (a SystemExit, status
    143 or 129); workers die with the process that started them, even one killed outright.
    ``workers`` defaults to :func:`default_workers`.
    """
    from pmsim.api import int_arg

    if workers is not None:
        workers = int_arg("workers", workers, 1, None)
    check_jobs(jobs)
    with unchanged_inputs(j.get("config") for j in jobs):
        return _run_jobs(jobs, workers, scheduler, progress, desc, cache)


def _stamp(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@contextlib.contextmanager
def unchanged_inputs(paths: Iterable[str | None]) -> Iterator[None]:
    """Input files (configurations, traces) that must stay as they are while the runs that read
    them are in progress: each run reads its input again, so a file edited or regenerated
    meanwhile would give a table mixing its two versions (a tester's finding: a trace regenerated
    4x shorter during `compare` showed two designs 6x faster). Raises a :class:`PmsimError`
    naming the file, after the runs, if one changed; the runs stay cached."""
    from pmsim import PmsimError

    before = {p: _stamp(p) for p in dict.fromkeys(x for x in paths if x)}
    yield
    for p, st in before.items():
        if st is not None and _stamp(p) != st:
            raise PmsimError(
                f"{p} changed while the runs that read it were in progress: the results would mix "
                "its two versions; run again once it stays as it is"
            )


def _run_jobs(
    jobs: list[dict], workers: int | None, scheduler: Any, progress: bool, desc: str, cache: bool
) -> pd.DataFrame:
    jobs = [{**j, "cache": cache} for j in jobs]
    rows: list[dict | None] = [None] * len(jobs)
    # No stderr (``2>&-``, pythonw) to draw the bar on: no bar.
    bar = tqdm(total=len(jobs), desc=desc, disable=not progress or sys.stderr is None, unit="run")
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
        elif (workers or default_workers()) <= 1 or len(jobs) <= 1:
            for i, j in enumerate(jobs):
                rows[i] = _one(j)
                bar.update(1)
        else:
            ex = None
            n = min(workers or default_workers(), len(jobs))
            procs: dict = {}
            with _stop_signals_raise():
                try:
                    with _signals_held():
                        try:
                            # Which worker runs which job, should one die (_worker_died).
                            running = multiprocessing.RawArray("q", len(jobs))
                            # Workers are started by the first submit; they inherit the signals held.
                            ex = ProcessPoolExecutor(
                                max_workers=n, initializer=_worker_init, initargs=(os.getpid(), running)
                            )
                            futs = {ex.submit(_one, {**j, "_index": i}): i for i, j in enumerate(jobs)}
                        except OSError as e:
                            raise _cannot_start(n, e) from None
                        procs = dict(getattr(ex, "_processes", None) or {})
                    for f in as_completed(futs):
                        rows[futs[f]] = f.result()
                        bar.update(1)
                except BrokenProcessPool:
                    if ex is not None:
                        _stop_pool(ex)
                    raise _worker_died(jobs, running, procs, rows, cache) from None
                except BaseException:
                    if ex is not None:
                        _stop_pool(ex)
                    raise
            ex.shutdown()
    finally:
        bar.close()
    return pd.DataFrame(rows)


class Terminated(SystemExit):
    """A parallel sweep stopped by SIGTERM (``kill PID``, a parent's ``terminate()``, a batch
    system's cancel) or SIGHUP, after its workers were stopped. A SystemExit with status
    128 + the signal's number (143 for SIGTERM), as the shell reports a process that signal
    ended: uncaught, a script using the API exits with it quietly; ``pmsim`` says ``what``."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum
        self.what = (
            "terminated" if signum == signal.SIGTERM else f"terminated ({signal.Signals(signum).name})"
        )


# Signals that end a sweep from outside; Ctrl-C (SIGINT) is KeyboardInterrupt's.
_STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
_HELD_SIGNALS = {signal.SIGINT, *_STOP_SIGNALS}


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """While a local pool runs, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread,
    so that the sweep stops its workers (:func:`_stop_pool`) as on Ctrl-C. By default they end
    the process at once, and its workers, which do not get them (``kill PID`` signals one
    process), were left behind, blocked on the pool's queue forever. Only a signal at its default
    is taken over: one a caller ignores (nohup) or handles itself stays so."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for s in _STOP_SIGNALS:
        if signal.getsignal(s) == signal.SIG_DFL:
            old[s] = signal.signal(s, _raise_terminated)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _cannot_start(n: int, e: OSError) -> Exception:
    """The pool's processes could not start (too many open files, a read-only /dev/shm in a
    container, a process limit): say that, and that the runs can go without them."""
    from pmsim import PmsimError

    why = e.strerror or str(e)
    where = f" ({e.filename})" if e.filename else ""
    return PmsimError(
        f"cannot start {n} worker processes for the parallel runs: {why}{where}; "
        "rerun with -j 1 (workers=1), which runs them one after another in this process"
    )


def _worker_died(jobs: list[dict], running: Any, procs: dict, rows: list, cache: bool) -> Exception:
    """A worker process died under a run (killed by the system, e.g. out of memory, or crashed
    outright): which run it was running and how it died, not a bug report."""
    from pmsim import PmsimError

    # The pool terminated the other workers (SIGTERM) when it saw one die; the dead one ended
    # otherwise (SIGKILL from the OOM killer, SIGABRT from a failed allocation, ...).
    died = {}
    for pid, p in procs.items():
        with contextlib.suppress(OSError, ValueError, AssertionError):
            p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)
        code = getattr(p, "exitcode", None)
        if code is not None and code != -signal.SIGTERM:
            died[pid] = code
    how = []
    for i in range(len(jobs)):
        if running[i] and running[i] in died:
            code = died[running[i]]
            end = f"killed by {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
            how.append(f"{job_name(jobs[i])} ({end})")
    if how:
        what = f"a worker process died while running {'; '.join(how)}"
    else:
        busy = [job_name(jobs[i]) for i in range(len(jobs)) if running[i]]
        what = "a worker process died" + (f" (runs in progress: {'; '.join(busy)})" if busy else "")
    left = sum(r is None for r in rows)
    kept = " (the finished ones are cached: a rerun resumes)" if cache else ""
    return PmsimError(
        f"{what}: the system killed it (out of memory?) or it crashed; {left} of {len(jobs)} runs "
        f"did not finish{kept}; fewer parallel runs need less memory: rerun with -j 1"
    )


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _worker_init(parent: int | None = None, running: Any = None) -> None:
    """A pool worker leaves Ctrl-C to the sweep. The terminal sends SIGINT to the whole process
    group; a worker that took it would report it as its run's error and go on to its next job.
    The sweep stops its workers itself (:func:`_stop_pool`). Workers start with the signals
    held (:func:`_signals_held`): SIGINT ignored now (a Ctrl-C that came meanwhile is dropped),
    SIGTERM and SIGHUP back at their default (a handler of the sweep's, inherited through fork,
    would keep ``terminate()`` from ending the worker). A worker also dies with the sweep's
    process (``parent``), even one killed outright (:func:`_die_with_parent`)."""
    global _running
    _running = running
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for s in _STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    if parent is not None:
        _die_with_parent(parent)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent: int) -> None:
    """Ends this worker when the sweep's process ``parent`` ends, however it ends (SIGKILL, a
    crash): else the worker, holding the pool's queue open, waits on it forever. On Linux the
    kernel sends SIGKILL when the process that forked the worker ends (``PR_SET_PDEATHSIG``);
    elsewhere a thread checks every second that ``parent`` is still there."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                # The parent may have gone before the prctl: then nothing would be sent.
                if not _alive(parent):
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch_parent, args=(parent,), name="pmsim-parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists (EPERM: not ours to signal)
        return True
    return True


def _watch_parent(parent: int) -> None:
    ppid = os.getppid()
    while True:
        if os.getppid() != ppid or not _alive(parent):
            os._exit(1)
        time.sleep(1.0)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back (not lost: they arrive at the end) while the pool
    forks its workers, so none gets one before :func:`_worker_init` has set what it does with
    them (a Ctrl-C would kill it with a traceback; a SIGTERM, through the sweep's inherited
    handler, would not kill it)."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ctrl-C (and a second SIGTERM or SIGHUP that the sweep handles: :func:`_stop_signals_raise`)
    ignored for a short, bounded cleanup (the main thread's handlers only; elsewhere, as in a
    thread of a notebook, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}
    for s in _STOP_SIGNALS:
        if signal.getsignal(s) is _raise_terminated:
            old[s] = signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _stop_pool(ex: ProcessPoolExecutor, grace_s: float = 5.0) -> None:
    """Stops a local pool now, after an interrupt or a failed run: jobs not started are cancelled
    and the worker processes terminated (killed if they outlive ``grace_s``), the runs they had in
    progress lost. ``shutdown(cancel_futures=True)`` alone cancels only the jobs not yet handed to
    a worker: the workers went on running theirs (minutes at full scale), and interpreter exit
    joined the pool, where a second Ctrl-C printed a traceback and hung. A second Ctrl-C during
    this cleanup is ignored; the cleanup takes well under a second."""
    with _sigint_ignored():
        # (shutdown drops the pool's references to its processes and thread: taken first.)
        procs = list((getattr(ex, "_processes", None) or {}).values())
        manager = getattr(ex, "_executor_manager_thread", None)
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            with contextlib.suppress(OSError, ValueError):
                p.terminate()
        deadline = time.monotonic() + grace_s
        for p in procs:
            with contextlib.suppress(OSError, ValueError, AssertionError):
                p.join(max(0.0, deadline - time.monotonic()))
                if p.is_alive():
                    p.kill()
                    p.join(1.0)
        # The pool's manager thread sees its workers gone and ends; joined here, with a bound,
        # rather than by interpreter exit, without one.
        if manager is not None and manager is not threading.current_thread():
            manager.join(max(1.0, deadline - time.monotonic()))


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


def check_table_path(path: str) -> None:
    """Refuses, before the first run, an output path :func:`write_table` would refuse only after
    the last: a bad suffix (:func:`table_format`), what :func:`pmsim.output.check_writable` sees,
    and what only trying shows (``/proc/x.csv``, a read-only mount, a folder root may not write
    either): the path's missing folders are created, as ``reproduce --out`` creates its folder,
    and a file is created in its folder and removed. A device or FIFO (``/dev/stdout``), written
    through, is not tried."""
    import tempfile
    from pathlib import Path

    from pmsim import PmsimError
    from pmsim.output import check_writable

    table_format(path)
    check_writable(path)
    p = Path(path)
    if p.exists():
        real = p.resolve()
        if not real.is_file():
            return
        folder = real.parent
    else:
        folder = p.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PmsimError(
            f"{path}: cannot write: cannot create its folder {folder}: {e.strerror or e}"
        ) from None
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".pmsim-", suffix=".probe")  # short: any name fits
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise PmsimError(
            f"{path}: cannot write: cannot create a file in {folder}: {e.strerror or e}"
        ) from None


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
