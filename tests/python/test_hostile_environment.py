"""pmsim in a hostile environment (tester Q's findings): odd environment variables, closed or
Latin-1 standard streams, file names that are not UTF-8, configuration "files" that never end,
workers killed by the system, a pool that cannot start, temporary files that collide or are
planted, and a reproduction interrupted over an earlier one's folder."""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PMSIM

import pmsim
from pmsim import PmsimError, api, cache, cli, output
from pmsim.experiments import persistency

sweep = importlib.import_module("pmsim.sweep")  # the module (pmsim.sweep is also the function)

# A folder name with a byte that is not UTF-8, as Python hands it over (a lone surrogate).
BAD = os.fsdecode(b"n\xffu")


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    """``pmsim ARGV`` in this process: exit status, stdout, stderr (argparse exits, too)."""
    try:
        rc = cli.main(list(argv))
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _sh(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """A shell line running the installed ``pmsim`` as ``$PMSIM`` (redirections of its own)."""
    full = {**os.environ, "PMSIM": " ".join(PMSIM), **env}
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=full, capture_output=True, timeout=120, stdin=subprocess.DEVNULL
    )


# Q7 -----------------------------------------------------------------------------------------


def test_an_invalid_mplbackend_does_not_stop_the_plots(tmp_path: Path):
    code = (
        "import os, pandas as pd; from pathlib import Path; from pmsim import plots; "
        "df = pd.DataFrame({'x': [1, 2], 'y': [1.0, 2.0], 'h': ['a', 'a']}); "
        "p = plots.lines(df, x='x', y='y', hue='h', title='t', ylabel='y', path=Path('f.png')); "
        "print(plots.matplotlib.get_backend(), os.environ['MPLBACKEND'], p.read_bytes()[:4])"
    )
    env = {**os.environ, "MPLBACKEND": "bogus"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # Agg for pmsim's drawing; the user's variable is left as it was for anything else.
    assert r.stdout.split()[:2] == ["Agg", "bogus"] and "PNG" in r.stdout


# Q8 -----------------------------------------------------------------------------------------


@pytest.fixture
def bad_folder(tmp_path: Path) -> Path:
    """A folder whose name is not UTF-8, holding a trace and a configuration file."""
    d = tmp_path / BAD
    d.mkdir()
    pmsim.trace_generate("array", str(tmp_path / "a.trace"), ops=20)
    (d / "a.trace").write_bytes((tmp_path / "a.trace").read_bytes())
    (d / "x.toml").write_text("[pm]\nwrite_ns = 90.0\n")
    return d


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--trace", "{d}/a.trace", "--design", "baseline"],
        ["run", "--workload", "array", "-p", "ops=20", "--design", "baseline", "--config", "{d}/x.toml"],
        ["crash", "--trace", "{d}/a.trace", "--design", "asap-rp", "--random", "2"],
        ["trace", "stats", "{d}/a.trace"],
        ["trace", "gen", "--workload", "array", "-p", "ops=20", "-o", "{d}/t.bin"],
        ["trace", "convert", "{t}/a.trace", "{d}/c.bin"],
        ["sweep", "--designs", "baseline", "--workloads", "array", "--config", "{d}/x.toml", "-q"],
        ["reproduce", "broi", "--out", "{d}/out", "-q"],
    ],
    ids=["run-trace", "run-config", "crash", "stats", "gen", "convert", "sweep", "reproduce"],
)
def test_a_path_that_is_not_utf8_is_one_clear_error_before_anything_is_written(
    capsys, bad_folder: Path, argv: list[str]
):
    before = sorted(os.listdir(bad_folder))
    args = [a.format(d=bad_folder, t=bad_folder.parent) for a in argv]
    rc, out, err = _main(capsys, *args)
    assert rc == 2, err
    assert err.startswith("pmsim: error: ") and err.count("\n") == 1, err
    assert "n\\xffu" in err and "not valid UTF-8" in err and "internal error" not in err
    assert sorted(os.listdir(bad_folder)) == before  # nothing written, not even a folder


def test_the_api_names_a_path_that_is_not_utf8(bad_folder: Path):
    with pytest.raises(PmsimError, match=r"trace .*n\\xffu.*not valid UTF-8"):
        pmsim.run("baseline", trace=str(bad_folder / "a.trace"))


