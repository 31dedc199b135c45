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
from typing import Unpack

import pandas as pd

from pmsim import api
from pmsim.experiments import asap_paper as paper
from pmsim.experiments.persist_bound import asap_table
from pmsim.experiments.reproduction import Reproduction, RunOptions, geomean, label
from pmsim.output import markdown, pipe_table
from pmsim.sweep import jobs_for

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
    # The ASAP paper's dependency rule: wait for the source's current epoch, whatever it holds.
    "dep_epoch=current": {"et_dep_epoch": "current"},
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
# Every figure: file stem -> (title, y label).
FIGURES = {
    "fig2_epochs": ("Fig 2: epochs and cross-thread dependencies per ms (RP)", "per ms"),
    "fig3_flush_stalls": ("Fig 3: PB flushing stalls under HOPS (% of cycles)", "% cycles"),
    "fig8_speedup": ("Fig 8: speedup over the Intel baseline (4 cores, 2 MCs)", "speedup"),
    "fig8_sensitivity": ("Fig 8 geomean speedup: sensitivity", "speedup over baseline"),
    "fig9_pm_writes": ("Fig 9: PM writes normalised to HOPS", "writes / HOPS"),
    "fig10_scaling": (
        "Fig 10: throughput scaling (geomean, vs 1-thread HOPS-RP)",
        "throughput / HOPS-RP at 1 thread",
    ),
    "fig11_pb_occupancy": ("Fig 11: persist buffer occupancy (average)", "entries"),
    "fig12_rt_occupancy": ("Fig 12: recovery table maximum occupancy", "records"),
    "fig13_bandwidth": ("Fig 13: ordered bandwidth (256 B blocks, 2 MCs)", "M blocks / s"),
}


def available() -> tuple[list[str], list[str]]:
    have_d = {d for d, _ in api.designs()}
    have_w = {w["name"] for w in api.workloads()}
    designs = [d for d in PAPER_DESIGNS if d in have_d]
    workloads = [w for w in PAPER_WORKLOADS if w in have_w] or ["array"]
    return designs, workloads


def config_overrides(path: str | Path) -> dict[str, str]:
    """A TOML configuration file as run keyword arguments (``section_key=value``).

    The file is first loaded and validated by the core, as ``--config`` of every other command
    (``pmsim config show --config FILE``): the same messages, with FILE:LINE, and the same types
    (``write_ns = "300"`` is refused, not read as 300)."""
    from pmsim import PmsimError, _core

    _core.config_show(str(path), {})
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
    out: str = "results", scale: str = "quick", config: str | None = None, **run: Unpack[RunOptions]
) -> Path:
    """Writes ``OUT/asap/`` (``OUT/asap-STEM/`` under a configuration file); returns it."""
    base = config_overrides(config) if config else {}
    name = "asap" if not config else f"asap-{Path(config).stem}"
    with Reproduction.staged(out, name, SCALES, scale, FIGURES, **run) as rep:
        _reproduce(rep, scale, base, config)
    return rep.where


