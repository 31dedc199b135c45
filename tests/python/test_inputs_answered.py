"""Every input answered (issue 15): each finding of the fuzzing session, end to end.

Bad values exit 2 with one `pmsim: error:` line naming what; nothing panics, aborts, wraps or
replaces a file it should not.
"""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys

import pytest
from conftest import PMSIM
from test_cli_errors import assert_clean_error

RUN = ["run", "--workload", "array", "-p", "ops=20", "-p", "threads=1", "--design", "baseline"]
CRASH = ["crash", "--workload", "array", "-p", "ops=20", "-p", "threads=1", "--design", "baseline"]
BIG = str(2**63 - 1)


@pytest.mark.parametrize(
    "name, value",
    [
        ("mc.wpq_entries", BIG),
        ("mc.wpq_entries", str(2**32)),
        ("pb.entries", BIG),
        ("rt.entries", BIG),
        ("core.store_buffer", BIG),
        ("rt.bloom_counters", BIG),
        ("pm.write_ns", "1.9e16"),
        ("pm.write_gbps", "1e-300"),
    ],
)
def test_config_value_out_of_range_is_refused_before_allocation(cli, tmp_path, name, value):
    assert_clean_error(cli(*RUN, "--set", f"{name}={value}"), mentions=[name, "must be"])
    sec, field = name.split(".")
    (tmp_path / "c.toml").write_text(f"[{sec}]\n{field} = {value}\n")
    assert_clean_error(cli(*RUN, "--config", tmp_path / "c.toml"), mentions=[name])


def test_huge_compute_count_stops_with_time_overflow(cli, tmp_path):
    t = tmp_path / "huge.trace"
    t.write_text("# pmsim trace v1\nthreads 1\nT0 compute 18446744073709551615\n")
    assert_clean_error(cli("run", "--trace", t, "--design", "baseline"), mentions=["213 days"])


def test_end_without_begin_is_refused(cli, tmp_path):
    t = tmp_path / "e.trace"
    t.write_text("# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 end op\n")
    assert_clean_error(
        cli("run", "--trace", t, "--design", "baseline"), mentions=[f"{t}:4", "without a 'begin'"]
    )


@pytest.mark.parametrize(
    "workload, param",
    [
        ("array", "array_bytes=0"),
        ("array", "stripes=0"),
        ("nstore", "durable_every=0"),
        ("bandwidth", "block=0"),
        ("bandwidth", "block=65"),
        ("bandwidth", "stride=0"),
        ("array", "ops=1000000000"),
    ],
)
def test_workload_parameter_out_of_range_is_refused(cli, workload, param):
    p = cli("run", "--workload", workload, "-p", param, "--design", "baseline")
    assert_clean_error(p, mentions=[param.split("=")[0], "valid:"])


def test_workloads_list_their_ranges(cli):
    out = cli("workloads", check=True).stdout
    assert "block = 256 [bytes]" in out and "multiples of 64" in out


# --- binary traces: one validator for both formats ------------------------------------------


def _binary(events, *, labels=(), threads=1, end_total=None, trailing=b"") -> bytes:
    """A hand-built uncompressed binary trace: one block per (thread, gid, kind, payload)."""
    out = b"PMSIMTRB" + struct.pack("<HHII", 2, 0, threads, 1) + struct.pack("<QQ", 1 << 32, 1 << 30)
    for i, name in enumerate(labels):
        out += b"\x02" + struct.pack("<II", i, len(name)) + name.encode()
    for thread, gid, body in events:
        payload = bytes([gid]) + body
        out += b"\x01" + struct.pack("<IIII", thread, 1, len(payload), len(payload)) + payload
    total = len(events) if end_total is None else end_total
    return out + b"\x00" + struct.pack("<QI", total, len(labels)) + trailing


def _varint(v: int) -> bytes:
    b = b""
    while v >= 0x80:
        b += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return b + bytes([v])


