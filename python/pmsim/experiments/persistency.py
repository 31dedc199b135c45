"""Reproduction of *Memory Persistency* (Pelley, Chen, Wenisch, ISCA 2014) §8 as tables and plots.

Table 1 (persist-bound insert rate normalised to the instruction rate, 500 ns persists: CWL and
2LC, 1 and 8 threads, strict / epoch / racing epochs / strand), Fig. 3 (CWL, 1 thread: achievable
rate as the persist latency grows from 10 ns to 100 µs, and each model's break-even latency),
Fig. 4 (critical path per insert vs atomic persist size) and Fig. 5 (vs tracking granularity).
Every number is the critical-path analysis (docs/design.md §8) of a queue generated here; the
instruction rate is the same trace's insert rate on the timing engine with persists free (`eadr`).
Racing epochs is the epoch model on the queue's `variant=racing`. Nothing is tuned per cell.
``PAPER.md`` sets every paper number beside pmsim's and names the cause where they differ.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Unpack

import pandas as pd

from pmsim.analysis import analyze_reports
from pmsim.experiments.reproduction import Reproduction, RunOptions
from pmsim.output import pipe_table

# Table 1 of the seed (normalised rates).
PAPER_TABLE1 = {
    ("cwl", 1): {"strict": 0.034, "epoch": 0.17, "racing": 0.17, "strand": 12},
    ("cwl", 8): {"strict": 0.058, "epoch": 0.40, "racing": 3.2, "strand": 21},
    ("2lc", 1): {"strict": 0.080, "epoch": 0.56, "racing": 0.56, "strand": 29},
    ("2lc", 8): {"strict": 0.43, "epoch": 3.4, "racing": 3.4, "strand": 22},
}
PAPER_BREAK_EVEN_NS = {"strict": 17.0, "epoch": 119.0, "strand": 6000.0}
MODELS = ["strict", "epoch", "racing", "strand"]
# The analysis model each queue variant is measured under (racing epochs: epoch model).
ANALYSIS_MODEL = {"strict": "strict", "epoch": "epoch", "racing": "epoch", "strand": "strand"}
GRANULARITIES = [8, 16, 32, 64, 128, 256]
SCALES = {"quick": {"inserts": 1600}, "full": {"inserts": 16000}}
FIG3_POINTS = 41  # 10 ns .. 100 µs, 10 per decade
# Every figure: file stem -> (title, y label).
FIGURES = {
    "fig3_persist_latency": ("Fig 3: CWL, 1 thread", "inserts / s"),
    "fig4_atomic_persist": ("Fig 4: CWL, 1 thread", "critical path per insert"),
    "fig5_tracking_granularity": ("Fig 5: CWL, 1 thread", "critical path per insert"),
}


def _job(queue: str, threads: int, variant: str, inserts: int, **kw) -> dict:
    params = {"threads": threads, "ops": max(1, inserts // threads), "variant": variant}
    return analyze_reports(workload=queue, model=ANALYSIS_MODEL[variant], params=params, **kw)[0]


def reproduce(out: str = "results", scale: str = "quick", **run: Unpack[RunOptions]) -> Path:
    """Writes ``OUT/persistency/``; returns that directory. (``workers`` and ``cache`` are
    accepted for the common ``reproduce`` interface; the analyses are fast and run in this
    process, uncached.) Written whole or not at all."""
    with Reproduction.staged(out, "persistency", SCALES, scale, FIGURES, **run) as rep:
        _reproduce(rep, scale)
    return rep.where


def _reproduce(rep: Reproduction, scale: str) -> None:
    inserts = rep.params["inserts"]
    t1_jobs = [(q, t, v) for (q, t) in PAPER_TABLE1 for v in MODELS]
    fig_jobs = [
        (m, kind, g) for kind in ("atomic", "track") for m in ("strict", "epoch") for g in GRANULARITIES
    ]
    bar = rep.bar(len(t1_jobs) + len(fig_jobs), "Memory Persistency")

    # One instruction rate per queue and thread count, as the seed measured it (the program run
    # natively, persist barriers costing nothing): the eadr insert rate of the racing variant,
    # the one with the fewest barriers. Every model of a row is normalised to it, so the row's
    # order is the order of its critical paths.
    done: dict[tuple[str, int, str], dict] = {}
    instr: dict[tuple[str, int], float] = {}
    for q, t, v in sorted(t1_jobs, key=lambda j: j[2] != "racing"):
        r = _job(q, t, v, inserts, instr_ops_per_s=instr.get((q, t)))
        instr.setdefault((q, t), r["instr_ops_per_s"])
        done[(q, t, v)] = {"queue": q, "threads": t, "model": v, **{k: r[k] for k in _KEEP}}
        bar.update()
    t1 = pd.DataFrame([done[j] for j in t1_jobs])

    # Figs 4 and 5 need only the path: the instruction rate is not asked (no eadr run).
    frows = []
    for m, kind, g in fig_jobs:
        kw = {"atomic_bytes": g} if kind == "atomic" else {"track_bytes": g}
        r = _job("cwl", 1, m, inserts, instr_ops_per_s=1.0, **kw)
        frows.append(
            {"figure": kind, "model": m, "bytes": g, "critical_path_per_insert": r["critical_path_per_op"]}
        )
        bar.update()
    bar.close()
    figs = pd.DataFrame(frows)

    cols = ["queue", "threads", "model", "normalized_rate"]
    rep.write("table1.csv", t1.to_csv(index=False, columns=cols))
    rep.write("table1_detail.csv", t1.to_csv(index=False))
    rep.write("table1.md", _table1_md(t1))

    fig3, be = _fig3(t1)
    rep.write("fig3_persist_latency.csv", fig3.to_csv(index=False))
    rep.write("fig3_break_even.csv", be.to_csv(index=False))
    rep.pivot_md("fig3_persist_latency", fig3, "persist_ns", "model", "achievable_ops_per_s")
    latency = "persist latency (ns)"
    rep.lines(
        "fig3_persist_latency",
        fig3,
        "persist_ns",
        "achievable_ops_per_s",
        "model",
        xlabel=latency,
        logx=True,
        logy=True,
    )
    for kind, name, xlabel in (
        ("atomic", "fig4_atomic_persist", "atomic persist size (B)"),
        ("track", "fig5_tracking_granularity", "tracking granularity (B)"),
    ):
        d = figs[figs.figure == kind].drop(columns="figure")
        rep.write(f"{name}.csv", d.to_csv(index=False))
        rep.lines(name, d, "bytes", "critical_path_per_insert", "model", xlabel=xlabel, logx=True)
        rep.pivot_md(name, d, "bytes", "model", "critical_path_per_insert")
    rep.write("PAPER.md", _paper_md(t1, be, figs, scale, inserts))
    # Every analysis run, one row each (Table 1's and Figs 4-5's), like the other reproductions.
    runs = pd.concat([t1.assign(figure="table1"), figs], ignore_index=True)
    # Counts stay integers where one kind of row leaves them empty (pandas' nullable Int64).
    counts = [c for c in ("threads", "critical_path", "persists", "ops", "bytes") if c in runs]
    rep.keep_runs(runs.astype({c: "Int64" for c in counts}))
    rep.write_lines(
        "NOTES.txt",
        [
            "pmsim reproduction of Memory Persistency (Pelley, Chen and Wenisch, ISCA 2014).",
            f"Made by: pmsim reproduce persistency --scale {scale} ({inserts} inserts per queue run; "
            "persist critical paths from pmsim-analysis, docs/design.md section 8).",
            "Files: table1 (normalised insert rate per queue, threads, model), fig3_persist_latency and"
            " fig3_break_even, fig4_atomic_persist, fig5_tracking_granularity; runs.csv holds every run.",
            "Comparison with the paper's numbers and the causes of differences: PAPER.md.",
        ],
    )


_KEEP = [
    "normalized_rate",
    "critical_path",
    "critical_path_per_op",
    "persists",
    "ops",
    "instr_ops_per_s",
    "persist_bound_ops_per_s",
]


def _fig3(t1: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Achievable rate min(instruction rate, ops / (path × L)) over L; break-even L per model."""
    base = t1[(t1.queue == "cwl") & (t1.threads == 1) & t1.model.isin(["strict", "epoch", "strand"])]
    rows, be = [], []
    for _, r in base.iterrows():
        per = r["critical_path_per_op"]
        instr = r["instr_ops_per_s"]
        for i in range(FIG3_POINTS):
            lat = 10 ** (1 + 4 * i / (FIG3_POINTS - 1))
            bound = math.inf if per == 0 else 1e9 / (per * lat)
            rows.append(
                {
                    "model": r["model"],
                    "persist_ns": round(lat, 3),
                    "achievable_ops_per_s": min(instr, bound),
                    "instr_ops_per_s": instr,
                }
            )
        even = math.inf if per == 0 else 1e9 / (per * instr)
        be.append(
            {
                "model": r["model"],
                "break_even_ns": even,
                "paper_break_even_ns": PAPER_BREAK_EVEN_NS[r["model"]],
            }
        )
    return pd.DataFrame(rows), pd.DataFrame(be)