def _reproduce(rep: Reproduction, scale: str, base: dict[str, str], config: str | None) -> None:
    designs, workloads = available()
    sc = rep.params
    missing = [d for d in PAPER_DESIGNS if d not in designs]
    notes = []
    if config:
        notes.append(f"configuration: {config} ({', '.join(f'{k}={v}' for k, v in base.items())})")
    if missing:
        notes.append(f"designs not available yet, figures using them are partial: {', '.join(missing)}")
    sens_designs = [d for d in SENSITIVITY_DESIGNS if d in designs]
    abl_designs = [d for d in ABLATION_DESIGNS if d in designs]
    jobs = _jobs(designs, workloads, sens_designs, sc)
    if not config:
        jobs += _ablation_jobs(abl_designs, workloads, ABLATION_OPS[scale])
    # A variant's workload parameter (durable_every) is left out where that workload's generator
    # never reads it (echo), which would refuse it; the run is then the default one.
    uses = {w["name"]: {p["name"] for p in w["params"]} for w in api.workloads()}
    workload_params = set().union(*uses.values())
    for j in jobs:
        params = {**base, **j["params"]}
        j["params"] = {
            k: v for k, v in params.items() if k not in workload_params or k in uses[j["workload"]]
        }
    df = rep.keep_runs(rep.run(jobs, "ASAP evaluation"))
    # persist critical-path bound, at the configuration's media write latency
    asap_table(df, rep.outdir, threads=4, ops=sc["ops"], progress=rep.progress, overrides=base)

    main = df[df.experiment == "fig8"].copy()
    # Speedup = throughput over the region of interest (the workload's load phase excluded).
    base_ns = main[main.design == "baseline"].set_index("workload")["roi_time_ns"]
    main["speedup"] = main.apply(lambda r: base_ns[r.workload] / r.roi_time_ns, axis=1)
    table = main.pivot_table(index="workload", columns="design", values="speedup", sort=False)[designs]
    gmean = table.apply(lambda c: geomean(pd.Series(c)))
    table.loc["geomean"] = gmean
    _speedup_figure(rep, "fig8_speedup", table, main, "workload", designs)
    scaling = _scaling(pd.concat([main, df[df.experiment == "fig10"]]), designs)
    if scaling is not None:
        rep.write("fig10_scaling.csv", scaling.round(4).to_csv(index=False))
        wide = scaling.pivot_table(index="threads", columns="design", values="speedup", sort=False)
        wide = wide[[d for d in designs if d in wide.columns]]
        rep.write("fig10_scaling.md", markdown(wide.round(2), "{:.2f}"))
        rep.lines("fig10_scaling", scaling, "threads", "speedup", "design")
    else:
        notes.append("Fig 10 needs hops-rp")
    bw = _bandwidth(df[df.experiment == "fig13"].copy(), base)
    cols = ["design", "threads", "media_write_gbps", "roi_time_ns", "throughput_mops", "write_bandwidth_gbps"]
    rep.write("fig13_bandwidth.csv", bw[[*cols, "vs_hops_rp"]].round(4).to_csv(index=False))
    bw_table = bw.pivot_table(index="bench", columns="design", values="throughput_mops", sort=False)
    rep.write("fig13_bandwidth.md", markdown(bw_table[[d for d in designs if d in bw_table]], "{:.2f}"))
    rep.bars("fig13_bandwidth", bw, "bench", "design", "throughput_mops", order=designs, table=False)
    sens = _sensitivity(main, df[df.experiment == "sensitivity"], sens_designs)
    if sens is not None:
        long = sens.reset_index().melt(id_vars="variant", var_name="design", value_name="speedup")
        _speedup_figure(rep, "fig8_sensitivity", sens, long, "variant", sens_designs)
    _optional_figures(rep, main, designs, notes)
    abl = _ablation(df[df.experiment == "ablation"], abl_designs) if not config else None
    if abl is not None:
        rep.write("ablation.csv", abl.round(3).to_csv())
        rep.write("ablation.md", _ablation_markdown(abl))
    rep.write(
        "PAPER.md", paper.render(main=main, scaling=scaling, bw=bw, ablation=abl, scale=scale, config=config)
    )
    rep.write_lines("NOTES.txt", _notes(scale, sc, designs, workloads, notes, config))
    rep.say(f"Fig 8 — speedup over baseline ({scale} scale, {sc['ops']} ops/thread, 4 threads):")
    rep.say(table.round(2).to_string())
    rep.say("Fig 13 — ordered bandwidth (M blocks/s):")
    rep.say(bw_table[designs].round(2).to_string())
    if scaling is not None:
        rep.say("Fig 10 — throughput vs 1-thread HOPS-RP (geomean over workloads):")
        rep.say(wide.round(2).to_string())
    if sens is not None:
        rep.say("Geomean speedup over baseline, sensitivity:")
        rep.say(sens.round(2).to_string())
    if abl is not None:
        rep.say("Ablation: geomean speedup over baseline, defaults -> artifact switches:")
        rep.say(abl.drop(columns=["switches"]).round(2).to_string())
    for n in notes:
        rep.say(f"note: {n}")
    rep.say(f"results in {rep.where}/")