def _store(addr: int, size: int) -> bytes:  # kind 2 with a value
    return bytes([2 | 0x80]) + _varint(addr) + bytes([size]) + bytes(range(size))


BEGIN, END, OFENCE = 15, 16, 10
GOOD = [(0, 0, bytes([BEGIN, 0])), (0, 1, _store(1 << 32, 8)), (0, 2, bytes([END, 0]))]


@pytest.mark.parametrize(
    "kind, data, mentions",
    [
        ("crossing", _binary([(0, 0, _store((1 << 32) + 56, 16))]), "crosses a 64 B line"),
        ("label-id", _binary([(0, 0, bytes([BEGIN, 5]))]), "label id 5"),
        ("end-count", _binary(GOOD, labels=["op"], end_total=7), "END says 7 events"),
        ("duplicate-ids", _binary([(0, 0, bytes([OFENCE])), (0, 0, bytes([OFENCE]))]), "repeats"),
        ("garbage", _binary(GOOD, labels=["op"], trailing=b"junk"), "data after the END record"),
        ("end-without-begin", _binary([(0, 0, bytes([END, 0]))], labels=["op"]), "without a 'begin'"),
    ],
)
def test_binary_trace_refused_by_every_command(cli, tmp_path, kind, data, mentions):
    t = tmp_path / "t.bin"
    t.write_bytes(data)
    for args in (
        ["run", "--trace", t, "--design", "baseline"],
        ["trace", "stats", t],
        ["trace", "convert", t, tmp_path / "out.trace"],
        ["crash", "--trace", t, "--design", "baseline", "--every"],
    ):
        assert_clean_error(cli(*args), mentions=[mentions])
    assert not (tmp_path / "out.trace").exists()


def test_valid_hand_built_binary_is_accepted_and_round_trips(cli, tmp_path):
    t = tmp_path / "t.bin"
    t.write_bytes(_binary(GOOD, labels=["op"]))
    cli("run", "--trace", t, "--design", "baseline", check=True)
    cli("trace", "convert", t, tmp_path / "t.trace", check=True)
    cli("trace", "convert", tmp_path / "t.trace", tmp_path / "u.bin", check=True)
    cli("trace", "convert", tmp_path / "u.bin", tmp_path / "u.trace", check=True)
    assert (tmp_path / "t.trace").read_text() == (tmp_path / "u.trace").read_text()


# --- CLI arguments ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, mentions",
    [
        ([*CRASH, "--at", "1e30"], ["1e30"]),
        ([*CRASH, "--at", "nanns"], ["nanns"]),
        ([*CRASH, "--random", "-5"], ["--random"]),
        ([*CRASH, "--random", "3", "--seed", "-1"], ["--seed"]),
        ([*CRASH, "--random", "3", "--max-failures", "-1"], ["--max-failures"]),
        ([*CRASH, "--random", "0"], ["--random"]),
        (["bench", "--repeat", "0"], ["--repeat"]),
        (["bench", "--ops", "many"], ["--ops", "many"]),
    ],
    ids=[
        "at-1e30",
        "at-nan",
        "random-neg",
        "seed-neg",
        "max-failures-neg",
        "random-0",
        "repeat-0",
        "ops-word",
    ],
)
def test_bad_cli_argument_is_a_usage_error_not_a_traceback(cli, args, mentions):
    assert_clean_error(cli(*args), mentions=mentions)


def test_internal_error_exits_3_with_one_line_and_a_hint(monkeypatch, capsys):
    """A bug (including a Rust panic, which pyo3 raises as a BaseException) is exit 3."""
    from pmsim import _core, cli

    class FakePanic(BaseException):  # pyo3's PanicException derives from BaseException
        pass

    def boom(*a, **k):
        raise FakePanic("index out of bounds\nsecond line")

    monkeypatch.setattr(_core, "run", boom)
    rc = cli.main(["run", "--workload", "array", "--design", "baseline"])
    err = capsys.readouterr().err
    assert rc == 3, err
    assert err.count("\n") == 1 and err.startswith("pmsim: internal error: FakePanic: index out of bounds")
    assert "report" in err and "Traceback" not in err
    with pytest.raises(FakePanic):
        cli.main(["--debug", "run", "--workload", "array", "--design", "baseline"])


