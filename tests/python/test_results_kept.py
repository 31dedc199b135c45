"""Results a researcher keeps: Parquet output, and resumable sweeps through the run cache."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import PMSIM

import pmsim

SWEEP = ["sweep", "--designs", "baseline,eadr,bbb", "--workloads", "array,nstore", "--grid", "ops=30,60,90"]


def _env(cache: Path) -> dict:
    return {**os.environ, "PMSIM_CACHE": str(cache)}


def _entries(cache: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in cache.glob("*/*.json")}


def test_sweep_parquet_has_the_columns_of_pmsim_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("PMSIM_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r.parquet"
    args = ["sweep", "--designs", "baseline,eadr", "--workloads", "array", "--grid", "ops=10,20", "-j", "1"]
    p = subprocess.run(
        [*PMSIM, *args, "-q", "-o", out], capture_output=True, text=True, env=_env(tmp_path / "c")
    )
    assert p.returncode == 0, p.stderr
    cli_df = pd.read_parquet(out)
    api_df = pmsim.sweep(["baseline", "eadr"], ["array"], grid={"ops": [10, 20]}, workers=1, progress=False)
    assert list(cli_df.columns) == list(api_df.columns)
    assert list(cli_df.sim_time_ns) == list(api_df.sim_time_ns)


def test_sweep_and_compare_write_the_format_their_suffix_names_and_refuse_others(tmp_path):
    args = ["sweep", "--designs", "baseline,eadr", "--workloads", "array", "-p", "ops=10", "-j", "1", "-q"]
    env = _env(tmp_path / "cache")
    as_json = tmp_path / "r.json"
    p = subprocess.run([*PMSIM, *args, "-o", as_json], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    rows = pd.read_json(as_json, orient="records")
    as_csv = tmp_path / "r.csv"
    assert subprocess.run([*PMSIM, *args, "-o", as_csv], capture_output=True, env=env).returncode == 0
    assert list(rows.design) == ["baseline", "eadr"]
    assert list(rows.sim_time_ps) == list(pd.read_csv(as_csv).sim_time_ps)
    # A suffix that promises another format is refused before anything runs, naming the file.
    for cmd in (args, ["compare", "--workload", "array", "-p", "ops=10", "--designs", "baseline", "-q"]):
        bad = tmp_path / "r.xlsx"
        p = subprocess.run([*PMSIM, *cmd, "-o", bad], capture_output=True, text=True, env=env)
        assert p.returncode == 2, p.stderr
        assert "r.xlsx" in p.stderr and "'.xlsx'" in p.stderr and "Traceback" not in p.stderr
        assert not bad.exists()
    p = subprocess.run(
        [
            *PMSIM,
            "compare",
            "--workload",
            "array",
            "-p",
            "ops=10",
            "--designs",
            "baseline,eadr",
            "-q",
            "-o",
            as_json,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    assert set(pd.read_json(as_json, orient="records").design) == {"baseline", "eadr"}


def test_interrupted_sweep_restarted_reuses_cached_runs_and_gives_identical_tables(tmp_path):
    cache = tmp_path / "cache"
    out = tmp_path / "resumed.csv"
    args = [*PMSIM, *SWEEP, "-j", "1", "-q", "-o", out]
    proc = subprocess.Popen(args, env=_env(cache), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Kill it once a few runs are cached and before it is done (a state, not a duration).
        deadline = time.monotonic() + 300
        while len(_entries(cache)) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    before = _entries(cache)
    assert 3 <= len(before) < 18, f"the sweep was not interrupted midway ({len(before)} of 18 cached)"
    assert not out.exists()
    p = subprocess.run(args, env=_env(cache), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    after = _entries(cache)
    assert len(after) == 18
    assert all(after[k] == v for k, v in before.items()), "cached runs were recomputed"
    ref = tmp_path / "fresh.csv"
    p = subprocess.run(
        [*PMSIM, *SWEEP, "-j", "1", "-q", "--no-cache", "-o", ref],
        env=_env(tmp_path / "other-cache"),
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == ref.read_bytes()


def test_cache_key_changes_with_everything_that_decides_a_run(tmp_path):
    from pmsim import cache

    k = cache.key("baseline", workload="array", params={"ops": 10})
    assert k == cache.key("baseline", workload="array", params={"ops": "10"})
    others = [
        cache.key("eadr", workload="array", params={"ops": 10}),
        cache.key("baseline", workload="nstore", params={"ops": 10}),
        cache.key("baseline", workload="array", params={"ops": 11}),
        cache.key("baseline", workload="array", params={"ops": 10, "pm_write_ns": 91}),
    ]
    assert len({k, *others}) == 5
    t = tmp_path / "a.trace"
    t.write_text("# pmsim trace v1\nthreads 1\nT0 ofence\n")
    kt = cache.key("baseline", trace=str(t), params={})
    t.write_text("# pmsim trace v1\nthreads 1\nT0 sfence\n")
    os.utime(t, ns=(1, 1))
    assert cache.key("baseline", trace=str(t), params={}) != kt


@pytest.mark.parametrize(
    "entry",
    ["[1,2]", '"x"', "{}", '{"design": "baseline"}', "{not json", "\xff\xfe"],
    ids=["list", "string", "empty-object", "missing-keys", "bad-json", "not-utf8"],
)
def test_a_damaged_cache_entry_is_rerun_and_overwritten(tmp_path, entry):
    cache = tmp_path / "cache"
    args = [*PMSIM, "sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=10", "-j", "1", "-q"]
    fresh = tmp_path / "fresh.csv"
    assert subprocess.run([*args, "-o", fresh], env=_env(cache), capture_output=True).returncode == 0
    (path,) = _entries(cache)
    good = path.read_bytes()
    path.write_bytes(entry.encode("latin-1"))
    again = tmp_path / "again.csv"
    p = subprocess.run([*args, "-o", again], env=_env(cache), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert again.read_bytes() == fresh.read_bytes()
    assert path.read_bytes() == good