def _jobs(designs: list[str], workloads: list[str], sens_designs: list[str], sc: dict) -> list[dict]:
    """Figs 8, 10 and 13 and the sensitivity variants, each run labelled by what it feeds."""
    ops, bw_ops = sc["ops"], sc["bw_ops"]
    jobs = label(jobs_for(designs, workloads, threads=4, ops=ops), experiment="fig8", variant="default")
    # Fig 10 reuses Fig 8's 4-thread runs; the core count follows the thread count.
    more = {"threads": [t for t in FIG10_THREADS if t != 4]}
    jobs += label(jobs_for(designs, workloads, more, ops=ops), experiment="fig10", variant="default")
    # Fig 13 at 1 and 4 threads, and the same single thread with media write bandwidth that no
    # design saturates: what eager flushing gains when only the flush round trips limit it.
    for grid, fixed in [
        ({"threads": BW_THREADS}, {"ops": bw_ops}),
        ({"pm_write_gbps": [FAST_MEDIA_GBPS]}, {"threads": 1, "ops": bw_ops}),
    ]:
        bw = jobs_for(designs, ["bandwidth"], grid, **fixed)
        jobs += label(bw, experiment="fig13", variant="default")
    for variant, params in SENSITIVITY.items():
        sens = jobs_for(sens_designs, workloads, threads=4, ops=ops, **params)
        jobs += label(sens, experiment="sensitivity", variant=variant)
    return jobs


def _speedup_figure(
    rep: Reproduction, name: str, table: pd.DataFrame, runs: pd.DataFrame, index: str, designs: list[str]
) -> None:
    """A speedup figure: ``table`` as NAME.csv (3 decimals) and NAME.md (2 decimals), and the
    bars of ``runs``' speedups, one group per ``index`` value."""
    rep.write(f"{name}.csv", table.round(3).to_csv())
    rep.write(f"{name}.md", markdown(table.round(2), "{:.2f}"))
    rep.bars(name, runs, index, "design", "speedup", order=designs, hline=1.0, table=False)


def _bandwidth(bw: pd.DataFrame, overrides: dict[str, str]) -> pd.DataFrame:
    """Fig 13's runs with their bench label, throughput (M blocks/s) and ratio to HOPS-RP;
    a run without its own media bandwidth ran at the configuration's (``overrides``)."""
    bw["media_write_gbps"] = bw["pm_write_gbps"].fillna(api.config(**overrides)["pm"]["write_gbps"])
    bw["bench"] = [
        f"{t} thread{'s' if t > 1 else ''}, {g:g} GB/s/MC media"
        for t, g in zip(bw.threads, bw.media_write_gbps, strict=True)
    ]
    bw["throughput_mops"] = bw["ops_per_sec"] / 1e6
    hops = bw[bw.design == "hops-rp"].set_index("bench")["throughput_mops"]
    bw["vs_hops_rp"] = bw.throughput_mops / bw.bench.map(hops)
    return bw


