"""More bad input: each answered with one clear message (exit status 2 for the command, a
``pmsim.PmsimError`` for the API), before any work is done, never a crash or a raw TypeError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_errors import assert_clean_error


@pytest.fixture
def two_configs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text("[pm]\nwrite_ns = 120\n")
    b.write_text("[mc]\ncount = 4\n")
    return a, b


# --- F1: crash --random N is bounded (the core keeps one u64 per instant) ----------------------


def test_crash_random_beyond_the_maximum_is_a_usage_error(cli, sample_trace):
    import pmsim.api

    assert pmsim.api.MAX_RANDOM_INSTANTS == 100_000_000
    args = ["crash", "--trace", sample_trace, "--design", "baseline", "-q"]
    for n in ("99999999999999", "100000001"):
        line = assert_clean_error(cli(*args, "--random", n), mentions=["--random", "100000000", "--every"])
        assert "memory allocation" not in line
    p = cli(
        "bench", "--workload", "array", "--ops", "5", "--threads", "1", "--crash", "random:99999999999999"
    )
    assert_clean_error(p, mentions=["random:99999999999999", "100000000", "--crash every"])
    assert "100000000" in cli("crash", "--help").stdout


def test_python_crash_random_beyond_the_maximum_is_a_pmsim_error(sample_trace):
    # In a child process: before the fix the core aborted the interpreter (out of memory).
    code = (
        "import pmsim\n"
        "try:\n"
        f"    pmsim.crash('baseline', trace={str(sample_trace)!r}, random=99999999999999)\n"
        "except pmsim.PmsimError as e:\n"
        "    print('PmsimError:', e)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert p.stdout.startswith("PmsimError: random"), p.stdout
    assert "100000000" in p.stdout and "every=True" in p.stdout, p.stdout


# --- F3: --config given twice --------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["config", "show"],
        ["run", "--workload", "array", "-p", "ops=5", "--design", "baseline"],
        ["crash", "--workload", "array", "-p", "ops=5", "--design", "baseline", "--random", "2"],
        ["analyze", "--workload", "array", "-p", "ops=5"],
        ["bench", "--ops", "5", "--repeat", "1"],
        ["reproduce", "asap", "--out", "out"],
    ],
    ids=["config-show", "run", "crash", "analyze", "bench", "reproduce"],
)
def test_config_given_twice_is_refused(cli, tmp_path, two_configs, args):
    a, b = two_configs
    p = cli(*args, "--config", a, "--config", b, cwd=tmp_path)
    assert_clean_error(p, mentions=["--config is given twice", "a.toml", "b.toml", f"'pmsim {args[0]}"])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, twice",
    [
        (["run", "--workload", "array", "--workload", "nstore", "--design", "baseline"], "--workload"),
        (["run", "--workload", "array", "--design", "eadr", "--design", "baseline"], "--design"),
        (["run", "--workload", "array", "--design", "eadr", "-o", "a.json", "-o", "b.json"], "-o"),
        (["crash", "--trace", "t.trace", "--trace", "u.trace", "--design", "eadr", "--every"], "--trace"),
        (["compare", "--workload", "array", "-o", "a.csv", "--output", "b.csv"], "--output"),
    ],
    ids=["workload", "design", "output", "trace", "output-long"],
)
def test_an_option_of_one_value_given_twice_is_refused(cli, tmp_path, args, twice):
    # The later value would silently win: the user meant one of them, pmsim cannot know which.
    p = cli(*args, cwd=tmp_path)
    assert_clean_error(p, mentions=[f"{twice} is given twice"])
    assert not any(tmp_path.iterdir())


# --- F4: one parameter under two spellings in Python keyword arguments -----------------------

TWICE = {"pm_write_ns": 100, "pm.write_ns": 5000}


@pytest.mark.parametrize(
    "fn, args, kw",
    [
        ("run", ("baseline",), {"workload": "array", "ops": 20, "threads": 1}),
        ("crash", ("baseline",), {"workload": "array", "ops": 5, "threads": 1, "random": 2}),
        ("analyze", (), {"workload": "array", "ops": 5, "threads": 1}),
        ("config_show", (), {}),
        ("config", (), {}),
        ("sweep", ("baseline", "array"), {"ops": 5, "threads": 1, "progress": False}),
    ],
)
def test_python_parameter_under_two_spellings_is_refused(fn, args, kw):
    import pmsim
    import pmsim.api

    f = getattr(pmsim, fn, None) or getattr(pmsim.api, fn)
    with pytest.raises(pmsim.PmsimError, match="pm.write_ns is given twice.*'pm_write_ns'.*'pm.write_ns'"):
        f(*args, **kw, **TWICE)


# --- F5: wrong-type Python arguments: a PmsimError naming the argument, not a TypeError -------


def _calls(trace: str, tmp: Path) -> list[tuple[str, object, list[str]]]:
    import pmsim
    import pmsim.api

    wl = {"workload": "array", "ops": 5, "threads": 1}
    return [
        ("run-design-none", lambda: pmsim.run(None, trace=trace), ["design", "str", "None"]),
        ("run-design-int", lambda: pmsim.run(3, trace=trace), ["design", "str", "3"]),
        ("run-workload-int", lambda: pmsim.run("baseline", workload=7), ["workload", "str", "7"]),
        (
            "run-allow-broken",
            lambda: pmsim.run("baseline", trace=trace, allow_broken="no"),
            ["allow_broken", "True or False", "'no'"],
        ),
        (
            "run-allow-incomplete",
            lambda: pmsim.run("baseline", trace=trace, allow_incomplete=1),
            ["allow_incomplete", "True or False"],
        ),
        ("run-progress", lambda: pmsim.run("baseline", trace=trace, progress="yes"), ["progress"]),
        ("crash-design", lambda: pmsim.crash(None, trace=trace, random=2), ["design", "None"]),
        ("crash-workload", lambda: pmsim.crash("baseline", workload=1, random=2), ["workload"]),
        ("crash-every", lambda: pmsim.crash("baseline", trace=trace, every="no"), ["every", "'no'"]),
        ("crash-model", lambda: pmsim.crash("baseline", trace=trace, random=2, model=5), ["model", "5"]),
        ("crash-recovery", lambda: pmsim.crash("baseline", random=2, recovery=None, **wl), ["recovery"]),
        ("crash-broken", lambda: pmsim.crash("baseline", random=2, allow_broken="x", **wl), ["allow_broken"]),
        ("crash-progress", lambda: pmsim.crash("baseline", random=2, progress="x", **wl), ["progress"]),
        ("crash-at-object", lambda: pmsim.crash("baseline", at=object(), **wl), ["at", "crash instant"]),
        ("crash-at-bytes", lambda: pmsim.crash("baseline", at=b"12", **wl), ["at", "crash instant"]),
        ("analyze-workload", lambda: pmsim.analyze(workload=5), ["workload", "str", "5"]),
        ("analyze-model", lambda: pmsim.analyze(trace, model=5), ["model", "str", "5"]),
        ("analyze-incomplete", lambda: pmsim.analyze(trace, allow_incomplete="x"), ["allow_incomplete"]),
        ("trace-stats-workload", lambda: pmsim.trace_stats(workload=5), ["workload", "str", "5"]),
        ("trace-lint-none", lambda: pmsim.trace_lint(None), ["trace", "path", "None"]),
        ("trace-lint-flag", lambda: pmsim.trace_lint(trace, allow_incomplete="no"), ["allow_incomplete"]),
        ("gen-workload", lambda: pmsim.trace_generate(5, tmp / "g.bin"), ["workload", "str", "5"]),
        ("gen-dst-none", lambda: pmsim.trace_generate("array", None), ["dst", "path", "None"]),
        ("gen-compress", lambda: pmsim.trace_generate("array", tmp / "g.bin", compress="no"), ["compress"]),
        ("convert-src-none", lambda: pmsim.trace_convert(None, tmp / "c.bin"), ["src", "path", "None"]),
        ("convert-dst-int", lambda: pmsim.trace_convert(trace, 5), ["dst", "path", "5"]),
        ("convert-to-int", lambda: pmsim.trace_convert(trace, tmp / "c.bin", to=5), ["to", "'binary'", "5"]),
        ("convert-compress", lambda: pmsim.trace_convert(trace, tmp / "c.bin", compress=None), ["compress"]),
        ("config-show-int", lambda: pmsim.config_show(5), ["config", "path", "5"]),
        ("sweep-progress", lambda: pmsim.sweep("baseline", "array", progress="no"), ["progress", "'no'"]),
        ("sweep-cache", lambda: pmsim.sweep("baseline", "array", progress=False, cache=None), ["cache"]),
        ("sweep-designs-int", lambda: pmsim.sweep(5, "array", progress=False), ["designs", "5"]),
        ("describe-int", lambda: pmsim.describe_violation(5), ["violation", "5"]),
        ("describe-dict", lambda: pmsim.describe_violation({"x": 1}), ["violation", "'x'"]),
        ("flatten-none", lambda: pmsim.flatten(None), ["stats", "None"]),
    ]


def test_python_api_wrong_types_are_pmsim_errors_naming_the_argument(tmp_path, sample_trace):
    failures = []
    for name, call, mentions in _calls(str(sample_trace), tmp_path):
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the test is which exception
            import pmsim

            msg = str(e)
            if not isinstance(e, pmsim.PmsimError):
                failures.append(f"{name}: {type(e).__name__}: {msg}")
            elif not all(m in msg for m in mentions):
                failures.append(f"{name}: {msg!r} lacks one of {mentions}")
        else:
            failures.append(f"{name}: no error")
    assert not failures, "\n".join(failures)
    assert not list(tmp_path.glob("[gc].bin"))


def test_every_public_function_is_covered_by_the_type_checks():
    """Every function of ``pmsim.__all__`` that takes arguments has a case above."""
    import inspect

    import pmsim

    covered = {"run", "crash", "analyze", "trace_stats", "trace_lint", "trace_generate", "trace_convert"}
    covered |= {"config_show", "sweep", "describe_violation", "flatten"}
    for name in pmsim.__all__:
        obj = getattr(pmsim, name)
        if callable(obj) and not isinstance(obj, type) and inspect.signature(obj).parameters:
            assert name in covered, name


# --- F7: unrecognized arguments point at the subcommand's help -----------------------------


@pytest.mark.parametrize(
    "args, extra, prog",
    [
        (["workloads", "--json"], "--json", "pmsim workloads"),
        (["designs", "extra"], "extra", "pmsim designs"),
        (["bench", "--trace"], "--trace", "pmsim bench"),
        (["trace", "stats", "x.trace", "--frob"], "--frob", "pmsim trace stats"),
        (["analyze", "--workload", "array", "--frob"], "--frob", "pmsim analyze"),
    ],
)
def test_unrecognized_arguments_name_the_subcommand_help(cli, args, extra, prog):
    line = assert_clean_error(cli(*args), mentions=[])
    assert line == f"pmsim: error: unrecognized arguments: {extra} (see '{prog} --help')"


def test_argparse_errors_have_one_prefix(cli):
    line = assert_clean_error(
        cli("crash", "--workload", "array", "--design", "baseline", "--random", "x"), mentions=[]
    )
    assert line.startswith("pmsim: error: argument --random: ") and line.endswith(
        "(see 'pmsim crash --help')"
    )


# --- F8: a sweep checks its output path and every grid value before the first run -----------

SWEEP = ["sweep", "--designs", "baseline", "--workloads", "array"]


@pytest.mark.parametrize(
    "args, mentions",
    [
        (["--grid", "ops=5,,6"], ["parameter 'ops' = ''", "not a non-negative integer", "1 to 1000000"]),
        (["--grid", "ops=5,0"], ["parameter 'ops' = 0", "out of range"]),
        (["--grid", "ops=5,many"], ["'many'"]),
        (["-p", "ops=5", "--grid", "stripes=2,0"], ["stripes", "out of range"]),
        (["-p", "ops=600000", "--grid", "threads=1,2"], ["threads x ops", "1000000"]),
        (["-p", "ops=5", "-o", "existing"], ["existing", "is a directory"]),
        (["-p", "ops=5", "-o", "afile/out.csv"], ["afile/out.csv", "not a folder"]),
    ],
    ids=["empty", "zero", "word", "own-param", "threads-x-ops", "output-dir", "output-under-file"],
)
def test_sweep_refuses_bad_grid_values_and_outputs_before_any_run(cli, tmp_path, monkeypatch, args, mentions):
    # Without -q: a run started before the check would show its progress on stderr and cache its result.
    cache = tmp_path / "cache"
    monkeypatch.setenv("PMSIM_CACHE", str(cache))
    (tmp_path / "existing").mkdir()
    (tmp_path / "afile").write_text("")
    p = cli(*SWEEP, *args, cwd=tmp_path)
    assert_clean_error(p, mentions=mentions)
    assert not cache.exists() or not any(cache.rglob("*")), sorted(cache.rglob("*"))


def test_sweep_checks_choice_parameters_by_name(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PMSIM_CACHE", str(tmp_path / "cache"))
    args = ["sweep", "--designs", "baseline", "--workloads", "cwl", "-p", "ops=5", "-p", "threads=1"]
    p = cli(*args, "--grid", "variant=epoch,bogus")
    assert_clean_error(p, mentions=["variant", "'bogus'", "strict, epoch, racing, strand"])
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*"))


def test_compare_refuses_an_output_directory_before_running(cli, tmp_path):
    (tmp_path / "existing").mkdir()
    p = cli("compare", "--designs", "baseline", "-p", "ops=5", "-o", "existing", cwd=tmp_path)
    assert_clean_error(p, mentions=["existing", "is a directory"])
    assert p.stdout == ""


def test_python_sweep_refuses_a_bad_grid_value_before_any_run(tmp_path, monkeypatch):
    import pmsim

    monkeypatch.setenv("PMSIM_CACHE", str(tmp_path / "cache"))
    with pytest.raises(pmsim.PmsimError, match="parameter 'ops' = 'x' is not a non-negative integer"):
        pmsim.sweep("baseline", "array", grid={"ops": [5, "x"]}, threads=1, progress=False)
    assert not (tmp_path / "cache").exists()
    # What the core accepts, the check accepts: blanks, '+', hex, separators, variant names.
    df = pmsim.sweep("baseline", "cwl", grid={"ops": [" 5", "+6", "0x7", "1_0"]}, threads=1, progress=False)
    assert list(df.ops) == [" 5", "+6", "0x7", "1_0"]
    df = pmsim.sweep(
        "baseline", "cwl", grid={"variant": ["strict", "racing"]}, ops=5, threads=1, progress=False
    )
    assert len(df) == 2


# --- 7: a parameter that takes names lists them ---------------------------------------------


def test_workloads_list_the_names_a_choice_parameter_takes(cli):
    out = cli("workloads", check=True).stdout
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("variant =")]
    assert lines and all("(valid: strict, epoch, racing, strand)" in ln for ln in lines), lines


@pytest.mark.parametrize(
    "args, mentions",
    [
        (["compare", "--designs", "", "-p", "ops=5"], ["--designs", "empty name"]),
        (["compare", "--designs", "eadr,,bbb", "-p", "ops=5"], ["--designs", "empty name"]),
        (["compare", "--designs", "eadr,eadr", "-p", "ops=5"], ["--designs", "eadr given more than once"]),
        (
            ["sweep", "--designs", "eadr", "--workloads", "cwl,cwl"],
            ["--workloads", "cwl given more than once"],
        ),
    ],
)
def test_an_empty_or_repeated_name_in_a_list_is_refused_not_read_as_all(cli, tmp_path, args, mentions):
    p = cli(*args, cwd=tmp_path)
    assert_clean_error(p, mentions=mentions)
    assert p.stdout == ""


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
@pytest.mark.parametrize("args", [["run", "--design", "eadr", "--trace"], ["trace", "lint"]])
def test_a_device_that_is_not_a_trace_is_refused_at_once_not_read_to_its_end(args):
    # /dev/zero never ends: its first bytes must decide (a tester's finding: 2.9 GB in 8 s).
    from conftest import PMSIM

    p = subprocess.run(
        [*PMSIM, *args, "/dev/zero"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60
    )
    assert_clean_error(p, mentions=["/dev/zero", "# pmsim trace v1"])


def test_lint_reads_a_piped_trace_whole_from_its_first_byte():
    # Probing a pipe's format must not eat its first bytes (lint once read the rest only).
    from conftest import PMSIM

    text = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 sfence\n"
    p = subprocess.run(
        [*PMSIM, "trace", "lint", "/dev/stdin"], input=text, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert "1 threads, 3 events, 1 PM stores" in p.stdout and "0 store(s)" in p.stdout, p.stdout