def test_help_describes_every_argument():
    import argparse

    from pmsim import api, cli

    def walk(p: argparse.ArgumentParser, path: str):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, f"{path} {name}")
            elif a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction):
                yield path, a

    for path, a in walk(cli.parser(), "pmsim"):
        assert a.help, f"{path} {a.option_strings or a.dest} has no help text"
    run_help = cli.parser()._subparsers._group_actions[0].choices["run"].format_help()
    for d, _ in api.designs():
        assert d in run_help
    rp = " ".join(cli.parser()._subparsers._group_actions[0].choices["reproduce"].format_help().split())
    assert "--scale" in rp and "paper's sizes" in rp and "runs.parquet" in rp and "exit status" in rp


# --- outputs ------------------------------------------------------------------------------


OUTPUT_COMMANDS = {
    "run": lambda dst, t: ["run", "--trace", t, "--design", "baseline", "-o", dst],
    "trace-gen": lambda dst, t: ["trace", "gen", "--workload", "array", "-p", "ops=5", "-o", dst],
    "trace-convert": lambda dst, t: ["trace", "convert", t, dst, "--to", "text"],
    "compare": lambda dst, t: [
        "compare",
        "--workload",
        "array",
        "-p",
        "ops=5",
        "--designs",
        "baseline",
        "-q",
        "-o",
        dst,
    ],
    "sweep": lambda dst, t: [
        "sweep",
        "--designs",
        "baseline",
        "--workloads",
        "array",
        "-p",
        "ops=5",
        "-q",
        "-o",
        dst,
    ],
}


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_output_onto_a_symlink_writes_its_target_and_keeps_the_link(cli, tmp_path, sample_trace, command):
    # .csv: a table suffix for compare and sweep, any file for the others (binary for trace gen).
    target = tmp_path / "target.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    cli(*OUTPUT_COMMANDS[command](link, sample_trace), check=True)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() != b"old\n"


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_output_onto_a_device_writes_through(cli, sample_trace, command):
    cli(*OUTPUT_COMMANDS[command]("/dev/null", sample_trace), check=True)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_output_into_a_missing_folder_is_created(cli, tmp_path, sample_trace, command):
    dst = tmp_path / "a" / "b" / "out.csv"
    cli(*OUTPUT_COMMANDS[command](dst, sample_trace), check=True)
    assert dst.stat().st_size > 0


def test_output_onto_a_dangling_symlink_is_refused(cli, tmp_path, sample_trace):
    link = tmp_path / "dangling.trace"
    link.symlink_to(tmp_path / "nowhere" / "x.trace")
    assert_clean_error(cli("trace", "convert", sample_trace, link, "--to", "text"), mentions=["symlink"])
    assert_clean_error(
        cli("run", "--trace", sample_trace, "--design", "baseline", "-o", link), mentions=["symlink"]
    )


@pytest.mark.parametrize("fmt", ["text", "binary"])
def test_trace_from_stdin(tmp_path, sample_trace, fmt):
    src = sample_trace
    if fmt == "binary":
        src = tmp_path / "s.bin"
        subprocess.run([*PMSIM, "trace", "convert", sample_trace, src], check=True, capture_output=True)
    direct = subprocess.run(
        [*PMSIM, "run", "--trace", src, "--design", "baseline", "--json"], capture_output=True
    )
    with open(src, "rb") as f:
        piped = subprocess.run(
            [*PMSIM, "run", "--trace", "/dev/stdin", "--design", "baseline", "--json"],
            stdin=f,
            capture_output=True,
        )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == direct.stdout


