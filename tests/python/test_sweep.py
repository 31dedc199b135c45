"""`pmsim.sweep` and `pmsim sweep/compare`: local processes and Dask give the same rows in job order."""

from __future__ import annotations

import pandas as pd
import pytest

import pmsim

COLUMNS = [
    "design",
    "workload",
    "ops",
    "sim_time_ns",
    "operations",
    "ops_per_sec",
    "pm_stores",
    "pm_writes",
    "pm_reads",
    "stall_fence",
    "stall_dfence",
    "wpq_occupancy_avg",
    "write_bandwidth_gbps",
]


def small_sweep(**kw) -> pd.DataFrame:
    return pmsim.sweep(["baseline", "eadr"], ["array"], grid={"ops": [100, 200]}, progress=False, **kw)


def test_sweep_rows_in_job_order():
    df = small_sweep()
    assert isinstance(df, pd.DataFrame)
    assert len(df) == 4
    assert set(COLUMNS) <= set(df.columns), set(COLUMNS) - set(df.columns)
    assert list(df.design) == ["baseline", "eadr", "baseline", "eadr"]
    assert list(df.ops) == [100, 100, 200, 200]
    assert list(df.operations) == [400, 400, 800, 800]
    # each row is exactly the single run
    one = pmsim.run("eadr", workload="array", ops=200)
    assert df.iloc[3].sim_time_ns == one["sim_time_ns"]
    assert df.iloc[3].pm_writes == one["pm_writes"]
    # serial and parallel agree
    pd.testing.assert_frame_equal(df, small_sweep(workers=1))


def test_sweep_on_dask_matches_local():
    distributed = pytest.importorskip("distributed")
    local = small_sweep(workers=2)
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as cluster:
        remote = small_sweep(scheduler=cluster)
        with distributed.Client(cluster) as client:  # a Client works too, and is left open
            again = small_sweep(scheduler=client)
            assert client.status == "running"
    key = ["design", "workload", "ops"]
    for df in (remote, again):
        pd.testing.assert_frame_equal(
            local.sort_values(key).reset_index(drop=True), df.sort_values(key).reset_index(drop=True)
        )
        pd.testing.assert_frame_equal(local, df)  # rows come back in job order, too


def test_sweep_errors_before_running():
    with pytest.raises(pmsim.PmsimError, match="nope"):
        pmsim.sweep(["baseline", "nope"], ["array"], progress=False)
    with pytest.raises(pmsim.PmsimError, match="frob"):
        pmsim.sweep(["baseline"], ["array"], grid={"frob": [1, 2]}, progress=False)
    with pytest.raises(pmsim.PmsimError, match="many"):
        pmsim.sweep(["baseline", "eadr"], ["array"], ops="many", progress=False, workers=2)


def test_sweep_names_the_grid_point_whose_machine_is_invalid():
    # 48 KiB is valid with 12 ways and 32 KiB with 8, but the cartesian grid also pairs 48 KiB
    # with 8 ways: refused before any run, naming that point.
    grid = {"l1.size_kib": [48, 32], "l1.ways": [12, 8]}
    with pytest.raises(
        pmsim.PmsimError, match=r"machine l1.size_kib=48, l1.ways=8|machine l1.ways=8, l1.size_kib=48"
    ):
        pmsim.sweep(["baseline"], ["array"], grid=grid, ops=20, progress=False)
    df = pmsim.sweep(
        ["baseline"], ["array"], grid={"l1.size_kib": [48], "l1.ways": [12]}, ops=20, progress=False
    )
    assert len(df) == 1


def test_sweep_with_config_grid():
    df = pmsim.sweep(["baseline"], ["array"], grid={"pm_write_ns": [90, 5000]}, ops=200, progress=False)
    assert list(df.pm_write_ns) == [90, 5000]
    assert df.sim_time_ns.iloc[1] > df.sim_time_ns.iloc[0]


