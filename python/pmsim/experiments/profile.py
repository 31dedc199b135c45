"""Persist profile of the built-in workloads (issue: the ASAP paper's Fig 2 and WHISPER's
epoch-size finding).

Per workload on 4 threads: PM stores per operation, distinct 64 B lines per epoch, epochs per
operation, the share of epochs that write a single line (WHISPER: about 75%), and how often
cross-thread dependencies arise under epoch and under release persistency (ASAP Fig 2 counts
them per ms of execution; here they are counted by the ASAP designs' dependency tracking, which
splits epochs at every conflict (EP) or synchronising acquire (RP)).
"""

from __future__ import annotations

import pandas as pd

from pmsim import api, plots
from pmsim.experiments.persist_bound import critical_paths
from pmsim.output import folder, write_atomic
from pmsim.sweep import jobs_for, run_jobs

WHISPER_SINGLE_LINE_PCT = 75.0


def profile(
    workloads: list[str] | None = None,
    *,
    threads: int = 4,
    ops: int = 1000,
    out: str | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    # Remote-persistence clients (rdma-*) persist only through rdma_pwrite: no local epochs.
    names = workloads or [w["name"] for w in api.workloads() if not w["name"].startswith("rdma-")]
    rows = []
    for w in names:
        s = api.trace_stats(workload=w, threads=threads, ops=ops)
        epochs = max(s["epochs"], 1)
        nops = max(s["operations"], 1)
        rows.append(
            {
                "workload": w,
                "operations": s["operations"],
                "pm_stores_per_op": s["pm_stores"] / nops,
                "lines_per_epoch": s["epoch_lines"] / epochs,
                "epochs_per_op": s["epochs"] / nops,
                "single_line_epochs_pct": 100.0 * s["single_line_epochs"] / epochs,
            }
        )
    df = pd.DataFrame(rows)
    df = df.merge(critical_paths(names, threads=threads, ops=ops, progress=progress), on="workload")
    runs = run_jobs(
        jobs_for(["asap-ep", "asap-rp"], names, threads=threads, ops=ops),
        workers=workers,
        progress=progress,
        desc="dependency tracking",
    )
    for model in ("ep", "rp"):
        r = runs[runs.design == f"asap-{model}"].set_index("workload")
        df[f"deps_per_ms_{model}"] = df.workload.map(r["ds_cross_thread_deps_per_ms"])
        df[f"epochs_per_ms_{model}"] = df.workload.map(r["ds_epochs_per_ms"])
    if out:
        outdir = folder(out)
        write_atomic(outdir / "persist_profile.csv", df.round(3).to_csv(index=False))
        long = df.melt(
            id_vars="workload",
            value_vars=["epochs_per_ms_rp", "deps_per_ms_rp", "deps_per_ms_ep"],
            var_name="metric",
            value_name="per_ms",
        )
        plots.grouped_bars(
            long,
            index="workload",
            columns="metric",
            values="per_ms",
            log=True,
            title=f"Epochs and cross-thread dependencies per ms ({threads} threads)",
            ylabel="per ms (log)",
            path=outdir / "fig2_persist_profile.png",
        )
    return df


def render(df: pd.DataFrame) -> str:
    cols = [
        "workload",
        "pm_stores_per_op",
        "lines_per_epoch",
        "epochs_per_op",
        "single_line_epochs_pct",
        "deps_per_ms_ep",
        "deps_per_ms_rp",
        "path_per_op_strict",
        "path_per_op_epoch",
        "path_per_op_strand",
    ]
    t = df[cols].copy()
    t.columns = [
        "workload",
        "PM st/op",
        "lines/epoch",
        "epochs/op",
        "1-line epochs %",
        "deps/ms EP",
        "deps/ms RP",
        "path/op strict",
        "path/op epoch",
        "path/op strand",
    ]
    text = t.to_string(index=False, float_format=lambda x: f"{x:,.1f}")
    mean = df["single_line_epochs_pct"].mean()
    text += (
        f"\n\nsingle-line epochs, mean over workloads: {mean:.0f}% (WHISPER reports about "
        f"{WHISPER_SINGLE_LINE_PCT:.0f}%)"
        "\nASAP Fig 2: cross-thread dependencies are rare in WHISPER and PMDK applications and frequent in"
        "\nconcurrent persistent indexes (CCEH, Dash, RECIPE); see docs/workloads.md for the comparison."
    )
    return text