def test_python_api_refuses_checking_nothing():
    import pmsim

    for kw in ({"random": 0}, {"random": 3, "max_failures": 0}):
        with pytest.raises(pmsim.PmsimError, match="at least 1"):
            pmsim.crash("baseline", workload="array", ops=5, threads=1, **kw)


# --- a parameter given twice, whatever the spelling -----------------------------------------

SWEEP1 = ["sweep", "--designs", "baseline", "--workloads", "array", "-p", "threads=1", "-q"]


@pytest.mark.parametrize(
    "args, mentions",
    [
        (
            [*SWEEP1, "--grid", "pm.write_ns=90", "--grid", "pm_write_ns=300"],
            ["pm.write_ns=90", "pm_write_ns=300"],
        ),
        ([*SWEEP1, "--grid", "ops=10", "--grid", "ops=20"], ["--grid ops=10", "--grid ops=20"]),
        ([*SWEEP1, "--grid", "pm.write_ns=90", "--set", "pm.write_ns=300"], ["--grid", "--set"]),
        ([*SWEEP1, "--grid", "ops=10,20", "-p", "ops=5"], ["-p ops=5", "--grid ops=10,20"]),
        (
            ["compare", "--designs", "baseline", "-p", "pm.write_ns=300", "--set", "pm.write_ns=90", "-q"],
            ["-p pm.write_ns=300", "--set pm.write_ns=90"],
        ),
        ([*RUN, "-p", "ops=30"], ["-p ops=20", "-p ops=30"]),
        ([*RUN, "--set", "pm_write_ns=1", "--set", "pm.write_ns=2"], ["pm_write_ns=1", "pm.write_ns=2"]),
    ],
    ids=["grid-alias", "grid-repeat", "grid-and-set", "grid-and-p", "compare-p-and-set", "run-p", "run-set"],
)
def test_a_parameter_given_twice_is_refused(cli, tmp_path, args, mentions):
    line = assert_clean_error(cli(*args, "-o", tmp_path / "out.csv"), mentions=[*mentions, "twice"])
    assert not (tmp_path / "out.csv").exists(), line


def test_python_sweep_refuses_a_parameter_in_the_grid_and_fixed():
    import pmsim

    with pytest.raises(pmsim.PmsimError, match="pm.write_ns.*twice.*'pm.write_ns'.*'pm_write_ns'"):
        pmsim.sweep("baseline", "array", grid={"pm.write_ns": [90]}, pm_write_ns=300, progress=False)
    with pytest.raises(pmsim.PmsimError, match="'pm_write_ns'.*'pm.write_ns'"):
        pmsim.sweep("baseline", "array", grid={"pm_write_ns": [90], "pm.write_ns": [300]}, progress=False)


@pytest.mark.parametrize("address", ["foo", "tcp://", "tcp://localhost:abc", "http://localhost:1"])
def test_bad_scheduler_address_is_a_usage_error(cli, address):
    pytest.importorskip("distributed")
    args = ["sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=5", "-q"]
    assert_clean_error(cli(*args, "--scheduler", address), mentions=[f"--scheduler {address}:"])


def test_a_failing_sweep_run_names_its_job(cli, tmp_path):
    args = ["sweep", "--designs", "baseline", "--workloads", "hotline", "-p", "ops=1000"]
    args += ["-p", "compute=4294967296", "-p", "threads=1", "--grid", "core.freq_ghz=2,0.01"]
    p = cli(*args, "--set", "core.ipc=0.01", "-j", "1", "-q", "-o", tmp_path / "swf.csv")
    assert_clean_error(
        p, mentions=["design baseline, workload hotline, core.freq_ghz=0.01: simulated time would pass"]
    )
    assert not (tmp_path / "swf.csv").exists()


# --- Python API argument types ------------------------------------------------------------


