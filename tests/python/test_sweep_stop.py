"""A parallel sweep stops at once (Ctrl-C, a failed run), refuses an unwritable ``-o`` before its
first run, and refuses an option of one value given twice, as ``pmsim run`` does."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PMSIM

import pmsim

sweep_mod = sys.modules["pmsim.sweep"]  # `pmsim.sweep` is the function

# Four runs of several seconds each (about 5 s unloaded), two at a time: before the fix one Ctrl-C
# let the three runs already handed to the pool finish (15-40 s), and a second one hung pmsim.
LONG_SWEEP = [
    "sweep",
    "--designs",
    "baseline,eadr",
    "--workloads",
    "array",
    "--grid",
    "seed=1,2",
    "-p",
    "ops=100000",
    "-j",
    "2",
    "--no-cache",
]


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _start_long_sweep(tmp_path: Path, err_path: Path, env: dict, **popen) -> subprocess.Popen:
    """Starts LONG_SWEEP writing its table to tmp_path/out.csv and its stderr to ``err_path``."""
    with open(err_path, "w") as err:
        return subprocess.Popen(
            [*PMSIM, *LONG_SWEEP, "-o", str(tmp_path / "out.csv")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            **popen,
        )


@pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGINT are POSIX")
@pytest.mark.parametrize("presses", [1, 2], ids=["ctrl-c", "ctrl-c-twice"])
def test_ctrl_c_stops_a_parallel_sweep_at_once(tmp_path, presses):
    cache = tmp_path / "cache"
    err_path = tmp_path / "err"
    env = {**os.environ, "PMSIM_CACHE": str(cache)}

    def as_from_a_terminal():
        # pytest may run with SIGINT ignored (inherited); a terminal's shell gives the default.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setpgrp()

    p = _start_long_sweep(tmp_path, err_path, env, preexec_fn=as_from_a_terminal)
    try:
        # The progress bar shows once the jobs are checked and the pool starts (imports take
        # seconds on a loaded machine); then the workers are running their first jobs.
        deadline = time.monotonic() + 120
        while "0/4" not in err_path.read_text() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert p.poll() is None, err_path.read_text()
        assert "0/4" in err_path.read_text(), err_path.read_text()
        time.sleep(0.5)
        for _ in range(presses):
            os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
            time.sleep(0.2)
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    err = err_path.read_text()
    assert p.returncode == 130, (p.returncode, err)
    assert err.rstrip().endswith("pmsim: interrupted"), err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    # The workers went with it (none left running a job), no run finished after the Ctrl-C
    # (a run takes seconds: none had finished before it), and no table was written.
    deadline = time.monotonic() + 5
    while not _group_gone(p.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group_gone(p.pid)
    assert not list(cache.rglob("*.json")), list(cache.rglob("*"))
    assert not (tmp_path / "out.csv").exists()


def _fail_or_sleep(job: dict) -> dict:
    if job["design"] == "eadr":
        time.sleep(0.3)
        raise pmsim.PmsimError(f"{sweep_mod.job_name(job)}: failed on purpose")
    time.sleep(60)
    raise AssertionError("a run still going after the sweep failed")


@pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="workers see the patched job through fork"
)
def test_a_failed_run_stops_the_parallel_sweep_at_once(monkeypatch):
    # Before, the runs already handed to the pool ran on to their end (here a minute) while the
    # error waited; now they are stopped with the sweep.
    monkeypatch.setattr(sweep_mod, "_one", _fail_or_sleep)
    started = time.monotonic()
    with pytest.raises(pmsim.PmsimError, match="design eadr, workload array.*failed on purpose"):
        pmsim.sweep(["baseline", "eadr"], ["array"], grid={"ops": [5, 6]}, workers=2, progress=False)
    assert time.monotonic() - started < 30
    assert not multiprocessing.active_children()


# --- kill PID (SIGTERM), or SIGKILL, of a parallel sweep: no worker left behind ---------------


def _children(pid: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``pid``, from /proc."""
    kids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == pid and state != "Z":
            kids.append(int(d.name))
    return kids


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_killed_parallel_sweep_leaves_no_worker(tmp_path, sig):
    # `kill PID` signals the sweep's process only (not its group, as Ctrl-C or `timeout` do):
    # before, pmsim died at once and its two workers, re-parented to init, waited on the pool's
    # queue forever. Now SIGTERM stops them as Ctrl-C does (exit 143); after a SIGKILL the kernel
    # kills them (PR_SET_PDEATHSIG).
    err_path = tmp_path / "err"
    env = {**os.environ, "PMSIM_CACHE": str(tmp_path / "cache")}
    # Its own group: only what is sent to its PID reaches it.
    p = _start_long_sweep(tmp_path, err_path, env, start_new_session=True)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            workers = _children(p.pid)
            if "0/4" in err_path.read_text() and len(workers) == 2:
                break
            time.sleep(0.1)
        assert p.poll() is None and len(workers) == 2, (workers, err_path.read_text())
        time.sleep(0.3)
        os.kill(p.pid, sig)
        p.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(map(_running, workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [w for w in workers if _running(w)], workers
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for w in workers:  # never leave them behind, whatever failed
            if _running(w):
                os.kill(w, signal.SIGKILL)
    err = err_path.read_text()
    if sig == signal.SIGTERM:
        assert p.returncode == 143, (p.returncode, err)
        assert err.rstrip().endswith("pmsim: terminated"), err
        assert "Traceback" not in err, err
    else:
        assert p.returncode == -signal.SIGKILL
    assert not (tmp_path / "out.csv").exists()


# --- the default -j: the CPUs this process may run on ------------------------------------------


def test_the_default_workers_follow_the_cpu_affinity(monkeypatch):
    monkeypatch.delattr(os, "process_cpu_count", raising=False)  # Python 3.13's, the same rule
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert sweep_mod.default_workers() == 1

    # One CPU allowed (taskset -c 3, a 1-core Slurm cpuset): no pool of 64 processes, the runs
    # go one after another in this process.
    def no_pool(*a, **k):
        raise AssertionError("a process pool for one allowed CPU")

    monkeypatch.setattr(sweep_mod, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(sweep_mod, "_one", lambda job: {"design": job["design"], "workload": job["workload"]})
    df = sweep_mod.run_jobs(sweep_mod.jobs_for(["baseline", "eadr"], ["array"], ops=5), progress=False)
    assert list(df.design) == ["baseline", "eadr"]

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 5, 7}, raising=False)
    assert sweep_mod.default_workers() == 3
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS, Windows: the CPU count
    assert sweep_mod.default_workers() == 64


# --- -o that cannot be written: refused before the first run ---------------------------------


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
@pytest.mark.parametrize(
    "args",
    [
        [
            "sweep",
            "--designs",
            "baseline,eadr",
            "--workloads",
            "array,nstore",
            "-p",
            "ops=300",
            "-j",
            "1",
            "--no-cache",
        ],
        ["compare", "--designs", "baseline,eadr", "-p", "ops=300", "-j", "1"],
    ],
    ids=["sweep", "compare"],
)
@pytest.mark.parametrize("out", ["/proc/pmsim-x.csv", "/proc/pmsim-no/x.csv"], ids=["in-proc", "under-proc"])
def test_an_output_that_cannot_be_written_is_refused_before_any_run(cli, tmp_path, monkeypatch, args, out):
    # /proc passes permission checks for root; only creating a file there shows it refuses.
    monkeypatch.setenv("PMSIM_CACHE", str(tmp_path / "cache"))
    p = cli(*args, "-o", out)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith(f"pmsim: error: {out}: cannot write"), p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert "run/s" not in p.stderr, p.stderr  # no progress bar: no run started
    assert not (tmp_path / "cache").exists()


def test_an_output_in_new_folders_is_written(cli, tmp_path: Path):
    out = tmp_path / "new" / "sub" / "rows.json"
    p = cli("sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=5", "-q", "-o", out)
    assert p.returncode == 0, p.stderr
    assert out.is_file()
    assert [f.name for f in out.parent.iterdir()] == ["rows.json"]  # no probe file left


# --- an option of one value given twice -------------------------------------------------------


@pytest.mark.parametrize(
    "args, twice",
    [
        (["sweep", "--designs", "baseline", "--designs", "eadr", "--workloads", "array"], "--designs"),
        (["sweep", "--designs", "baseline", "--workloads", "array", "--workloads", "nstore"], "--workloads"),
        (["compare", "--designs", "baseline", "--designs", "eadr"], "--designs"),
        (["compare", "--workload", "array", "--workload", "nstore"], "--workload"),
        (["analyze", "--workload", "array", "--model", "epoch", "--model", "strict"], "--model"),
        (
            ["crash", "--workload", "array", "--design", "baseline", "--random", "3", "--random", "5"],
            "--random",
        ),
        (
            [
                "crash",
                "--workload",
                "array",
                "--design",
                "baseline",
                "--every",
                "--model",
                "ep",
                "--model",
                "x86",
            ],
            "--model",
        ),
        (["reproduce", "--scale", "quick", "--scale", "full"], "--scale"),
    ],
    ids=[
        "sweep-designs",
        "sweep-workloads",
        "compare-designs",
        "compare-workload",
        "analyze-model",
        "crash-random",
        "crash-model",
        "reproduce-scale",
    ],
)
def test_a_repeated_option_of_one_value_is_refused(cli, tmp_path, args, twice):
    p = cli(*args, "-p", "ops=5", cwd=tmp_path) if args[0] != "reproduce" else cli(*args, cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"{twice} is given twice" in p.stderr and "give it once" in p.stderr, p.stderr
    assert f"'pmsim {args[0]} --help'" in p.stderr, p.stderr
    assert not any(tmp_path.iterdir())


def test_an_option_with_a_default_given_once_is_accepted(cli):
    # compare's --workload has a default (array): giving it once is not "twice".
    p = cli("compare", "--workload", "nstore", "--designs", "baseline", "-p", "ops=5", "-q", "-j", "1")
    assert p.returncode == 0, p.stderr