def test_cli_sweep_and_compare(cli, tmp_path):
    p = cli(
        "sweep",
        "--designs",
        "baseline,eadr",
        "--workloads",
        "array",
        "--grid",
        "ops=100,200",
        "-q",
        "-o",
        "s.csv",
        cwd=tmp_path,
        check=True,
    )
    assert "wrote 4 rows" in p.stdout
    df = pd.read_csv(tmp_path / "s.csv")
    ref = small_sweep()
    assert list(df.design) == list(ref.design)
    assert list(df.sim_time_ns) == list(ref.sim_time_ns)
    p = cli("compare", "--workload", "array", "-p", "ops=200", "-q", "-o", "c.csv", cwd=tmp_path, check=True)
    assert "speedup_vs_baseline" in p.stdout
    c = pd.read_csv(tmp_path / "c.csv")
    assert list(c.design) == [d for d, _ in pmsim.designs()]
    assert c[c.design == "baseline"].speedup_vs_baseline.iloc[0] == 1.0


def test_cli_sweep_grid_values_are_numbers_as_from_the_api(cli, tmp_path):
    # A Parquet table keeps its column types: the CLI's grid column must be the API's (int64),
    # so that it sorts 90 < 300 < 1000 rather than as text.
    cli(
        "sweep",
        "--designs",
        "baseline",
        "--workloads",
        "array",
        "-p",
        "ops=50",
        "--grid",
        "pm.write_ns=1000,300,90",
        "-q",
        "-o",
        "g.parquet",
        cwd=tmp_path,
        check=True,
    )
    df = pd.read_parquet(tmp_path / "g.parquet")
    api = pmsim.sweep(["baseline"], ["array"], grid={"pm.write_ns": [1000, 300, 90]}, ops=50, progress=False)
    assert df["pm.write_ns"].dtype == api["pm.write_ns"].dtype == "int64"
    assert sorted(df["pm.write_ns"]) == [90, 300, 1000]
    assert list(df.sim_time_ps) == list(api.sim_time_ps)


def test_sweep_and_compare_run_on_a_configuration_file(cli, tmp_path):
    # A slower PM in a TOML file: every run of the sweep (CLI and API) and of compare starts
    # from it, as `pmsim run --config` does, and --set applies on top of it.
    cfg = tmp_path / "slow.toml"
    cfg.write_text("[pm]\nwrite_ns = 5000\n[mc]\nwpq_entries = 1\n")
    one = pmsim.run("baseline", workload="array", ops=50, config=cfg)
    default = pmsim.run("baseline", workload="array", ops=50)
    assert one["sim_time_ps"] != default["sim_time_ps"]
    api = pmsim.sweep(["baseline"], ["array"], ops=50, config=cfg, progress=False)
    assert list(api.sim_time_ps) == [one["sim_time_ps"]]
    cli("sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=50", "--config", cfg,
        "-q", "-o", "s.csv", cwd=tmp_path, check=True)  # fmt: skip
    assert list(pd.read_csv(tmp_path / "s.csv").sim_time_ps) == [one["sim_time_ps"]]
    on_top = pmsim.run("baseline", workload="array", ops=50, config=cfg, pm_read_ns=400)
    cli("compare", "--workload", "array", "-p", "ops=50", "--designs", "baseline", "--config", cfg,
        "--set", "pm.read_ns=400", "-q", "-o", "c.csv", cwd=tmp_path, check=True)  # fmt: skip
    assert list(pd.read_csv(tmp_path / "c.csv").sim_time_ps) == [on_top["sim_time_ps"]]
    # The cache keys the configuration it gives, not the file's name: an edited file reruns.
    cfg.write_text("[pm]\nwrite_ns = 90\n")
    again = pmsim.sweep(["baseline"], ["array"], ops=50, config=cfg, progress=False)
    assert list(again.sim_time_ps) == [default["sim_time_ps"]]
    with pytest.raises(pmsim.PmsimError, match="no such file"):
        pmsim.sweep(["baseline"], ["array"], ops=50, config=tmp_path / "none.toml", progress=False)


def test_cli_sweep_grid_of_mixed_spellings_writes_parquet(cli, tmp_path):
    # `true,0` spells a switch two ways: one reads as a number, one does not. The column must
    # hold one type, or the Parquet write fails after the whole sweep ran.
    r = cli(
        "sweep",
        "--designs",
        "asap-ep",
        "--workloads",
        "array",
        "-p",
        "ops=20",
        "--grid",
        "rt.undo_reads_pm=true,0",
        "-j",
        "1",
        "-q",
        "-o",
        "mixed.parquet",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    df = pd.read_parquet(tmp_path / "mixed.parquet")
    assert list(df["rt.undo_reads_pm"]) == ["true", "0"]
