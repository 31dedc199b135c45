"""Reproduction of the ASAP paper's evaluation (HPCA 2022, §VII) as tables and PNG plots.

Figures: 8 (speedup over the Intel baseline, 4 cores, 2 MCs), 2 (epochs and cross-thread
dependencies per ms), 3 (persist-buffer flushing stalls under HOPS), 9 (PM writes normalised to
HOPS), 10 (thread scaling: throughput at 1/2/4/8 threads normalised to 1-thread HOPS-RP), 11 (PB
occupancy), 12 (recovery-table maximum occupancy), 13 (ordered-bandwidth microbenchmark, 1 and 4
threads). Beyond the paper, the sensitivity of Fig 8's geomeans to the
two things that decide how much persist latency ASAP can hide: a durability fence after every
K-th operation instead of every one (``durable_every``), and an on-DIMM buffer that makes the
undo records' PM reads cheap (``pm.xpbuffer_lines``, the paper's argument in §V-A). A figure
whose designs are not available yet is skipped with a note. Every number comes from a simulation
run here; nothing is tuned per workload.

The distance to the paper: ``ablation.csv/.md`` gives the geomean speedups from pmsim's defaults to
the ASAP artifact's simplifications (``ARTIFACT_SWITCHES``, the same as
``configs/asap-artifact.toml``), one switch at a time, cumulative and alone, plus the durability
fence frequency; ``PAPER.md`` puts every number the paper states beside pmsim's. ``config=FILE``
runs the whole evaluation under a configuration file (into ``asap-<file stem>/``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pandas as pd

from pmsim import api, plots
from pmsim.cli import write_atomic
from pmsim.experiments import asap_paper as paper
from pmsim.experiments.persist_bound import asap_table
from pmsim.sweep import jobs_for, run_jobs, write_table

PAPER_DESIGNS = ["baseline", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "bbb", "eadr"]
PAPER_WORKLOADS = [
    "nstore",
    "echo",
    "vacation",
    "memcached",
    "atlas-heap",
    "atlas-queue",
    "atlas-skiplist",
    "cceh",
    "fastfair",
    "dash-eh",
    "dash-lh",
    "p-art",
    "p-clht",
    "p-masstree",
]
SCALES = {"quick": {"ops": 400, "bw_ops": 2000}, "full": {"ops": 4000, "bw_ops": 20000}}
SENSITIVITY = {
    "durable_every=4": {"durable_every": 4},
    "durable_every=16": {"durable_every": 16},
    "xpbuffer_lines=256": {"pm_xpbuffer_lines": 256},
    "xpbuffer_lines=256, durable_every=16": {"pm_xpbuffer_lines": 256, "durable_every": 16},
}
SENSITIVITY_DESIGNS = ["baseline", "hops-rp", "asap-rp", "eadr"]
BW_THREADS = [1, 4]
FIG10_THREADS = [1, 2, 4, 8]
FAST_MEDIA_GBPS = 10.0
# The artifact's simplifications as pmsim switches, in the order the ablation adds them
# (configs/asap-artifact.toml sets the same values).
ARTIFACT_SWITCHES = [
    ("undo records free", {"rt_undo_reads_pm": "false"}),
    ("delay records functional", {"rt_delay_through_wpq": "false"}),
    ("ACK at 10 ns", {"noc_ack_ns": 10.0}),
    ("CDR in one cycle", {"noc_cdr_ns": 0.5}),
    ("line flushes overlap", {"pb_line_flushes_overlap": "true"}),
    ("baseline flushes with clflush", {"baseline_flush": "clflush"}),
]
# Not a machine switch: how many operations share one durability fence (workload parameter).
FEW_DFENCES = ("durable_every=16", {"durable_every": 16})
ABLATION_DESIGNS = ["baseline", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "eadr"]
ABLATION_OPS = {"quick": 200, "full": 4000}


def available() -> tuple[list[str], list[str]]:
    have_d = {d for d, _ in api.designs()}
    have_w = {w["name"] for w in api.workloads()}
    designs = [d for d in PAPER_DESIGNS if d in have_d]
    workloads = [w for w in PAPER_WORKLOADS if w in have_w] or ["array"]
    return designs, workloads


def config_overrides(path: str | Path) -> dict[str, str]:
    """A TOML configuration file as run keyword arguments (``section_key=value``)."""
    from pmsim import PmsimError

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise PmsimError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise PmsimError(f"{path}: {e}") from None
    out = {}
    for section, table in doc.items():
        if not isinstance(table, dict):
            raise PmsimError(f"{path}: '{section}' is not a [section]")
        for key, v in table.items():
            out[f"{section}_{key}"] = str(v).lower() if isinstance(v, bool) else str(v)
    api.config(**out)  # rejects unknown names and bad values, naming the parameter
    return out


def reproduce(
    out: str = "results",
    scale: str = "quick",
    workers: int | None = None,
    progress: bool = True,
    cache: bool = True,
    config: str | None = None,
) -> Path:
    base = config_overrides(config) if config else {}
    outdir = Path(out) / ("asap" if not config else f"asap-{Path(config).stem}")
    outdir.mkdir(parents=True, exist_ok=True)
    designs, workloads = available()
    sc = SCALES[scale]
    missing = [d for d in PAPER_DESIGNS if d not in designs]
    notes = []
    if config:
        notes.append(f"configuration: {config} ({', '.join(f'{k}={v}' for k, v in base.items())})")
    if missing:
        notes.append(f"designs not available yet, figures using them are partial: {', '.join(missing)}")
    jobs = _tagged("fig8", jobs_for(designs, workloads, threads=4, ops=sc["ops"]))
    # Fig 10 reuses Fig 8's 4-thread runs; the core count follows the thread count.
    more = [t for t in FIG10_THREADS if t != 4]
    jobs += _tagged("fig10", jobs_for(designs, workloads, {"threads": more}, ops=sc["ops"]))
    jobs += _tagged("fig13", jobs_for(designs, ["bandwidth"], {"threads": BW_THREADS}, ops=sc["bw_ops"]))
    # The same single thread with media write bandwidth that no design saturates: what eager
    # flushing gains when only the flush round trips limit it.
    jobs += _tagged(
        "fig13",
        jobs_for(designs, ["bandwidth"], {"pm_write_gbps": [FAST_MEDIA_GBPS]}, threads=1, ops=sc["bw_ops"]),
    )
    sens_designs = [d for d in SENSITIVITY_DESIGNS if d in designs]
    for variant, params in SENSITIVITY.items():
        jobs += _tagged(
            "sensitivity", jobs_for(sens_designs, workloads, threads=4, ops=sc["ops"], **params), variant
        )
    abl_designs = [d for d in ABLATION_DESIGNS if d in designs]
    if not config:
        jobs += _ablation_jobs(abl_designs, workloads, ABLATION_OPS[scale])
    for j in jobs:
        j["params"] = {**base, **j["params"]}
    df = run_jobs(jobs, workers=workers, progress=progress, desc="ASAP evaluation", cache=cache)
    write_atomic(outdir / "runs.csv", df.to_csv(index=False))
    write_table(df, str(outdir / "runs.parquet"))
    asap_table(df, outdir, threads=4, ops=sc["ops"], progress=progress)  # persist critical-path bound

    main = df[df.experiment == "fig8"].copy()
    base = main[main.design == "baseline"].set_index("workload")["sim_time_ns"]
    main["speedup"] = main.apply(lambda r: base[r.workload] / r.sim_time_ns, axis=1)
    table = main.pivot_table(index="workload", columns="design", values="speedup", sort=False)[designs]
    gmean = table.apply(lambda c: _geomean(pd.Series(c)))
    table.loc["geomean"] = gmean
    write_atomic(outdir / "fig8_speedup.csv", table.round(3).to_csv())
    write_atomic(
        outdir / "fig8_speedup.md",
        _markdown(table.round(2)),
    )
    plots.grouped_bars(
        main,
        index="workload",
        columns="design",
        values="speedup",
        order=designs,
        hline=1.0,
        title="Fig 8: speedup over the Intel baseline (4 cores, 2 MCs)",
        ylabel="speedup",
        path=outdir / "fig8_speedup.png",
        table=False,
    )
    scaling = _scaling(pd.concat([main, df[df.experiment == "fig10"]]), designs)
    if scaling is not None:
        write_atomic(outdir / "fig10_scaling.csv", scaling.round(4).to_csv(index=False))
        wide = scaling.pivot_table(index="threads", columns="design", values="speedup", sort=False)
        wide = wide[[d for d in designs if d in wide.columns]]
        write_atomic(outdir / "fig10_scaling.md", _markdown(wide.round(2)))
        plots.lines(
            scaling,
            x="threads",
            y="speedup",
            hue="design",
            title="Fig 10: throughput scaling (geomean, vs 1-thread HOPS-RP)",
            ylabel="throughput / HOPS-RP at 1 thread",
            path=outdir / "fig10_scaling.png",
        )
    else:
        notes.append("Fig 10 needs hops-rp")
    bw = df[df.experiment == "fig13"].copy()
    bw["media_write_gbps"] = bw["pm_write_gbps"].fillna(api.config()["pm"]["write_gbps"])
    bw["bench"] = [
        f"{t} thread{'s' if t > 1 else ''}, {g:g} GB/s/MC media"
        for t, g in zip(bw.threads, bw.media_write_gbps, strict=True)
    ]
    bw["throughput_mops"] = bw["ops_per_sec"] / 1e6
    hops = bw[bw.design == "hops-rp"].set_index("bench")["throughput_mops"]
    bw["vs_hops_rp"] = bw.throughput_mops / bw.bench.map(hops)
    cols = ["design", "threads", "media_write_gbps", "sim_time_ns", "throughput_mops", "write_bandwidth_gbps"]
    write_atomic(outdir / "fig13_bandwidth.csv", bw[[*cols, "vs_hops_rp"]].round(4).to_csv(index=False))
    bw_table = bw.pivot_table(index="bench", columns="design", values="throughput_mops", sort=False)
    write_atomic(outdir / "fig13_bandwidth.md", _markdown(bw_table[[d for d in designs if d in bw_table]]))
    plots.grouped_bars(
        bw,
        index="bench",
        columns="design",
        values="throughput_mops",
        order=designs,
        title="Fig 13: ordered bandwidth (256 B blocks, 2 MCs)",
        ylabel="M blocks / s",
        path=outdir / "fig13_bandwidth.png",
        table=False,
    )
    sens = _sensitivity(main, df[df.experiment == "sensitivity"], sens_designs)
    if sens is not None:
        write_atomic(outdir / "fig8_sensitivity.csv", sens.round(3).to_csv())
        write_atomic(outdir / "fig8_sensitivity.md", _markdown(sens.round(2)))
        plots.grouped_bars(
            sens.reset_index().melt(id_vars="variant", var_name="design", value_name="geomean"),
            index="variant",
            columns="design",
            values="geomean",
            order=sens_designs,
            hline=1.0,
            title="Fig 8 geomean speedup: sensitivity",
            ylabel="speedup over baseline",
            path=outdir / "fig8_sensitivity.png",
            table=False,
        )
    _optional_figures(main, designs, outdir, notes)
    abl = _ablation(df[df.experiment == "ablation"], abl_designs) if not config else None
    if abl is not None:
        write_atomic(outdir / "ablation.csv", abl.round(3).to_csv())
        write_atomic(outdir / "ablation.md", _ablation_markdown(abl))
    write_atomic(
        outdir / "PAPER.md",
        paper.render(main=main, scaling=scaling, bw=bw, ablation=abl, scale=scale, config=config),
    )
    write_atomic(outdir / "NOTES.txt", _notes_text(scale, sc, designs, workloads, notes))
    print(f"Fig 8 — speedup over baseline ({scale} scale, {sc['ops']} ops/thread, 4 threads):")
    print(table.round(2).to_string())
    print("Fig 13 — ordered bandwidth (M blocks/s):")
    print(
        bw.pivot_table(index="bench", columns="design", values="throughput_mops", sort=False)[designs]
        .round(2)
        .to_string()
    )
    if scaling is not None:
        print("Fig 10 — throughput vs 1-thread HOPS-RP (geomean over workloads):")
        print(wide.round(2).to_string())
    if sens is not None:
        print("Geomean speedup over baseline, sensitivity:")
        print(sens.round(2).to_string())
    if abl is not None:
        print("Ablation: geomean speedup over baseline, defaults -> artifact switches:")
        print(abl.drop(columns=["switches"]).round(2).to_string())
    for n in notes:
        print("note:", n)
    print(f"results in {outdir}/")
    return outdir


def _notes_text(scale: str, sc: dict, designs: list[str], workloads: list[str], notes: list[str]) -> str:
    """NOTES.txt: what this folder is, how it was made, and what could not be drawn."""
    from pmsim import __version__

    lines = [
        "pmsim reproduction of the ASAP paper's evaluation (HPCA 2022, section VII).",
        f"Made by: pmsim reproduce asap --scale {scale}  (pmsim {__version__}; {sc['ops']} ops/thread,"
        f" {sc['bw_ops']} for the bandwidth microbenchmark).",
        f"Designs: {', '.join(designs)}.",
        f"Workloads: {', '.join(workloads)}.",
        "Files: figN_*.png plots, each with the table it plots as figN_*.csv and figN_*.md;"
        " runs.csv / runs.parquet hold every run (one row per run, every statistic).",
        "Comparison with the paper's numbers and the measured causes of differences: docs/asap-results.md.",
        "",
    ]
    if notes:
        lines.append("Notes on this reproduction:")
        lines += [f"- {n}" for n in notes]
    else:
        lines.append("Notes on this reproduction: none; every figure was drawn.")
    return "\n".join(lines) + "\n"


def _ablation_variants() -> list[tuple[str, str, dict]]:
    """(row name, kind, overrides): defaults, each switch added cumulatively, each alone, and the
    durability-fence frequency alone and on top of every switch."""
    rows = [("default", "default", {})]
    acc: dict = {}
    for i, (name, ov) in enumerate(ARTIFACT_SWITCHES):
        acc = {**acc, **ov}
        rows.append((("" if i == 0 else "+ ") + name, "cumulative", dict(acc)))
    for name, ov in ARTIFACT_SWITCHES[1:]:
        rows.append((f"only {name}", "alone", dict(ov)))
    rows.append((f"only {FEW_DFENCES[0]}", "alone", dict(FEW_DFENCES[1])))
    rows.append((f"+ {FEW_DFENCES[0]}", "cumulative", {**acc, **FEW_DFENCES[1]}))
    return rows


def _ablation_jobs(designs: list[str], workloads: list[str], ops: int) -> list[dict]:
    jobs = []
    for name, _, ov in _ablation_variants():
        jobs += _tagged("ablation", jobs_for(designs, workloads, threads=4, ops=ops, **ov), name)
    return jobs


def _ablation(runs: pd.DataFrame, designs: list[str]) -> pd.DataFrame | None:
    """Geomean speedup over the baseline of the same variant, one row per ablation variant."""
    if runs.empty or "baseline" not in designs:
        return None
    rows = {}
    for name, kind, ov in _ablation_variants():
        g = runs[runs.variant == name]
        base = g[g.design == "baseline"].set_index("workload")["sim_time_ns"]
        sp = g.assign(speedup=g.workload.map(base) / g.sim_time_ns)
        row = sp.groupby("design")["speedup"].apply(_geomean)
        rows[name] = {"kind": kind, "switches": " ".join(f"{k}={v}" for k, v in ov.items()), **row.to_dict()}
    out = pd.DataFrame(rows).T[["kind", "switches", *designs]]
    out[designs] = out[designs].astype(float)
    out.index.name = "variant"
    return out


def _ablation_markdown(abl: pd.DataFrame) -> str:
    designs = [c for c in abl.columns if c not in ("kind", "switches")]
    lines = ["| variant | kind | " + " | ".join(designs) + " |", "|---|---|" + "---:|" * len(designs)]
    for idx, r in abl.iterrows():
        lines.append(f"| {idx} | {r.kind} | " + " | ".join(f"{r[d]:.2f}" for d in designs) + " |")
    legend = ["", "Geomean speedup over the baseline of the same variant (Fig 8 workloads, 4 threads).", ""]
    legend.append("Switches (pmsim parameter = the artifact's value):")
    legend.append("")
    for name, ov in [*ARTIFACT_SWITCHES, FEW_DFENCES]:
        legend.append(f"- {name}: " + ", ".join(f"`{k}={v}`" for k, v in ov.items()))
    return "\n".join(lines + legend) + "\n"


def _tagged(experiment: str, jobs: list[dict], variant: str = "default") -> list[dict]:
    for j in jobs:
        j["label"] = {**j["label"], "experiment": experiment, "variant": variant}
    return jobs


def _geomean(c: pd.Series) -> float:
    return float(c.prod() ** (1.0 / len(c)))


def _scaling(runs: pd.DataFrame, designs: list[str]) -> pd.DataFrame | None:
    """Fig 10: per workload, throughput (operations per simulated second) over HOPS-RP's at one
    thread; geomean over workloads per design and thread count."""
    if "hops-rp" not in designs:
        return None
    ref = runs[(runs.design == "hops-rp") & (runs.threads == 1)].set_index("workload")["ops_per_sec"]
    r = runs.assign(speedup=runs.ops_per_sec / runs.workload.map(ref))
    out = r.groupby(["design", "threads"])["speedup"].apply(_geomean).reset_index()
    out["design"] = pd.Categorical(out.design, categories=designs, ordered=True)
    out = out.sort_values(["design", "threads"])
    out["design"] = out.design.astype(str)
    return out[["design", "threads", "speedup"]].reset_index(drop=True)


def _sensitivity(main: pd.DataFrame, extra: pd.DataFrame, designs: list[str]) -> pd.DataFrame | None:
    """Geomean speedup over the baseline of the same variant, one row per variant."""
    if "baseline" not in designs or extra.empty:
        return None
    runs = pd.concat([main[main.design.isin(designs)], extra])
    rows = {}
    for variant in ["default", *SENSITIVITY]:
        g = runs[runs.variant == variant]
        base = g[g.design == "baseline"].set_index("workload")["sim_time_ns"]
        sp = g.assign(speedup=g.workload.map(base) / g.sim_time_ns)
        rows[variant] = sp.groupby("design")["speedup"].apply(_geomean)
    out = pd.DataFrame(rows).T[designs]
    out.index.name = "variant"
    return out


def _markdown(table: pd.DataFrame) -> str:
    """A pipe table (pandas' to_markdown needs the optional tabulate package)."""
    head = [table.index.name or "", *map(str, table.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|"]
    for idx, row in table.iterrows():
        lines.append("| " + " | ".join([str(idx), *(f"{v:.2f}" for v in row)]) + " |")
    return "\n".join(lines) + "\n"


def _optional_figures(df: pd.DataFrame, designs: list[str], outdir: Path, notes: list[str]) -> None:
    def have(col: str, design: str) -> bool:
        return col in df and not df[df.design == design][col].isna().all()

    if have("ds_epochs_per_ms", "asap-rp"):
        d = df[df.design == "asap-rp"].melt(
            id_vars="workload",
            value_vars=["ds_epochs_per_ms", "ds_cross_thread_deps_per_ms"],
            var_name="metric",
            value_name="per_ms",
        )
        plots.grouped_bars(
            d,
            index="workload",
            columns="metric",
            values="per_ms",
            log=True,
            title="Fig 2: epochs and cross-thread dependencies per ms (RP)",
            ylabel="per ms",
            path=outdir / "fig2_epochs.png",
        )
    else:
        notes.append("Fig 2 needs asap-rp (epoch statistics)")
    if have("ds_flush_stall_pct", "hops-rp"):
        plots.grouped_bars(
            df[df.design.isin(["hops-rp"])],
            index="workload",
            columns="design",
            values="ds_flush_stall_pct",
            title="Fig 3: PB flushing stalls under HOPS (% of cycles)",
            ylabel="% cycles",
            path=outdir / "fig3_flush_stalls.png",
        )
    else:
        notes.append("Fig 3 needs hops-rp")
    if "hops-rp" in designs and "asap-rp" in designs:
        h = df[df.design == "hops-rp"].set_index("workload")["pm_writes"]
        d = df[df.design.isin(["hops-rp", "asap-rp"])].copy()
        d["writes_norm"] = d.apply(lambda r: r.pm_writes / max(h[r.workload], 1), axis=1)
        plots.grouped_bars(
            d,
            index="workload",
            columns="design",
            values="writes_norm",
            hline=1.0,
            title="Fig 9: PM writes normalised to HOPS",
            ylabel="writes / HOPS",
            path=outdir / "fig9_pm_writes.png",
        )
    else:
        notes.append("Fig 9 needs hops-rp and asap-rp")
    if have("ds_pb_occupancy_avg", "asap-rp"):
        d = df[df.design.isin(["hops-rp", "asap-rp"])]
        plots.grouped_bars(
            d,
            index="workload",
            columns="design",
            values="ds_pb_occupancy_avg",
            title="Fig 11: persist buffer occupancy (average)",
            ylabel="entries",
            path=outdir / "fig11_pb_occupancy.png",
        )
    else:
        notes.append("Fig 11 needs PB designs")
    if have("ds_rt_occupancy_max", "asap-rp"):
        plots.grouped_bars(
            df[df.design == "asap-rp"],
            index="workload",
            columns="design",
            values="ds_rt_occupancy_max",
            title="Fig 12: recovery table maximum occupancy",
            ylabel="records",
            path=outdir / "fig12_rt_occupancy.png",
        )
    else:
        notes.append("Fig 12 needs asap-rp")