def test_python_api_takes_one_name_one_instant_and_path_objects(tmp_path, sample_trace):
    import pmsim

    one = pmsim.crash("baseline", workload="array", ops=10, threads=1, at="12")
    assert one["images"] == 1
    listed = pmsim.crash("baseline", workload="array", ops=10, threads=1, at=[12])
    assert (one["images"], one["consistent"], one["failures"]) == (
        listed["images"],
        listed["consistent"],
        listed["failures"],
    )
    assert pmsim.crash("baseline", workload="array", ops=10, threads=1, at=12)["images"] == 1
    df = pmsim.sweep("baseline", "array", ops=10, threads=1, progress=False)
    assert list(df.design) == ["baseline"] and list(df.workload) == ["array"]
    assert (
        pmsim.run("baseline", trace=sample_trace)["events"]
        == pmsim.run("baseline", trace=str(sample_trace))["events"]
    )
    cfg = tmp_path / "c.toml"
    cfg.write_text("[pm]\nwrite_ns = 300.0\n")
    assert "write_ns = 300" in pmsim.config_show(cfg)
    assert pmsim.trace_stats(sample_trace)["events"] > 0
    assert pmsim.analyze(sample_trace, instr_ops_per_s=1e6)["events"] > 0
    assert pmsim.trace_generate("array", tmp_path / "g.bin", ops=5, threads=1) > 0
    # The analyze docstring's example kwarg is a real parameter.
    assert "core_ghz" not in pmsim.analyze.__doc__
    assert pmsim.analyze(workload="array", ops=10, threads=1, core_freq_ghz=3)["events"] > 0


def _crash(**kw):
    import pmsim

    return pmsim.crash("baseline", workload="array", ops=5, threads=1, **kw)


def _sweep(*names, **kw):
    import pmsim

    return pmsim.sweep(*(names or ("baseline", "array")), ops=5, threads=1, progress=False, **kw)


def _analyze(**kw):
    import pmsim

    return pmsim.analyze(workload="array", ops=5, threads=1, **kw)


@pytest.mark.parametrize(
    "call, mentions",
    [
        (lambda: _crash(random=-1), ["random", "at least 1"]),
        (lambda: _crash(random=2**64), ["random", "at least 1"]),
        (lambda: _crash(random=3, seed=-1), ["seed", "at least 0"]),
        (lambda: _crash(random=3, seed=2**64), ["seed", "at least 0"]),
        (lambda: _crash(random=3, max_failures=-1), ["max_failures", "at least 1"]),
        (lambda: _crash(random="3"), ["random"]),
        (lambda: _analyze(atomic_bytes=2**70), ["atomic_bytes", "8 to 256"]),
        (lambda: _analyze(atomic_bytes="16"), ["atomic_bytes", "8 to 256"]),
        (lambda: _analyze(persist_ns="500"), ["persist_ns", "positive number"]),
        (lambda: _analyze(persist_ns="x"), ["persist_ns", "positive number"]),
        (lambda: _analyze(instr_ops_per_s="x"), ["instr_ops_per_s", "positive number"]),
        (lambda: _sweep(workers="x"), ["workers", "at least 1"]),
        (lambda: _sweep(workers=0), ["workers", "at least 1"]),
        (lambda: _sweep(workers=-1), ["workers", "at least 1"]),
        (lambda: _sweep(grid={"ops": 10}), ["grid 'ops'", "list of values"]),
        (lambda: _sweep(grid={"ops": []}), ["grid 'ops'", "no values"]),
        (lambda: _sweep([], "array"), ["designs", "empty"]),
        (lambda: _sweep("baseline", []), ["workloads", "empty"]),
        (lambda: _crash(at=[12], trace=3), ["trace", "path"]),
        (lambda: _crash(), ["at=", "random=", "every=True"]),
        (lambda: _crash(at=[12], every=True), ["exactly one of at="]),
    ],
    ids=[
        "random-neg",
        "random-big",
        "seed-neg",
        "seed-big",
        "max-failures-neg",
        "random-str",
        "atomic-bytes-big",
        "atomic-bytes-str",
        "persist-ns-numeric-str",
        "persist-ns-str",
        "instr-str",
        "workers-str",
        "workers-0",
        "workers-neg",
        "grid-scalar",
        "grid-empty",
        "designs-empty",
        "workloads-empty",
        "trace-int",
        "crash-no-mode",
        "crash-two-modes",
    ],
)
def test_python_api_bad_argument_is_a_pmsim_error_naming_it(call, mentions):
    import pmsim

    with pytest.raises(pmsim.PmsimError) as e:
        call()
    for m in mentions:
        assert m in str(e.value), (m, str(e.value))


