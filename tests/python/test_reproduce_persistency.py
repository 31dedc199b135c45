"""`pmsim reproduce persistency` end to end: files, Table 1 against the paper's sides of 1 and
model ordering, and the shapes of Figs 3-5."""

from __future__ import annotations

import pandas as pd
from conftest import pmsim_cli

from pmsim.experiments.persistency import MODELS, PAPER_TABLE1


def test_quick_reproduction(tmp_path):
    r = pmsim_cli("reproduce", "persistency", "--scale", "quick", "--out", tmp_path, "-q")
    assert r.returncode == 0, r.stderr
    d = tmp_path / "persistency"
    for f in [
        "table1.csv",
        "table1.md",
        "fig3_persist_latency.csv",
        "fig3_persist_latency.png",
        "fig4_atomic_persist.csv",
        "fig4_atomic_persist.png",
        "fig5_tracking_granularity.csv",
        "fig5_tracking_granularity.png",
        "PAPER.md",
    ]:
        assert (d / f).stat().st_size > 0, f
    assert not list(d.glob("*.partial"))
    # Every figure has its data beside it, as CSV and as a Markdown table.
    for png in d.glob("*.png"):
        assert png.with_suffix(".csv").is_file() and png.with_suffix(".md").is_file(), png.name
    assert (d / "fig4_atomic_persist.md").read_text().startswith("| bytes |")
    # Like every reproduction: every run kept (CSV and Parquet alike), NOTES.txt says what it is.
    runs = pd.read_csv(d / "runs.csv")
    assert (runs.figure == "table1").sum() == 16
    assert set(runs.figure) == {"table1", "atomic", "track"}
    assert len(pd.read_parquet(d / "runs.parquet")) == len(runs)
    assert "pmsim reproduce persistency --scale quick" in (d / "NOTES.txt").read_text()
    t1 = pd.read_csv(d / "table1.csv")
    assert list(t1.columns) == ["queue", "threads", "model", "normalized_rate"]
    assert len(t1) == 16
    for (q, t), paper in PAPER_TABLE1.items():
        row = t1[(t1.queue == q) & (t1.threads == t)].set_index("model")["normalized_rate"]
        for m in MODELS:
            assert (row[m] >= 1) == (paper[m] >= 1), (q, t, m, row[m], paper[m])
        assert row["strict"] < row["epoch"] <= row["racing"] <= row["strand"], (q, t, dict(row))
    md = (d / "table1.md").read_text()
    assert "(0.034)" in md and "(**3.2**)" in md
    # Fig 3: every model is instruction-bound at 10 ns and persist-bound at 100 µs except strand
    # (never, at this path); the break-even latencies keep strict < epoch < strand.
    f3 = pd.read_csv(d / "fig3_persist_latency.csv")
    lo, hi = f3.persist_ns.min(), f3.persist_ns.max()
    assert lo == 10 and hi == 100_000
    for m, g in f3.groupby("model"):
        at = g.set_index("persist_ns")["achievable_ops_per_s"]
        assert at[lo] == g.instr_ops_per_s.iloc[0], m
        assert list(at.sort_index()) == sorted(at, reverse=True), m
    be = pd.read_csv(d / "fig3_break_even.csv").set_index("model")["break_even_ns"]
    assert be["strict"] < be["epoch"] < be["strand"]
    # Fig 4: strict falls with A to epoch's value at 256 B; Fig 5: epoch rises with G.
    f4 = pd.read_csv(d / "fig4_atomic_persist.csv")
    s4 = f4[f4.model == "strict"].sort_values("bytes")["critical_path_per_insert"].tolist()
    e4 = f4[f4.model == "epoch"].sort_values("bytes")["critical_path_per_insert"].tolist()
    assert s4 == sorted(s4, reverse=True) and s4[0] > e4[0] and s4[-1] == e4[-1]
    f5 = pd.read_csv(d / "fig5_tracking_granularity.csv")
    e5 = f5[f5.model == "epoch"].sort_values("bytes")["critical_path_per_insert"].tolist()
    assert e5 == sorted(e5) and e5[-1] > e5[0]
    paper = (d / "PAPER.md").read_text()
    for number in ["17 ns", "119 ns", "6,000 ns", "0.034", "0.43", "29"]:
        assert number in paper, number


def test_unknown_paper_is_refused(tmp_path):
    r = pmsim_cli("reproduce", "nope", "--out", tmp_path)
    assert r.returncode == 2 and "persistency" in r.stderr and len(r.stderr.splitlines()) == 1
