"""`pmsim trace gen/convert/stats` and replaying text vs binary traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pmsim

MAGIC = b"PMSIMTRB"


def stats_json(cli, path: Path) -> dict:
    return json.loads(cli("trace", "stats", path, "--json", check=True).stdout)


def test_gen_writes_text_and_binary(cli, tmp_path: Path):
    txt, binf = tmp_path / "a.trace", tmp_path / "a.bin"
    p = cli("trace", "gen", "--workload", "array", "-p", "ops=50", "-p", "threads=2", "-o", txt, check=True)
    assert "events" in p.stdout
    cli("trace", "gen", "--workload", "array", "-p", "ops=50", "-p", "threads=2", "-o", binf, check=True)
    text = txt.read_text()
    assert text.startswith("# pmsim trace v1\nthreads 2\n")
    assert binf.read_bytes()[:8] == MAGIC
    assert binf.stat().st_size < txt.stat().st_size
    st, sb = stats_json(cli, txt), stats_json(cli, binf)
    assert st == sb
    assert st["threads"] == 2 and st["operations"] == 100
    assert st["events"] == sum(st["events_by_thread"]) == sum(st["events_by_kind"].values())
    assert st["events"] == len([ln for ln in text.splitlines() if ln.startswith("T")])
    assert st["pm_stores"] > 0
    # the workload's stats without a file agree too
    assert pmsim.trace_stats(workload="array", ops=50, threads=2) == st


@pytest.mark.parametrize("compress", [True, False], ids=["lz4", "plain"])
def test_text_binary_text_round_trip(cli, tmp_path: Path, sample_trace: Path, compress: bool):
    norm = tmp_path / "norm.trace"
    cli("trace", "convert", sample_trace, norm, check=True)  # text -> text normalises
    flags = [] if compress else ["--no-compress"]
    binf = tmp_path / "s.bin"
    cli("trace", "convert", norm, binf, *flags, check=True)
    assert binf.read_bytes()[:8] == MAGIC
    assert int.from_bytes(binf.read_bytes()[10:12], "little") == (1 if compress else 0)  # flags: bit0 = LZ4
    back = tmp_path / "back.trace"
    cli("trace", "convert", binf, back, check=True)
    assert back.read_text() == norm.read_text()
    # the original (with comments, decimal numbers, 0x values) converts to the same binary trace
    direct = tmp_path / "direct.bin"
    cli("trace", "convert", sample_trace, direct, *flags, check=True)
    assert direct.read_bytes() == binf.read_bytes()
    # normalisation is idempotent and keeps every event
    again = tmp_path / "again.trace"
    cli("trace", "convert", norm, again, "--to", "text", check=True)
    assert again.read_text() == norm.read_text()
    assert stats_json(cli, sample_trace) == stats_json(cli, binf)


def test_normalised_text_is_what_we_expect(cli, tmp_path: Path, sample_trace: Path):
    norm = tmp_path / "norm.trace"
    cli("trace", "convert", sample_trace, norm, check=True)
    lines = norm.read_text().splitlines()
    assert lines[:3] == ["# pmsim trace v1", "threads 2", "pm 0x100000000 0x40000000"]
    assert "T1 load 0x100000000 8" in lines  # decimal address -> hex
    assert "T0 ntstore 0x100000040 16 ff" in lines  # value without leading zeros / 0x
    assert "T1 acquire 0x3000" in lines  # default 8-byte sync size is implicit
    assert "T1 release 0x2000 8 0" in lines  # an explicit release value is kept
    assert "T1 store 0x100000100 64 102030405060708090a0b0c0d0e0f10" in lines
    assert not any(ln.startswith("#") for ln in lines[1:])  # comments dropped
    assert sum(ln.startswith("T") for ln in lines) == 20


def test_stats_counts_of_hand_written_trace(cli, sample_trace: Path):
    s = stats_json(cli, sample_trace)
    assert s["threads"] == 2 and s["events"] == 20
    assert s["events_by_thread"] == [13, 7]
    assert s["events_by_kind"]["store"] == 2 and s["events_by_kind"]["release"] == 2
    # PM stores: store 8 B + ntstore 16 B + store 64 B; the rmw and releases are volatile (0x2000)
    assert s["pm_stores"] == 3 and s["pm_store_bytes"] == 8 + 16 + 64
    assert s["operations"] == 1


def test_binary_and_text_replay_identically(cli, tmp_path: Path):
    txt, binf = tmp_path / "e.trace", tmp_path / "e.bin"
    for out in (txt, binf):
        cli("trace", "gen", "--workload", "echo", "-p", "ops=60", "-o", out, check=True)
    for design in ("baseline", "eadr"):
        a = cli("run", "--trace", txt, "--design", design, "-o", tmp_path / "t.json", check=True)
        b = cli("run", "--trace", binf, "--design", design, "-o", tmp_path / "b.json", check=True)
        assert a.returncode == b.returncode == 0
        assert (tmp_path / "t.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    # a trace run equals the run of the workload it was generated from
    direct = pmsim.run("eadr", workload="echo", ops=60)
    assert json.loads((tmp_path / "b.json").read_text()) == direct


def test_hand_written_trace_runs(cli, tmp_path: Path, sample_trace: Path):
    p = cli("run", "--trace", sample_trace, "--design", "baseline", "--json", check=True)
    s = json.loads(p.stdout)
    assert s["threads"] == 2 and s["events"] == 20 and s["operations"] == 1
    assert s["pm_stores"] == 3


def test_stats_counts_a_trace_of_more_threads_than_pmsim_simulates(cli, tmp_path: Path):
    # Counting simulates nothing (a tester's finding: stats refused what lint and analyze read).
    body = "".join(f"T{t} store {0x100000000 + 64 * t:#x} 8 1\n" for t in range(0, 70, 3))
    f = tmp_path / "wide.trace"
    f.write_text(f"# pmsim trace v1\nthreads 70\n{body}")
    p = cli("trace", "stats", f, "--json", check=True)
    s = json.loads(p.stdout)
    assert (s["threads"], s["events"], s["pm_stores"]) == (70, 24, 24)
    assert s["events_by_thread"][69] == 1 and s["events_by_thread"][68] == 0
    # Running it is refused, naming the file and the limit.
    p = cli("run", "--trace", f, "--design", "baseline")
    assert p.returncode == 2 and "70 threads" in p.stderr and "wide.trace" in p.stderr, p.stderr