def _fmt(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if math.isinf(v):
        return "unbounded"
    return f"{v:.3g}" if v < 100 else f"{v:,.0f}"


def _bold(v: float) -> str:
    s = _fmt(v)
    return f"**{s}**" if v >= 1 else s


def _table1_md(t1: pd.DataFrame) -> str:
    rows = []
    for (q, t), paper in PAPER_TABLE1.items():
        cells = []
        for m in MODELS:
            v = t1[(t1.queue == q) & (t1.threads == t) & (t1.model == m)]["normalized_rate"].iloc[0]
            cells.append(f"{_bold(v)} ({_bold(paper[m])})")
        rows.append([q, t, *cells])
    lines = [
        "Table 1: persist-bound insert rate normalised to the instruction rate (500 ns persists);",
        "pmsim (paper). Above 1 (bold): instruction-bound.",
        "",
        *pipe_table(
            ["queue", "threads", *[f"{m}*" if m == "strand" else m for m in MODELS]],
            rows,
            "lr" + "r" * len(MODELS),
        ),
        "",
        "\\* Strand: pmsim's strand critical path stays nearly constant over the run (each insert",
        "starts a strand with no predecessor), so its persist-bound rate grows with the number of",
        "inserts analysed: read these cells as unbounded (instruction-bound at any length), not as",
        "numbers to compare with the paper's (PAPER.md, 'Strand').",
    ]
    return "\n".join(lines) + "\n"


def _paper_md(t1: pd.DataFrame, be: pd.DataFrame, figs: pd.DataFrame, scale: str, inserts: int) -> str:
    def cell(q, t, m, col="normalized_rate"):
        return t1[(t1.queue == q) & (t1.threads == t) & (t1.model == m)][col].iloc[0]

    same_side = sum(
        (cell(q, t, m) >= 1) == (paper[m] >= 1) for (q, t), paper in PAPER_TABLE1.items() for m in MODELS
    )
    ordered = all(
        cell(q, t, "strict") < cell(q, t, "epoch") <= cell(q, t, "racing") <= cell(q, t, "strand")
        for (q, t) in PAPER_TABLE1
    )
    out = [
        "# Memory Persistency (ISCA 2014) reproduced with pmsim",
        "",
        f"Scale `{scale}`: {inserts} inserts per configuration (100 B entries, 8 B atomic persists and",
        "tracking, 500 ns persists unless varied). Critical paths come from `pmsim analyze`",
        "(docs/design.md §8) on the `cwl`/`2lc` workloads; instruction rates from the same traces on the",
        "timing engine under `eadr` (persists free). Regenerate: `pmsim reproduce persistency`.",
        "",
        "## Table 1",
        "",
        _table1_md(t1),
        f"Cells on the same side of 1 as the paper: **{same_side} of 16**. Ordering strict < epoch <=",
        f"racing <= strand in every row: **{'yes' if ordered else 'no'}**.",
        "",
        "Critical path per insert and instruction rate behind each cell:",
        "",
        *pipe_table(
            ["queue", "threads", "model", "path / insert", "instr. inserts/s", "persist-bound inserts/s"],
            (
                [r["queue"], r["threads"], r["model"], f"{r['critical_path_per_op']:.4g}"]
                + [f"{r['instr_ops_per_s']:,.0f}", _fmt(r["persist_bound_ops_per_s"])]
                for _, r in t1.iterrows()
            ),
            "lrlrrr",
        ),
    ]
    ops8 = cell("cwl", 8, "racing", "ops")
    p_ep = cell("cwl", 8, "epoch", "persists") / ops8
    p_ra = cell("cwl", 8, "racing", "persists") / ops8
    joined = p_ep - p_ra  # one head persist per insert under epoch; each join saves one
    per_thread = cell("cwl", 8, "racing", "critical_path") / (ops8 / 8)
    cwl_s, cwl_e = (
        cell("cwl", 1, "strict", "critical_path_per_op"),
        cell("cwl", 1, "epoch", "critical_path_per_op"),
    )
    out += [
        "",
        "Where the numbers differ, and why:",
        "",
        "- **Instruction rate.** The seed measured native inserts/s on a 2.4 GHz Xeon E5645; pmsim's",
        "  is the simulated core (DESIGN §4: in-order issue, blocking loads, caches of ASAP's Table II)",
        "  running the generated insert (MCS lock, 16 B copy stores, head update) under `eadr`, one",
        "  rate per queue and thread count (the racing variant: fewest barriers). Every normalised",
        "  rate scales with 1 / that rate, so cells differ by the ratio of the two machines even where",
        "  the critical paths agree; the side of 1 is what the comparison can rest on.",
        f"- **Strict and epoch paths (CWL, 1 thread: {cwl_s:.3g} and {cwl_e:.3g} per insert).** The",
        "  strict path is one level per copy store plus the head: the 108 B entry (length + 100 B) is",
        "  copied with 16 B stores (an SSE `memcpy`), each two 8 B persists with the same",
        "  predecessors. The seed's trace came from its own compiled `memcpy`; a different store width",
        "  moves strict's path (8 B stores: 15 levels per insert), not the epoch path (2 per insert:",
        "  the entry, then the head).",
        "- **Racing epochs, 8 threads (CWL).** Without barriers around the lock, an insert's head",
        "  persist may join the previous head (another thread's) when nothing else at that level",
        f"  precedes it. Measured: {joined:.0%} of heads join (persists per insert {p_ep:.3g} under",
        f"  epoch, {p_ra:.3g} racing); the rest follow the previous head, so the path is",
        f"  {per_thread:.3g} levels per insert of one thread, against 2 (entry, head) if every head",
        "  joined. A head is refused when another persist at the previous head's level also precedes",
        "  it (DESIGN §8's rule). The seed's 8x gain over epoch (0.40 to 3.2) suggests nearly every",
        "  head joined in its native interleaving (MCS hand-offs under real contention); pmsim runs",
        "  one locked insert at a time in a seeded order, so which persists share a level differs.",
        "- **Strand.** pmsim's strand path is nearly constant over the whole run: each insert's",
        "  entry starts a strand with no predecessor, and every head persist may join the previous",
        "  one (DESIGN §8 coalescing: nothing else is at its level), so the persist-bound rate grows",
        "  with the run's length. The seed reports bounded values (12 to 29), which suggests its tracer",
        "  coalesced less (it does not say how often a head persist could join); both are far above",
        "  1, the paper's point.",
        "- **2LC.** As the seed's Table 1 reports, epoch and racing are the same for 2LC (no",
        "  barriers around its locks in Algorithm 1); pmsim adds one barrier after the copy, needed",
        "  for recovery when an insert completes out of order (see `persistency/queue.rs`), which does",
        "  not change the path (the head persist is after the copy anyway).",
        "",
        "## Fig. 3: persist latency (CWL, 1 thread)",
        "",
        *pipe_table(
            ["model", "break-even latency (pmsim)", "paper"],
            (
                [r["model"], f"{_fmt(r['break_even_ns'])} ns", f"{_fmt(r['paper_break_even_ns'])} ns"]
                for _, r in be.iterrows()
            ),
            "lrr",
        ),
    ]
    out += [
        "",
        "Break-even L = 1 / (path per insert × instruction rate). Strict and epoch fall where the",
        "paper's do to within the instruction-rate ratio; strand's is far later for the reason above.",
        "",
        "## Fig. 4 and Fig. 5: atomic persist size and tracking granularity (CWL, 1 thread)",
        "",
    ]

    def f(kind, m, g):
        d = figs[(figs.figure == kind) & (figs.model == m) & (figs.bytes == g)]
        return d["critical_path_per_insert"].iloc[0]

    sides = [("atomic", "strict"), ("atomic", "epoch"), ("track", "strict"), ("track", "epoch")]
    out += pipe_table(
        ["bytes", "strict vs A", "epoch vs A", "strict vs G", "epoch vs G"],
        ([g, *(f"{f(kind, m, g):.3g}" for kind, m in sides)] for g in GRANULARITIES),
        "rrrrr",
    )
    meet = next(
        (g for g in GRANULARITIES if f("atomic", "strict", g) <= f("atomic", "epoch", g) + 1e-9), None
    )
    out += [
        "",
        "- Paper: strict's path falls as A grows and meets epoch's at 256 B; epoch's is unchanged.",
        f"  pmsim: strict meets epoch at A = {meet} B; epoch unchanged. The entry plus its length",
        "  (108 B) fills one 128 B slot (64 B padding), so at A = 128 the whole copy joins one",
        "  persist; the seed's meeting at 256 B suggests its entries were not aligned to 128 B.",
        "- Paper: false sharing leaves strict unchanged and raises epoch toward strict as G grows.",
        f"  pmsim: strict stays at {f('track', 'strict', 8):.3g}; epoch rises from "
        f"{f('track', 'epoch', 8):.3g} (G = 8) to {f('track', 'epoch', 256):.3g} (G = 256): the",
        "  16 B copy stores of one entry conflict once they share a tracking block, so they are",
        "  ordered by strong persist atomicity although no barrier separates them.",
        "",
    ]
    return "\n".join(out)
