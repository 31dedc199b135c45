"""Sweep rows keep their grid values, the documented speedup and instruction rules hold, and a
misspelt machine keyword in Python is named as one."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import pmsim

ROOT = Path(__file__).resolve().parents[2]
STATS_MD = (ROOT / "docs" / "stats.md").read_text()

# `remote_gap > 0` adds one remote-stream thread: the run simulates threads + 1 trace threads.
HYBRID = {"ops": 20, "remote_gap": 200}


def test_sweep_grid_value_wins_over_the_stat_of_the_same_name():
    df = pmsim.sweep(["broi"], ["hash"], grid={"threads": [1, 2]}, workers=1, progress=False, **HYBRID)
    assert list(df.threads) == [1, 2]
    assert list(df["stats.threads"]) == [2, 3]
    assert list(df.design) == ["broi", "broi"] and "stats.design" not in df


def test_cli_sweep_grid_value_wins_over_the_stat_of_the_same_name(cli, tmp_path: Path):
    args = ["--designs", "broi", "--workloads", "hash", "--grid", "threads=1,2"]
    params = [x for k, v in HYBRID.items() for x in ("-p", f"{k}={v}")]
    cli("sweep", *args, *params, "-q", "-o", "x.csv", cwd=tmp_path, check=True)
    df = pd.read_csv(tmp_path / "x.csv")
    assert list(df.threads) == [1, 2]
    assert list(df["stats.threads"]) == [2, 3]
    assert "stats.threads" in STATS_MD


def test_compare_speedup_is_the_documented_roi_time_ratio(cli, tmp_path: Path):
    args = ["--workload", "array", "-p", "ops=50", "--designs", "baseline,eadr", "-q", "-o", "c.csv"]
    cli("compare", *args, cwd=tmp_path, check=True)
    c = pd.read_csv(tmp_path / "c.csv").set_index("design")
    base = c.loc["baseline", "roi_time_ns"]
    assert c.loc["eadr", "speedup_vs_baseline"] == round(base / c.loc["eadr", "roi_time_ns"], 3)
    assert "`speedup_vs_baseline` = baseline `roi_time_ns` / the design's `roi_time_ns`" in STATS_MD
    assert "baseline `sim_time_ns` /" not in STATS_MD


@pytest.mark.parametrize(
    "keyword, close",
    [("pm_write_nss", "pm.write_ns"), ("pm.write", "pm.write_ns"), ("llc_size_kb", "llc.size_kib")],
)
def test_misspelt_machine_keyword_is_named_with_close_machine_parameters(keyword: str, close: str):
    calls = [
        lambda kw: pmsim.run("baseline", workload="array", ops=20, **kw),
        lambda kw: pmsim.crash("baseline", workload="array", ops=20, at=0, **kw),
        lambda kw: pmsim.analyze(workload="array", ops=20, instr_ops_per_s=1e6, **kw),
        lambda kw: pmsim.sweep(["baseline"], ["array"], ops=20, progress=False, **kw),
    ]
    for call in calls:
        with pytest.raises(pmsim.PmsimError) as e:
            call({keyword: 5})
        msg = str(e.value)
        assert msg.startswith(f"parameter '{keyword}': unknown parameter"), msg
        assert re.search(rf"did you mean one of: [^)]*\b{re.escape(close)}\b", msg), msg
        assert "workload 'array' (valid: threads, ops, seed," in msg, msg


def test_unknown_keyword_close_to_no_machine_parameter_points_to_config_show():
    with pytest.raises(pmsim.PmsimError, match=r"^parameter 'frobnicate': unknown parameter") as e:
        pmsim.run("baseline", workload="array", ops=20, frobnicate=1)
    assert "see 'pmsim config show'" in str(e.value) and "(valid: threads, ops," in str(e.value)


def test_instructions_retired_by_remote_events_as_documented(tmp_path: Path):
    t = tmp_path / "client.trace"
    t.write_text(
        "# pmsim trace v1\nthreads 1\npm 0x100000000 0x1000000\n"
        "T0 begin tx\nT0 compute 5\nT0 rdma_pwrite 0 0x100000000 64\nT0 rdma_wait\nT0 end tx\n"
    )
    # compute 5: five; rdma_pwrite: one; rdma_wait, begin and end: none.
    assert pmsim.run("baseline", trace=t)["instructions"] == 6
    row = next(line for line in STATS_MD.splitlines() if line.startswith("| `instructions` |"))
    assert "rdma_wait" in row, row