# Q17 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_sweep_with_stderr_closed_runs_without_its_progress_bar(tmp_path: Path, jobs: str):
    r = _sh(
        f"$PMSIM sweep --designs baseline,eadr --workloads array -p ops=50 -j {jobs} -o t.csv 2>&-",
        tmp_path,
        PMSIM_CACHE=str(tmp_path / "cache"),
    )
    assert r.returncode == 0, r.stdout
    assert b"error" not in r.stdout and (tmp_path / "t.csv").read_text().count("\n") == 3


def test_an_error_with_stderr_closed_never_goes_to_stdout(tmp_path: Path):
    r = _sh("$PMSIM sweep --designs nope --workloads array -o t.csv 2>&-", tmp_path)
    assert r.returncode == 2 and r.stdout == b""


# Q18 ----------------------------------------------------------------------------------------


def test_with_stdout_closed_data_is_refused_and_messages_go_to_stderr(tmp_path: Path):
    # The JSON had nowhere to go: exit 0 with the result lost was the old behaviour.
    r = _sh("$PMSIM run --workload array -p ops=20 --design eadr --json >&-", tmp_path)
    assert r.returncode == 2 and b"standard output is closed" in r.stderr, r.stderr
    # A summary is a message: it moves to stderr, and -o still writes its file.
    r = _sh("$PMSIM run --workload array -p ops=20 --design eadr -o s.json >&-", tmp_path)
    assert r.returncode == 0 and b"simulated time" in r.stderr, r.stderr
    assert '"design": "eadr"' in (tmp_path / "s.json").read_text()


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/./stdout", "/dev/fd/1"])
def test_with_stdout_closed_an_output_named_dev_stdout_is_refused_not_lost(tmp_path: Path, name: str):
    # Descriptor 1 is free, so the first file opened would take it; /dev/stdout would be that file.
    r = _sh(f"$PMSIM trace gen --workload array -p ops=20 -o {name} >&-", tmp_path)
    assert r.returncode == 2 and f"{name}: standard output is closed".encode() in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_with_stdout_closed_help_goes_to_stderr(tmp_path: Path):
    r = _sh("$PMSIM run --help >&-", tmp_path)
    assert r.returncode == 0 and b"--design" in r.stderr, r.stderr


def test_with_stdout_closed_a_broken_output_pipe_ends_quietly(tmp_path: Path):
    # The output is a FIFO whose reader leaves early: the broken pipe's quiet exit used stdout's
    # descriptor, which the closed-stdout stand-in did not have (a traceback, exit 1).
    os.mkfifo(tmp_path / "ff")
    r = _sh(
        "(head -c 100 < ff > /dev/null &); $PMSIM trace gen --workload array -p ops=200000 -o ff >&-",
        tmp_path,
    )
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr


# Q24 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", [{"PYTHONIOENCODING": "latin-1"}, {"PYTHONIOENCODING": "ascii"}])
def test_config_show_under_a_non_utf8_locale_is_a_toml_file_pmsim_reads(tmp_path: Path, how: dict):
    r = _sh("$PMSIM config show --set pm.write_ns=120.5 > c.toml", tmp_path, **how)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "c.toml").read_bytes().decode("utf-8")  # TOML is UTF-8
    assert "§" in text  # the help comments as pmsim wrote them, not mangled
    assert api.config(str(tmp_path / "c.toml"))["pm"]["write_ns"] == 120.5


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_output_a_non_utf8_stdout_cannot_encode_is_escaped_not_a_failure(tmp_path: Path, encoding: str):
    trace = tmp_path / "a.trace"
    pmsim.trace_generate("array", str(trace), ops=20)
    head, rest = trace.read_text().split("\n", 1)
    trace.write_text(f"{head}\n# meta note=made — by hand\n{rest}")
    r = _sh("$PMSIM trace stats a.trace", tmp_path, PYTHONIOENCODING=encoding)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith(b"note: made \\u2014 by hand\n") and r.stderr == b""
    r = _sh("$PMSIM workloads", tmp_path, PYTHONIOENCODING=encoding)  # '§' in a description
    assert r.returncode == 0 and r.stderr == b""


# Q11, Q13 -----------------------------------------------------------------------------------


