"""The BROI seed in pmsim: banked NVM, `delegated`/`broi`, Table IV workloads, and
`pmsim reproduce broi` end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_cli_errors import assert_clean_error

PNG = b"\x89PNG\r\n\x1a\n"
ROOT = Path(__file__).resolve().parents[2]
TABLE3 = ROOT / "configs" / "broi-table3.toml"


def run_json(cli, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "stats.json"
    cli("run", *args, "-o", out, check=True)
    return json.loads(out.read_text())


def test_designs_listed(cli):
    p = cli("designs", check=True)
    assert "delegated" in p.stdout and "broi" in p.stdout


@pytest.mark.parametrize("workload", ["hash", "rbtree", "sps", "btree", "ssca2"])
def test_broi_beats_delegated_on_the_table3_machine(cli, tmp_path: Path, workload: str):
    base = ["--workload", workload, "-p", "ops=200", "-p", "threads=4", "--config", str(TABLE3)]
    d = run_json(cli, tmp_path, *base, "--design", "delegated")
    b = run_json(cli, tmp_path, *base, "--design", "broi")
    assert d["pm_writes"] == b["pm_writes"], "same work"
    bd, bb = d["mcs"][0]["banks"], b["mcs"][0]["banks"]
    assert b["sim_time_ns"] < d["sim_time_ns"], workload
    assert bb["memory_throughput_gbps"] > bd["memory_throughput_gbps"]
    assert len(bd["per_bank"]) == 8 and sum(x["writes"] for x in bd["per_bank"]) == d["pm_writes"]


def test_every_design_runs_on_banked_memory_with_queues_of_one(cli, tmp_path: Path):
    p = cli("designs", check=True)
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    for d in names:
        s = run_json(
            cli,
            tmp_path,
            *("--workload", "array", "-p", "ops=40", "--design", d, "--config", str(TABLE3)),
            *("--set", "bank.write_queue=1", "--set", "bank.read_queue=1", "--set", "broi.entry_slots=1"),
        )
        # eADR keeps the lines in its (persistent) caches: nothing reaches the banks.
        assert s["sim_time_ns"] > 0 and (s["pm_writes"] > 0 or d == "eadr"), d


def test_hybrid_stream_reaches_the_remote_queue(cli, tmp_path: Path):
    s = run_json(
        cli,
        tmp_path,
        *("--workload", "hash", "-p", "ops=100", "-p", "threads=2", "-p", "remote_gap=500"),
        *("--design", "broi", "--config", str(TABLE3)),
        # Table III's 4 cores, 3 threads (2 local + the remote-style stream): the stream is the
        # trace's last thread, not the idle fourth core.
        *("--set", "broi.remote_threads=1"),
    )
    assert s["threads"] == 3
    assert s["design_stats"]["broi_remote_picks"] >= 100 * 8


@pytest.mark.parametrize(
    "setting, mentions",
    [
        ("bank.count=6", ["bank.count", "power of two"]),
        ("bank.row_bytes=0", ["bank.row_bytes"]),
        ("bank.write_queue=0", ["bank.write_queue"]),
        ("bank.read_queue=0", ["bank.read_queue"]),
        ("broi.sigma=-1", ["broi.sigma"]),
        ("broi.entry_slots=0", ["broi.entry_slots"]),
        ("pm.model=dram", ["pm.model", "banked"]),
    ],
)
def test_bad_banked_and_broi_parameters(cli, tmp_path: Path, setting: str, mentions: list[str]):
    out = tmp_path / "out.json"
    p = cli("run", "--workload", "hash", "-p", "ops=10", "--design", "broi", "--set", setting, "-o", out)
    assert_clean_error(p, mentions=mentions)
    assert not out.exists()


def test_bad_table4_parameter(cli, tmp_path: Path):
    p = cli("run", "--workload", "btree", "-p", "footprint_kib=lots", "--design", "broi")
    assert_clean_error(p, mentions=["footprint_kib", "lots"])


def test_reproduce_broi_quick(cli, tmp_path: Path):
    out = tmp_path / "results"
    p = cli("reproduce", "broi", "--scale", "quick", "--out", out, "-q", check=True)
    d = out / "broi"
    assert "broi" in p.stdout.lower()
    fig9 = pd.read_csv(d / "fig9_memory_throughput.csv")
    assert list(fig9.columns) == ["benchmark", "scenario", "design", "throughput_gbps"]
    assert set(fig9.scenario) == {"local", "hybrid"} and set(fig9.design) == {"delegated", "broi"}
    assert set(fig9.benchmark) == {"hash", "rbtree", "sps", "btree", "ssca2"}
    fig10 = pd.read_csv(d / "fig10_op_throughput.csv")
    assert list(fig10.columns) == ["benchmark", "scenario", "design", "mops"]
    for scenario in ("local", "hybrid"):
        g = fig10[fig10.scenario == scenario].pivot(index="benchmark", columns="design", values="mops")
        ratio = (g.broi / g.delegated).prod() ** (1 / len(g))
        assert ratio > 1.0, (scenario, ratio)
        f9 = fig9[fig9.scenario == scenario]
        m = f9.pivot(index="benchmark", columns="design", values="throughput_gbps")
        assert (m.broi / m.delegated).prod() ** (1 / len(m)) > 1.0, scenario
    fig11 = pd.read_csv(d / "fig11_scalability.csv")
    assert sorted(set(fig11.threads)) == [1, 2, 4, 8]
    # The same sweep under XOR bank interleaving: the mapping reaches the banks (BLP differs).
    m11 = pd.read_csv(d / "fig11_bank_mapping.csv")
    assert set(m11.bank_mapping) == {"stride", "xor"} and len(m11) == 2 * len(fig11)
    blp = m11.pivot_table(index=["benchmark", "threads", "design"], columns="bank_mapping", values="blp")
    assert (blp.stride != blp.xor).any()
    bank = pd.read_csv(d / "bank_stats.csv")
    assert (bank.blp >= 1.0).all() and ((bank.row_hit_rate >= 0) & (bank.row_hit_rate <= 1)).all()
    for png in ("fig9_memory_throughput.png", "fig10_op_throughput.png", "fig11_scalability.png"):
        data = (d / png).read_bytes()
        assert data[:8] == PNG and len(data) > 10_000, png
    paper = (d / "PAPER.md").read_text()
    assert "+16%" in paper and "+28%" in paper and "36%" in paper and "Fig 12" in paper
    assert not list(d.glob("*.partial"))
    # Like every reproduction: each figure with its CSV and Markdown table, every run as CSV and
    # Parquet (the remote half's runs apart, in runs_fig12).
    for png in d.glob("*.png"):
        assert png.with_suffix(".csv").is_file() and png.with_suffix(".md").is_file(), png.name
    for runs in ("runs", "runs_fig12"):
        assert len(pd.read_parquet(d / f"{runs}.parquet")) == len(pd.read_csv(d / f"{runs}.csv")) > 0


def test_reproduce_unknown_paper(cli, tmp_path: Path):
    p = cli("reproduce", "nope", "--out", tmp_path)
    assert_clean_error(p, mentions=["nope", "broi"])
