"""The persist critical-path bound (docs/design.md §8) set beside the timing designs.

Why: a timing design is only as fast as the persist ordering its model allows. The critical-path
analysis says how many persists per operation must happen one after another under strict, epoch
and strand persistency, with infinite bandwidth; at the PM media write latency (``pm.write_ns``:
every persist costs one media write, the seed's methodology with pmsim's device) that gives the
operation rate no implementation of the model that waits for the media can beat when persists
are the bottleneck (designs that persist from caches or buffers, eADR and BBB, can). Beside
each design's simulated rate it shows how much persist concurrency the design leaves unused.
Used by ``pmsim profile`` (paths per operation) and ``pmsim reproduce asap`` (the table).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from pmsim import api
from pmsim.analysis import analyze_reports
from pmsim.output import pipe_table, write_atomic

MODELS = ["strict", "epoch", "strand"]


def critical_paths(workloads: list[str], *, threads: int, ops: int, progress: bool = False) -> pd.DataFrame:
    """Critical path per operation of each workload under each model (one pass per workload)."""
    rows = []
    for w in tqdm(workloads, desc="critical paths", disable=not progress, unit="workload"):
        # The rate is not needed here: a nominal instruction rate skips the eadr run.
        reps = analyze_reports(
            workload=w, model="all", instr_ops_per_s=1.0, params={"threads": threads, "ops": ops}
        )
        row = {"workload": w}
        for r in reps:
            row[f"path_per_op_{r['model']}"] = r["critical_path_per_op"]
        rows.append(row)
    return pd.DataFrame(rows)


def asap_table(
    runs: pd.DataFrame,
    outdir: Path,
    *,
    threads: int,
    ops: int,
    progress: bool = True,
    overrides: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Writes ``persist_bound.csv``/``.md`` in ``outdir`` from the ASAP reproduction's Fig 8 runs
    (one row per design and workload, with ``ops_per_sec``); returns the table. ``overrides``
    are the runs' machine parameters (``section_key=value``): the bound's L is their media write
    latency."""
    main = runs[runs["experiment"] == "fig8"] if "experiment" in runs else runs
    workloads = list(dict.fromkeys(main["workload"]))
    designs = list(dict.fromkeys(main["design"]))
    paths = critical_paths(workloads, threads=threads, ops=ops, progress=progress).set_index("workload")
    lat = float(api.config(**(overrides or {}))["pm"]["write_ns"])
    table = pd.DataFrame(index=pd.Index(workloads, name="workload"))
    for m in MODELS:
        per = paths[f"path_per_op_{m}"]
        table[f"path_per_op_{m}"] = per
        table[f"bound_ops_per_s_{m}"] = per.map(lambda p: float("inf") if p == 0 else 1e9 / (p * lat))
    rates = main.pivot_table(index="workload", columns="design", values="ops_per_sec", sort=False)
    for d in designs:
        table[f"{d}_ops_per_s"] = rates[d]
        # Share of the epoch-model bound the design reaches (above 100%: the design is not
        # persist-bound at one media write per persist, e.g. caches in the persistence domain).
        table[f"{d}_pct_of_epoch_bound"] = 100.0 * rates[d] / table["bound_ops_per_s_epoch"]
    write_atomic(outdir / "persist_bound.csv", table.round(4).to_csv())
    write_atomic(outdir / "persist_bound.md", _markdown(table, designs, lat))
    return table


def _fmt(v: float) -> str:
    if v == float("inf"):
        return "unbounded"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _markdown(t: pd.DataFrame, designs: list[str], lat: float) -> str:
    head = ["workload", "path/op strict", "epoch", "strand", f"epoch bound ops/s (L={lat:g} ns)"]
    head += [f"{d} % of bound" for d in designs]
    cols = ["path_per_op_strict", "path_per_op_epoch", "path_per_op_strand", "bound_ops_per_s_epoch"]
    cols += [f"{d}_pct_of_epoch_bound" for d in designs]
    rows = ([w, *(_fmt(r[c]) for c in cols)] for w, r in t.iterrows())
    lines = [
        "Persist critical path per operation (docs/design.md §8) and each design's simulated rate as a",
        "share of the epoch-persistency bound (one media write per persist on the path). Above 100%:",
        "the design is not persist-bound at one media write per persist (eADR and BBB persist from",
        "their caches or buffers; the WPQ acknowledges before the media write), so the bound is one",
        "for a design that waits for the media, not for every design.",
        "",
        *pipe_table(head, rows, "l" + "r" * (len(head) - 1)),
    ]
    return "\n".join(lines) + "\n"