def _config_cases(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate((16 << 20) + 1)  # sparse: no disk used
    return {
        "folder": str(tmp_path / "folder"),
        "fifo": str(tmp_path / "fifo"),
        "/dev/zero": "/dev/zero",
        "big": str(big),
    }


COMMANDS = [
    ["run", "--workload", "array", "-p", "ops=20", "--design", "baseline"],
    ["sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=20", "-q"],
    ["compare", "--designs", "baseline", "-p", "ops=20", "-q"],
    ["crash", "--workload", "array", "-p", "ops=20", "--design", "baseline", "--random", "2"],
    ["config", "show"],
    ["bench", "--ops", "20", "--repeat", "1"],
    ["reproduce", "asap", "-q"],
    ["analyze", "--workload", "cwl", "-p", "ops=20"],
]


@pytest.mark.parametrize("case", ["folder", "fifo", "/dev/zero", "big"])
def test_a_config_that_is_not_a_toml_file_is_one_message_for_every_command(
    capsys, tmp_path: Path, monkeypatch, case: str
):
    monkeypatch.chdir(tmp_path)
    path = _config_cases(tmp_path)[case]
    why = "too large for a configuration file" if case == "big" else "not a regular file"
    seen = set()
    for argv in COMMANDS:
        rc, out, err = _main(capsys, *argv, "--config", path)
        assert rc == 2 and out == "", (argv, err)
        assert err.startswith(f"pmsim: error: config {path}: ") and why in err, (argv, err)
        seen.add(err)
    assert len(seen) == 1  # the same words whichever command reads it
    assert not (tmp_path / "results").exists()  # reproduce refused it before creating its folder


def test_dev_null_as_config_is_an_empty_file_for_every_command(capsys, tmp_path: Path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    shown = [_main(capsys, "config", "show", "--config", c) for c in (str(empty), os.devnull)]
    assert shown[0] == shown[1] and shown[0][0] == 0
    df = pmsim.sweep(["baseline"], ["array"], ops=20, config=os.devnull, progress=False, cache=False)
    assert list(df.sim_time_ps) == [pmsim.run("baseline", workload="array", ops=20)["sim_time_ps"]]


# Q15, Q16 -----------------------------------------------------------------------------------


def _killed_under(design: str):
    """``pmsim.sweep.run`` that dies as the OOM killer kills (SIGKILL) when it runs ``design``
    (the local pool forks its workers: they have this one)."""
    real = sweep.run

    def run(d: str, **kw):
        if d == design:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(d, **kw)

    return run


def test_a_worker_killed_by_the_system_names_its_run_and_suggests_j1(capsys, monkeypatch, tmp_path: Path):
    monkeypatch.setattr(sweep, "run", _killed_under("eadr"))
    rc, out, err = _main(
        capsys,
        *("sweep", "--designs", "baseline,eadr", "--workloads", "array", "--grid", "ops=30,40"),
        *("-j", "2", "--no-cache", "-q", "-o", str(tmp_path / "t.csv")),
    )
    assert rc == 2, err
    assert err.startswith(
        "pmsim: error: a worker process died while running design eadr, workload array, ops="
    )
    assert "killed by SIGKILL" in err and "out of memory" in err and "-j 1" in err
    assert err.count("\n") == 1 and "bug in pmsim" not in err
    assert not (tmp_path / "t.csv").exists()


def test_a_pool_that_cannot_start_says_so_and_that_j1_works(monkeypatch):
    def no_pool(*a, **kw):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))  # a read-only /dev/shm (containers)

    monkeypatch.setattr(sweep, "ProcessPoolExecutor", no_pool)
    with pytest.raises(PmsimError, match=r"cannot start 2 worker processes .*Read-only file system.*-j 1"):
        pmsim.sweep(["baseline", "eadr"], ["array"], ops=20, workers=2, progress=False, cache=False)


