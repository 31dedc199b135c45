"""`pmsim bench --crash`: crash instants checked per host second, measured on exactly the
instants `pmsim crash` checks (no timed assertion: speed is reported, never asserted)."""

from __future__ import annotations

import json

from conftest import pmsim_cli

ARGS = ("--workload", "dash-eh", "--design", "asap-rp", "--ops", "15", "--threads", "2")


def test_bench_crash_reports_the_instants_crash_checks():
    for mode, crash_args in (("every", ("--every",)), ("random:50", ("--random", "50"))):
        p = pmsim_cli("bench", *ARGS, "--crash", mode, "--repeat", "2", "--json")
        assert p.returncode == 0, p.stdout + p.stderr
        b = json.loads(p.stdout)
        p = pmsim_cli(
            "crash", "--workload", "dash-eh", "-p", "ops=15", "-p", "threads=2", "--design", "asap-rp",
            *crash_args, "--json",
        )  # fmt: skip
        rep = json.loads(p.stdout)
        assert b["instants"] == rep["images"] and b["failures"] == len(rep["failures"]) == 0
        assert 1 <= b["recovery_runs"] <= b["instants"]
        # Dash-EH's recovery is made of pieces (segments, buckets): each whole run runs some.
        assert b["piece_runs"] > b["recovery_runs"]
        assert b["instants_per_s"] > 0 and b["check_instants_per_s"] >= b["instants_per_s"]
        assert b["crash"] == mode and b["recovery"] is True


def test_bench_crash_without_recovery_runs_none():
    p = pmsim_cli("bench", *ARGS, "--crash", "every", "--repeat", "1", "--no-recovery", "--json")
    assert p.returncode == 0, p.stderr
    b = json.loads(p.stdout)
    assert b["recovery_runs"] == b["piece_runs"] == 0 and b["recovery"] is False and b["instants"] > 10


def test_bench_crash_bad_mode_is_one_error_line():
    for bad in ("random:0", "random", "every:3", "sometimes"):
        p = pmsim_cli("bench", *ARGS, "--crash", bad)
        assert p.returncode == 2, (bad, p.stdout, p.stderr)
        assert p.stderr.startswith("pmsim: error: --crash") and p.stderr.count("\n") == 1, p.stderr
        assert p.stdout == ""