# --- incomplete traces --------------------------------------------------------------------

INCOMPLETE = "# pmsim trace v1\n# meta incomplete=killed by signal 11\nthreads 1\nT0 begin op\n"
INCOMPLETE += "T0 store 0x100000000 8 1\nT0 end op\n"


def test_incomplete_trace_is_refused_by_the_api_and_analyze_unless_allowed(cli, tmp_path):
    import pmsim

    t = tmp_path / "c.trace"
    t.write_text(INCOMPLETE)
    calls = {
        "run": lambda **kw: pmsim.run("baseline", trace=t, **kw),
        "crash": lambda **kw: pmsim.crash("baseline", trace=t, every=True, **kw),
        "analyze": lambda **kw: pmsim.analyze(t, instr_ops_per_s=1e6, **kw),
    }
    for name, call in calls.items():
        with pytest.raises(pmsim.PmsimError, match="incomplete .killed by signal 11.*--allow-incomplete"):
            call()
        assert call(allow_incomplete=True), name
    args = ["analyze", "--trace", t, "--instr-ops-per-s", "1e6"]
    assert_clean_error(cli(*args), mentions=["c.trace", "incomplete", "--allow-incomplete"])
    cli(*args, "--allow-incomplete", check=True)


@pytest.mark.skipif(sys.platform == "win32", reason="/dev/stdin")
@pytest.mark.parametrize(
    "command",
    [
        ["run", "--design", "baseline"],
        ["crash", "--design", "baseline", "--every"],
        ["analyze", "--instr-ops-per-s", "1e6"],
        ["compare", "--designs", "baseline,eadr"],
    ],
    ids=["run", "crash", "analyze", "compare"],
)
def test_an_incomplete_trace_from_a_pipe_is_refused_unless_allowed(command):
    # A pipe is read once, by the core: the front end's check of a file never saw it, so a
    # crashed program's trace piped in ran as if it were whole (reviewer V's V6).
    def piped(*extra):
        return subprocess.run(
            [*PMSIM, *command, "--trace", "/dev/stdin", *extra],
            input=INCOMPLETE.encode(),
            capture_output=True,
            timeout=300,
        )

    p = piped()
    assert p.returncode == 2, p.stderr
    assert b"/dev/stdin: the trace is incomplete (killed by signal 11)" in p.stderr
    assert b"--allow-incomplete" in p.stderr and b"Traceback" not in p.stderr
    assert p.stdout == b""
    p = piped("--allow-incomplete")
    assert p.returncode == 0, p.stderr


# --- outputs: empty paths, formats by suffix ----------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [*RUN, "-o", ""],
        ["compare", "--designs", "baseline", "-p", "ops=5", "-q", "-o", ""],
        ["sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=5", "-q", "-o", ""],
        ["trace", "gen", "--workload", "array", "-p", "ops=5", "-o", ""],
        ["trace", "record", "-o", "", "--", "true"],
        ["profile", "--workloads", "array", "--ops", "5", "--out", ""],
        ["reproduce", "asap", "--out", ""],
    ],
    ids=["run", "compare", "sweep", "trace-gen", "trace-record", "profile", "reproduce"],
)
def test_empty_output_path_is_refused(cli, tmp_path, args):
    assert_clean_error(cli(*args, cwd=tmp_path), mentions=["empty path"])
    assert list(tmp_path.iterdir()) == []


def test_trace_convert_to_an_empty_path_is_refused(cli, sample_trace):
    assert_clean_error(cli("trace", "convert", sample_trace, ""), mentions=["empty path"])