def test_too_few_file_descriptors_for_the_pool_says_so(tmp_path: Path):
    code = (
        "import resource, sys; from pmsim.cli import main; "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (12, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
        "sys.exit(main(sys.argv[1:]))"
    )
    argv = ["sweep", "--designs", "baseline,eadr", "--workloads", "array", "-p", "ops=20", "-j", "2", "-q"]
    env = {**os.environ, "PMSIM_CACHE": str(tmp_path / "cache")}
    r = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("pmsim: error: cannot start 2 worker processes") and "-j 1" in r.stderr


# Q9, Q10, Q19, Q25, Q20 -----------------------------------------------------------------------


def test_a_name_of_255_bytes_can_be_written(tmp_path: Path):
    target = tmp_path / ("n" * 251 + ".csv")
    output.write_bytes(target, b"data")
    assert target.read_bytes() == b"data" and os.listdir(tmp_path) == [target.name]
    table = tmp_path / ("t" * 251 + ".csv")
    sweep.check_table_path(str(table))  # the sweep's probe of its folder, before the runs
    sweep.write_table(pmsim.sweep(["baseline"], ["array"], ops=20, progress=False), str(table))
    assert table.read_text().startswith("design,workload,")


def test_replacing_a_file_keeps_its_mode_and_a_new_one_gets_the_umask_default(tmp_path: Path):
    private = tmp_path / "private.json"
    private.write_text("old")
    private.chmod(0o600)
    output.write_text(private, "new")
    assert private.read_text() == "new" and stat.S_IMODE(private.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.json"
    old = os.umask(0o027)
    try:
        output.write_text(fresh, "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640


def test_the_cores_trace_writer_takes_a_255_byte_name_and_keeps_the_replaced_files_mode(tmp_path: Path):
    # `trace gen -o` is written by the Rust core (crates/pmsim-py/src/output.rs), not output.py.
    long = tmp_path / ("g" * 251 + ".bin")
    r = subprocess.run(
        [*PMSIM, "trace", "gen", "--workload", "array", "-p", "ops=20", "-o", str(long)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path) == [long.name]
    private = tmp_path / "private.bin"
    private.write_bytes(b"old")
    private.chmod(0o600)
    r = subprocess.run(
        [*PMSIM, "trace", "gen", "--workload", "array", "-p", "ops=20", "-o", str(private)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert private.read_bytes() == long.read_bytes() and stat.S_IMODE(private.stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == sorted([long.name, private.name])


def test_a_planted_partial_symlink_or_another_writers_temp_is_never_written(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "out.json.partial").symlink_to(victim)
    other = tmp_path / "t.csv.partial"
    other.write_text("another writer's half file")
    output.write_text(tmp_path / "out.json", "{}")
    output.write_text(tmp_path / "t.csv", "a\n")
    assert victim.read_text() == "precious" and not (tmp_path / "out.json").is_symlink()
    assert other.read_text() == "another writer's half file"
    assert (tmp_path / "out.json").read_text() == "{}" and (tmp_path / "t.csv").read_text() == "a\n"


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch):
    def full(*a, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(PmsimError, match="out.csv: cannot write: No space left on device"):
        output.write_bytes(tmp_path / "out.csv", b"x")
    monkeypatch.setenv("PMSIM_CACHE", str(tmp_path / "cache"))
    with pytest.raises(OSError):
        cache.store("ab" * 32, {"a": 1})
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


# Q1 -----------------------------------------------------------------------------------------


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_an_interrupted_reproduction_leaves_the_earlier_folder_as_it_was(tmp_path: Path, monkeypatch, stop):
    out = tmp_path / "res"
    persistency.reproduce(out=str(out), progress=False)
    folder = out / "persistency"
    (folder / "NOTES.txt").write_text("the earlier run's notes\n")
    (folder / "table1.csv").write_text("the earlier run's table\n")
    earlier = _files(folder)

    if stop == "ctrl-c":

        def fail(*a, **kw):  # late in the run, after most of the figures were written
            raise KeyboardInterrupt

        monkeypatch.setattr(persistency, "_paper_md", fail)
        with pytest.raises(KeyboardInterrupt):
            persistency.reproduce(out=str(out), progress=False)
    else:
        # `kill PID` at the same point, in a process of its own (SIGTERM's default kills).
        code = (
            "import os, signal, sys; from pmsim.experiments import persistency as p; "
            "p._paper_md = lambda *a, **k: os.kill(os.getpid(), signal.SIGTERM); "
            "p.reproduce(out=sys.argv[1], progress=False)"
        )
        r = subprocess.run(
            [sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 128 + signal.SIGTERM, r.stderr
    assert _files(folder) == earlier
    assert os.listdir(out) == ["persistency"]  # its partial folder removed

    monkeypatch.undo()
    (folder / "stale.png").write_bytes(b"a figure no run draws any more")
    d = persistency.reproduce(out=str(out), progress=False)
    assert d == folder and os.listdir(out) == ["persistency"]
    fresh = _files(folder)
    assert fresh["NOTES.txt"] != earlier["NOTES.txt"] and "stale.png" not in fresh
    assert set(fresh) == set(earlier)  # the same files, under the same names


def test_a_replaced_reproduction_folder_has_the_usual_mode_and_is_named_as_before(
    tmp_path: Path, monkeypatch, capsys
):
    rc, out, err = _main(capsys, "reproduce", "persistency", "--out", str(tmp_path), "-q")
    assert rc == 0 and f"wrote {tmp_path}/persistency/" in out
    assert sorted(os.listdir(tmp_path)) == ["persistency"]
    assert stat.S_IMODE((tmp_path / "persistency").stat().st_mode) == 0o777 & ~_umask()


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def test_trace_record_keeps_its_temporary_files_private(tmp_path: Path):
    """`trace record`'s temporary files (the runtime's trace, its process report, the metadata,
    the text conversion) were fixed names beside the output: a planted symlink was written
    through, a long output name overflowed NAME_MAX."""
    if not shutil.which("clang"):
        pytest.skip("needs clang (scripts/setup-tracer.sh)")
    src = tmp_path / "p.c"
    src.write_text("int main(void) { return 0; }\n")
    subprocess.run([*PMSIM, "trace", "cc", "-o", str(tmp_path / "p"), str(src)], check=True, timeout=120)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for suffix in (".partial", ".partial.bin", ".partial.meta", ".partial.procs"):
        (tmp_path / f"out.trace{suffix}").symlink_to(victim)
    out = tmp_path / "out.trace"
    out.write_text("old")
    out.chmod(0o600)
    long = tmp_path / ("n" * 250 + ".bin")
    for o in (out, long):
        r = subprocess.run(
            [*PMSIM, "trace", "record", "-o", str(o), "--", "./p"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious"
    assert out.read_text().startswith("# pmsim trace v1") and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert long.stat().st_size > 0
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".pmsim")]


def test_a_config_edited_while_the_runs_read_it_is_refused_not_mixed(tmp_path: Path, monkeypatch):
    # Tester Q's Q23: each run reads the configuration again; a file edited mid-sweep gave a
    # table mixing its two versions with exit 0.
    sweep_mod = sweep

    cfg = tmp_path / "m.toml"
    cfg.write_text("[pm]\nwrite_ns = 90.0\n")
    jobs = sweep_mod.jobs_for(["baseline", "eadr"], ["array"], ops=20, config=str(cfg))
    real = sweep_mod._run_jobs

    def edit_midway(jobs, *args):
        rows = real(jobs[:1], *args)
        cfg.write_text("[pm]\nwrite_ns = 300.0\n")
        return rows

    monkeypatch.setattr(sweep_mod, "_run_jobs", edit_midway)
    with pytest.raises(PmsimError, match=r"m\.toml changed while the runs that read it were in progress"):
        sweep_mod.run_jobs(jobs, workers=1, progress=False, cache=False)
    # Left alone, the same sweep runs.
    monkeypatch.setattr(sweep_mod, "_run_jobs", real)
    assert len(sweep_mod.run_jobs(jobs, workers=1, progress=False, cache=False)) == 2


def test_compare_refuses_a_trace_regenerated_while_it_runs(tmp_path: Path, monkeypatch):
    trace = tmp_path / "t.bin"
    assert (
        subprocess.run(
            [*PMSIM, "trace", "gen", "--workload", "array", "-p", "ops=50", "-o", str(trace)]
        ).returncode
        == 0
    )
    real = api.run
    calls = []

    def regenerate_after_first(design, **kw):
        stats = real(design, **kw)
        if not calls:
            subprocess.run(
                [*PMSIM, "trace", "gen", "--workload", "array", "-p", "ops=10", "-o", str(trace)], check=True
            )
        calls.append(design)
        return stats

    monkeypatch.setattr(api, "run", regenerate_after_first)
    with pytest.raises(PmsimError, match=r"t\.bin changed while the runs that read it were in progress"):
        cli._compare_trace(
            cli.argparse.Namespace(param=None, trace=str(trace), allow_incomplete=False, set=[], config=None),
            ["baseline", "eadr"],
        )


def test_a_cache_entry_nested_too_deep_or_of_another_design_is_rerun(tmp_path: Path, monkeypatch):
    # Tester Q's Q5 (a RecursionError ended the sweep as a bug) and Q6 (eadr's stats under
    # baseline's key were used silently).
    monkeypatch.setenv("PMSIM_CACHE", str(tmp_path / "c"))
    jobs = sweep.jobs_for(["baseline", "eadr"], ["array"], ops=20)
    first = sweep.run_jobs(jobs, workers=1, progress=False)
    keys = [cache.key(j["design"], workload=j["workload"], params=j["params"]) for j in jobs]
    entry = [cache.cache_dir() / k[:2] / f"{k}.json" for k in keys]
    entry[0].write_text(entry[1].read_text())  # baseline's entry now holds eadr's result
    again = sweep.run_jobs(jobs, workers=1, progress=False)
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(again, first)
    entry[1].write_text("[" * 100_000 + "]" * 100_000)
    pd_testing.assert_frame_equal(sweep.run_jobs(jobs, workers=1, progress=False), first)
