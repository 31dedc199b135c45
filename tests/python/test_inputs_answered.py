"""Every input answered (issue 15): each finding of the fuzzing session, end to end.

Bad values exit 2 with one `pmsim: error:` line naming what; nothing panics, aborts, wraps or
replaces a file it should not.
"""

from __future__ import annotations

import os
import stat
import struct
import subprocess

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
        ("array", "durable_every=0"),
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
    target = tmp_path / "target.out"
    target.write_text("old\n")
    link = tmp_path / "link.out"
    link.symlink_to(target)
    cli(*OUTPUT_COMMANDS[command](link, sample_trace), check=True)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() != "old\n"


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_output_onto_a_device_writes_through(cli, sample_trace, command):
    cli(*OUTPUT_COMMANDS[command]("/dev/null", sample_trace), check=True)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("command", sorted(OUTPUT_COMMANDS))
def test_output_into_a_missing_folder_is_created(cli, tmp_path, sample_trace, command):
    dst = tmp_path / "a" / "b" / "out.trace"
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
