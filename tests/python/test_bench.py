"""`pmsim bench`: the JSON it prints describes the run it timed (never timing inside stats)."""

from __future__ import annotations

import json

SMALL = ["--workload", "array", "--ops", "200", "--threads", "2", "--repeat", "2"]


def _run_json(cli, *args: str) -> dict:
    out = cli("run", "--workload", "array", "-p", "ops=200", "-p", "threads=2", *args, "--json", check=True)
    return json.loads(out.stdout)


def test_bench_json_counts_the_simulated_run(cli):
    r = json.loads(cli("bench", *SMALL, "--design", "asap-rp", "--json", check=True).stdout)
    stats = _run_json(cli, "--design", "asap-rp")
    assert r["design"] == "asap-rp" and r["workload"] == "array"
    # The benchmarked run is the same simulation `pmsim run` reports.
    assert r["engine_events"] == stats["engine_events"]
    assert r["trace_events"] >= stats["events"] > 0
    assert r["threads"] == 2 and r["simulated_cores"] == 4 and r["repeat"] == 2
    assert r["events_per_s"] == r["trace_events"] / r["sim_s"]
    assert r["events_per_cpu_s"] == r["trace_events"] / r["sim_cpu_s"]
    assert r["sim_s"] > 0 and r["sim_cpu_s"] > 0 and r["decode_events_per_s"] > 0


def test_bench_all_designs_is_a_list_in_design_order(cli):
    r = json.loads(cli("bench", *SMALL, "--design", "all", "--json", check=True).stdout)
    listed = [line.split()[0] for line in cli("designs", check=True).stdout.splitlines() if line.strip()]
    assert [x["design"] for x in r] == listed
    assert len({x["trace_events"] for x in r}) == 1


def test_bench_config_overrides_reach_the_engine(cli):
    r = json.loads(
        cli("bench", *SMALL, "--design", "eadr", "--set", "core.count=64", "--json", check=True).stdout
    )
    assert r["simulated_cores"] == 64


def test_bench_human_output_and_bad_design(cli):
    out = cli("bench", *SMALL, "--design", "eadr", check=True).stdout
    assert "trace events / s" in out and "design eadr" in out
    bad = cli("bench", *SMALL, "--design", "nope")
    assert bad.returncode == 2
    assert bad.stderr.startswith("pmsim: error:") and "nope" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_no_recovery_without_crash_is_refused(cli):
    from test_cli_errors import assert_clean_error

    assert_clean_error(
        cli("bench", "--workload", "array", "--ops", "10", "--no-recovery"), mentions=["--crash"]
    )