@pytest.mark.parametrize(
    "name, binary",
    [
        ("a.trace", False),
        ("a.txt", False),
        ("c.TXT", False),
        ("d.Trace", False),
        ("e.bin", True),
        ("g.BIN", True),
        ("foo.dat", True),
        ("noext", True),
    ],
)
def test_trace_gen_and_convert_pick_the_format_by_one_case_insensitive_rule(
    cli, tmp_path, sample_trace, name, binary
):
    gen = tmp_path / "gen" / name
    cli("trace", "gen", "--workload", "array", "-p", "ops=5", "-p", "threads=1", "-o", gen, check=True)
    conv = tmp_path / "conv" / name
    cli("trace", "convert", sample_trace, conv, check=True)
    for f in (gen, conv):
        assert f.read_bytes().startswith(b"PMSIMTRB") == binary, f
        assert not f.read_bytes().startswith(b"# pmsim trace") == binary, f
    # What was written reads back as the same trace.
    assert (
        cli("trace", "stats", conv, "--json", check=True).stdout
        == cli("trace", "stats", sample_trace, "--json", check=True).stdout
    )
    assert sorted(p.name for p in gen.parent.iterdir()) == [name]


def test_table_output_suffix_is_case_insensitive(cli, tmp_path):
    import pandas as pd

    out = tmp_path / "t.JSON"
    cli("compare", "--designs", "baseline", "-p", "ops=5", "-q", "-o", out, check=True)
    assert list(pd.read_json(out, orient="records").design) == ["baseline"]
    out = tmp_path / "t.Parquet"
    cli("sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=5", "-q", "-o", out, check=True)
    assert list(pd.read_parquet(out).design) == ["baseline"]


def test_an_output_that_cannot_be_written_is_named_as_given(cli, tmp_path):
    # Not by the temporary file written beside it, nor as a bare "File exists".
    (tmp_path / "afile").write_text("x")
    run = ("run", "--workload", "array", "-p", "ops=5", "--design", "baseline", "-o")
    p = cli(*run, "/proc/pmsim-no/x.json")
    assert_clean_error(p, mentions=["/proc/pmsim-no/x.json"])
    assert ".partial" not in p.stderr
    p = cli(*run, tmp_path / "afile" / "x.json")
    assert_clean_error(p, mentions=[str(tmp_path / "afile" / "x.json"), "not a folder"])


def test_ctrl_c_stops_a_long_check_at_once(tmp_path):
    # The core runs without the GIL; its progress report looks for Python's pending signals, so
    # Ctrl-C ends a long run or check where it is (exit 130), not when it is done (~a minute).
    import signal
    import subprocess
    import time

    from conftest import PMSIM

    cmd = [*PMSIM, "crash", "--workload", "nstore", "-p", "ops=20000", "--design", "asap-rp", "--every"]
    p = subprocess.Popen([*cmd, "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130, (p.returncode, out, err)
    assert err.strip() == "pmsim: interrupted" and "OK" not in out


def test_ctrl_c_stops_a_long_benchmark_at_its_next_run():
    # The benchmark's runs are one core call; it now looks for Python's pending signals before
    # each run (and a crash benchmark as `crash` does), so Ctrl-C ends it at once (exit 130),
    # not after all of it.
    import signal
    import subprocess
    import time

    from conftest import PMSIM

    runs = ["--ops", "5000", "--design", "asap-rp", "--repeat", "3000"]  # about ten minutes
    crash = ["--ops", "5000", "--design", "asap-rp", "--crash", "random:5000000"]  # many minutes
    for args in (runs, crash):
        cmd = [*PMSIM, "bench", "--workload", "nstore", *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(5)
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError(f"Ctrl-C did not stop bench {args}") from None
        assert p.returncode == 130, (args, p.returncode, out, err)
        assert err.strip() == "pmsim: interrupted" and out == "", args