def _notes(
    scale: str, sc: dict, designs: list[str], workloads: list[str], notes: list[str], config: str | None
) -> list[str]:
    """NOTES.txt: what this folder is, how it was made, and what could not be drawn."""
    from pmsim import __version__

    made = f"pmsim reproduce asap --scale {scale}" + (f" --config {config}" if config else "")
    lines = [
        "pmsim reproduction of the ASAP paper's evaluation (HPCA 2022, section VII).",
        f"Made by: {made}  (pmsim {__version__}; {sc['ops']} ops/thread,"
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
    return lines


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
        jobs += label(
            jobs_for(designs, workloads, threads=4, ops=ops, **ov), experiment="ablation", variant=name
        )
    return jobs


def _variant_speedups(runs: pd.DataFrame, variant: str) -> pd.Series:
    """Per design, the geomean over workloads of its speedup over the baseline of ``variant``."""
    g = runs[runs.variant == variant]
    base = g[g.design == "baseline"].set_index("workload")["roi_time_ns"]
    sp = g.assign(speedup=g.workload.map(base) / g.roi_time_ns)
    return sp.groupby("design")["speedup"].apply(geomean)


def _ablation(runs: pd.DataFrame, designs: list[str]) -> pd.DataFrame | None:
    """Geomean speedup over the baseline of the same variant, one row per ablation variant."""
    if runs.empty or "baseline" not in designs:
        return None
    rows = {}
    for name, kind, ov in _ablation_variants():
        row = _variant_speedups(runs, name)
        rows[name] = {"kind": kind, "switches": " ".join(f"{k}={v}" for k, v in ov.items()), **row.to_dict()}
    out = pd.DataFrame(rows).T[["kind", "switches", *designs]]
    out[designs] = out[designs].astype(float)
    out.index.name = "variant"
    return out


def _ablation_markdown(abl: pd.DataFrame) -> str:
    designs = [c for c in abl.columns if c not in ("kind", "switches")]
    rows = ([idx, r.kind, *(f"{r[d]:.2f}" for d in designs)] for idx, r in abl.iterrows())
    lines = pipe_table(["variant", "kind", *designs], rows, "ll" + "r" * len(designs))
    legend = ["", "Geomean speedup over the baseline of the same variant (Fig 8 workloads, 4 threads).", ""]
    legend.append("Switches (pmsim parameter = the artifact's value):")
    legend.append("")
    for name, ov in [*ARTIFACT_SWITCHES, FEW_DFENCES]:
        legend.append(f"- {name}: " + ", ".join(f"`{k}={v}`" for k, v in ov.items()))
    return "\n".join(lines + legend) + "\n"


def _scaling(runs: pd.DataFrame, designs: list[str]) -> pd.DataFrame | None:
    """Fig 10: per workload, throughput (operations per simulated second) over HOPS-RP's at one
    thread; geomean over workloads per design and thread count."""
    if "hops-rp" not in designs:
        return None
    ref = runs[(runs.design == "hops-rp") & (runs.threads == 1)].set_index("workload")["ops_per_sec"]
    r = runs.assign(speedup=runs.ops_per_sec / runs.workload.map(ref))
    out = r.groupby(["design", "threads"])["speedup"].apply(geomean).reset_index()
    out["design"] = pd.Categorical(out.design, categories=designs, ordered=True)
    out = out.sort_values(["design", "threads"])
    out["design"] = out.design.astype(str)
    return out[["design", "threads", "speedup"]].reset_index(drop=True)


def _sensitivity(main: pd.DataFrame, extra: pd.DataFrame, designs: list[str]) -> pd.DataFrame | None:
    """Geomean speedup over the baseline of the same variant, one row per variant."""
    if "baseline" not in designs or extra.empty:
        return None
    runs = pd.concat([main[main.design.isin(designs)], extra])
    rows = {variant: _variant_speedups(runs, variant) for variant in ["default", *SENSITIVITY]}
    out = pd.DataFrame(rows).T[designs]
    out.index.name = "variant"
    return out


def _optional_figures(rep: Reproduction, df: pd.DataFrame, designs: list[str], notes: list[str]) -> None:
    """Figs 2, 3, 9, 11 and 12, each drawn when the designs and statistics it needs are there
    (a note in NOTES.txt otherwise)."""

    def have(col: str, design: str) -> bool:
        return col in df and not df[df.design == design][col].isna().all()

    def drawn(ok: bool, missing: str) -> bool:
        if not ok:
            notes.append(missing)
        return ok

    if drawn(have("ds_epochs_per_ms", "asap-rp"), "Fig 2 needs asap-rp (epoch statistics)"):
        value_vars = ["ds_epochs_per_ms", "ds_cross_thread_deps_per_ms"]
        d = df[df.design == "asap-rp"].melt("workload", value_vars, var_name="metric", value_name="per_ms")
        rep.bars("fig2_epochs", d, "workload", "metric", "per_ms", log=True)
    if drawn(have("ds_flush_stall_pct", "hops-rp"), "Fig 3 needs hops-rp"):
        rep.bars(
            "fig3_flush_stalls", df[df.design.isin(["hops-rp"])], "workload", "design", "ds_flush_stall_pct"
        )
    if drawn("hops-rp" in designs and "asap-rp" in designs, "Fig 9 needs hops-rp and asap-rp"):
        h = df[df.design == "hops-rp"].set_index("workload")["pm_writes"]
        d = df[df.design.isin(["hops-rp", "asap-rp"])].copy()
        d["writes_norm"] = d.apply(lambda r: r.pm_writes / max(h[r.workload], 1), axis=1)
        rep.bars("fig9_pm_writes", d, "workload", "design", "writes_norm", hline=1.0)
    if drawn(have("ds_pb_occupancy_avg", "asap-rp"), "Fig 11 needs PB designs"):
        d = df[df.design.isin(["hops-rp", "asap-rp"])]
        rep.bars("fig11_pb_occupancy", d, "workload", "design", "ds_pb_occupancy_avg")
    if drawn(have("ds_rt_occupancy_max", "asap-rp"), "Fig 12 needs asap-rp"):
        rep.bars(
            "fig12_rt_occupancy", df[df.design == "asap-rp"], "workload", "design", "ds_rt_occupancy_max"
        )
