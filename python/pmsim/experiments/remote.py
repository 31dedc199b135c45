"""Remote persistence over RDMA: the BROI paper's Fig 12 (ASPLOS-style seed, §VII-B).

Clients of the Whisper set (``rdma-tpcc``, ``rdma-ycsb``, ``rdma-ctree``, ``rdma-hashmap``,
``rdma-memcached``; 4 clients each) replicate every persist of their logging engine to an NVM
server with ``rdma_pwrite``, under two strategies (``net.strategy``): ``sync`` (each barrier
region waits for its persist ACK) and ``bsp`` (buffered strict persistence: regions stream in
order, the client waits only at commit). Outputs, under ``OUT/broi/``:

- ``fig12_remote.csv`` (``benchmark,strategy,ops_per_s``) and ``fig12_remote.png``;
- ``fig12_remote.md``: BSP over sync per benchmark, regions per operation, and the share of a
  sync region's latency spent on the network round trip (the paper: > 90%);
- ``fig12_latency_sweep.csv`` / ``.md`` / ``.png``: BSP over sync as the one-way link latency grows from 1
  to 20 µs — where BSP's advantage comes from (round trips it no longer waits for);
- ``fig12_cpu_sweep.csv`` / ``.md`` / ``.png``: BSP over sync as the clients' CPU work per operation is
  scaled (×¼ to ×16 of each benchmark's default ``compute``) — what decides how much of the
  saved round-trip time shows in throughput;
- ``fig12_epoch_sweep.csv`` / ``.md`` / ``.png``: BSP over sync as the logging library's work per persist
  epoch is scaled (×0, ×1, ×4 of each library's default ``epoch_compute``) — whether it changes
  which benchmark gains most;
- ``fig12_channel_sweep.csv`` / ``.md`` / ``.png``: BSP over sync with 1, 2 (the seed's) and 4 RDMA
  channels (remote BROI entries): each channel persists its regions one after another, so
  clients sharing one bound BSP when their regions are many and small;
- ``fig4c_transaction.csv``: the seed's Fig 4(c) example, one transaction of 6 epochs of 512 B
  persisted remotely, its latency under each strategy (the paper: BSP cuts it 4.6×);
- ``runs_fig12.csv`` / ``.parquet``: every run's flattened statistics.

The server is the paper's: the ``broi`` design on the seed's Table III machine (banked NVM,
persistence at the media), so every region's lines enter the remote BROI entries (one per RDMA
channel) that keep regions in order.

Every number comes from a simulation run here with the documented defaults; nothing is tuned per
benchmark (the clients' CPU work per operation and their logging library's work per persist
epoch are workload parameters fixed by one rule each, see ``docs/workloads.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

import pandas as pd

from pmsim import api
from pmsim.experiments.broi import TABLE3
from pmsim.experiments.reproduction import Reproduction, RunOptions, label
from pmsim.output import markdown, write_atomic
from pmsim.sweep import jobs_for

BENCHMARKS = {
    "tpcc": "rdma-tpcc",
    "ycsb": "rdma-ycsb",
    "ctree": "rdma-ctree",
    "hashmap": "rdma-hashmap",
    "memcached": "rdma-memcached",
}
STRATEGIES = ["sync", "bsp"]
CLIENTS = 4
# Operations per client; memcached's writes are 5% of its requests, so it runs more of them to
# see as many transactions replicated.
SCALES = {"quick": {"ops": 300, "memcached_ops": 1200}, "full": {"ops": 3000, "memcached_ops": 12000}}
LATENCIES_US = [1, 2, 5, 10, 20]
CPU_SCALES = [0.25, 1, 4, 16]
# The benchmarks' default client CPU work (workload parameter `compute`, docs/workloads.md).
DEFAULT_COMPUTE = {"tpcc": 4000, "ycsb": 4000, "ctree": 4000, "hashmap": 4000, "memcached": 40000}
# Their logging library's work per persist epoch (`epoch_compute`): N-Store opt-WAL, PMDK (NVML 1.x).
DEFAULT_EPOCH = {"tpcc": 1000, "ycsb": 1000, "ctree": 2000, "hashmap": 2000, "memcached": 2000}
EPOCH_SCALES = [0, 1, 4]
CHANNELS = [1, 2, 4]
# The NVM server: BROI on the seed's Table III machine.
SERVER = "broi"
PAPER = {"tpcc": 2.5, "ycsb": 2.5, "ctree": 2.0, "hashmap": 2.0, "memcached": 1.15}
# Every figure: file stem -> (title, y label).
FIGURES = {
    "fig12_remote": (f"Fig 12: remote application throughput ({CLIENTS} clients)", "M operations / s"),
    "fig12_latency_sweep": ("BSP over sync vs one-way link latency", "throughput ratio"),
    "fig12_cpu_sweep": ("BSP over sync vs client CPU per operation (x default)", "throughput ratio"),
    "fig12_epoch_sweep": ("BSP over sync vs library work per persist epoch (x default)", "throughput ratio"),
    "fig12_channel_sweep": ("BSP over sync vs RDMA channels (remote BROI entries)", "throughput ratio"),
}
# The sweeps: figure -> (experiment, swept column, what the printed table's columns are).
SWEEPS = {
    "fig12_latency_sweep": ("latency", "link_latency_us", "one-way link latency (µs)"),
    "fig12_cpu_sweep": ("cpu", "cpu_scale", "client CPU per operation (x default)"),
    "fig12_epoch_sweep": ("epoch", "epoch_scale", "the library's work per persist epoch (x default)"),
    "fig12_channel_sweep": ("channels", "net_channels", "RDMA channels (remote BROI entries)"),
}


def _jobs(
    sc: dict, experiment: str, grid: dict, cpu_scale: float | None = None, epoch_scale: float | None = None
) -> list[dict]:
    jobs = []
    for bench, wl in BENCHMARKS.items():
        ops = sc["memcached_ops"] if bench == "memcached" else sc["ops"]
        extra = {} if cpu_scale is None else {"compute": int(DEFAULT_COMPUTE[bench] * cpu_scale)}
        scaled = {} if cpu_scale is None else {"cpu_scale": cpu_scale}
        if epoch_scale is not None:
            extra["epoch_compute"] = int(DEFAULT_EPOCH[bench] * epoch_scale)
            scaled["epoch_scale"] = epoch_scale
        wl_jobs = jobs_for([SERVER], [wl], grid, threads=CLIENTS, ops=ops, **TABLE3, **extra)
        jobs += label(wl_jobs, experiment=experiment, benchmark=bench, **scaled)
    return jobs


def fig4c(outdir: Path, epochs: int = 6, size: int = 512) -> pd.DataFrame:
    """One client transaction of `epochs` regions of `size` bytes, then its commit wait."""
    lines = ["# pmsim trace v1", "threads 1", "T0 begin tx"]
    lines += [f"T0 rdma_pwrite 0 {0x1_0000_0000 + i * size:#x} {size}" for i in range(epochs)]
    lines += ["T0 rdma_wait", "T0 end tx"]
    path = outdir / "fig4c_transaction.trace"
    write_atomic(path, "\n".join(lines) + "\n")
    rows = []
    for strategy in STRATEGIES:
        st = api.run(SERVER, trace=str(path), net_strategy=strategy, **TABLE3)
        rows.append({"strategy": strategy, "latency_us": st["op_latency_avg_ns"] / 1000})
    df = pd.DataFrame(rows)
    write_atomic(outdir / "fig4c_transaction.csv", df.round(4).to_csv(index=False))
    return df


def reproduce(out: str = "results", scale: str = "quick", **run: Unpack[RunOptions]) -> Path:
    """Fig 12 of ``pmsim reproduce broi`` (the network half; ``broi.reproduce`` runs it) with its
    link-latency and client-CPU sweeps and Fig 4(c); returns the output directory. Its files
    are added to ``OUT/broi/`` one by one (``broi.reproduce`` writes them into its own staged
    folder with the rest, whole or not at all: :func:`write`)."""
    rep = Reproduction.start(out, "broi", SCALES, scale, FIGURES, **run)
    write(rep)
    return rep.outdir


def write(rep: Reproduction) -> None:
    """Runs Fig 12 and its sweeps and writes their files into ``rep``'s folder."""
    sc = rep.params
    scale = rep.scale
    jobs = _jobs(sc, "fig12", {"net_strategy": STRATEGIES})
    latencies = {"net_link_latency_ns": [1000.0 * u for u in LATENCIES_US]}
    jobs += _jobs(sc, "latency", {"net_strategy": STRATEGIES, **latencies})
    for f in CPU_SCALES:
        jobs += _jobs(sc, "cpu", {"net_strategy": STRATEGIES}, cpu_scale=f)
    for f in EPOCH_SCALES:
        jobs += _jobs(sc, "epoch", {"net_strategy": STRATEGIES}, epoch_scale=f)
    for n in CHANNELS:
        jobs += _jobs(
            sc, "channels", {"net_strategy": STRATEGIES, "net_channels": [n], "broi_remote_entries": [n]}
        )
    df = rep.keep_runs(rep.run(jobs, "BROI Fig 12 (remote)"), "runs_fig12.csv")

    renamed = {"net_strategy": "strategy", "ops_per_sec": "ops_per_s"}
    fig = df[df.experiment == "fig12"].rename(columns=renamed)
    rep.write("fig12_remote.csv", fig[["benchmark", "strategy", "ops_per_s"]].round(1).to_csv(index=False))
    # fig12_remote.csv has the columns; fig12_remote.md the BSP/sync table.
    bars = fig.assign(mops=fig.ops_per_s / 1e6)
    rep.bars("fig12_remote", bars, "benchmark", "strategy", "mops", order=STRATEGIES, table=False)
    summary = _summary(fig)
    rep.write("fig12_remote.md", markdown(summary, "{:.2f}"))

    df["link_latency_us"] = df["net_link_latency_ns"] / 1000
    sweeps = {name: _sweep(rep, name, df[df.experiment == e], x) for name, (e, x, _) in SWEEPS.items()}
    f4 = fig4c(rep.outdir).set_index("strategy")["latency_us"]
    rep.say(
        f"Fig 4(c) — a transaction of 6 epochs of 512 B: sync {f4['sync']:.2f} µs, bsp {f4['bsp']:.2f} µs "
        f"({f4['sync'] / f4['bsp']:.2f}x; the paper: 4.6x)"
    )
    rep.say(f"Fig 12 — BSP over sync ({scale} scale, {CLIENTS} clients):")
    rep.say(summary.round(3).to_string())
    for name, (_, x, what) in SWEEPS.items():
        rep.say(f"BSP over sync vs {what}:")
        rep.say(
            sweeps[name]
            .pivot_table(index="benchmark", columns=x, values="bsp_over_sync", sort=False)
            .round(2)
        )
    rep.say(f"results in {rep.where}/")


def _summary(fig: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark: BSP over sync, the paper's, regions per operation, region latencies."""
    ops = fig.pivot_table(index="benchmark", columns="strategy", values="ops_per_s", sort=False)
    by = fig.set_index(["benchmark", "strategy"])
    sync, bsp = by.xs("sync", level="strategy"), by.xs("bsp", level="strategy")
    summary = pd.DataFrame(
        {
            "bsp_over_sync": ops["bsp"] / ops["sync"],
            "paper": pd.Series(PAPER),
            "regions_per_op": sync.eval("net_regions / operations"),
            "sync_region_us": sync["net_region_latency_avg_ns"] / 1000,
            "sync_round_trip_share": sync["net_round_trip_share"],
            "bsp_region_us": bsp["net_region_latency_avg_ns"] / 1000,
        }
    )
    summary.index.name = "benchmark"
    return summary


def _sweep(rep: Reproduction, name: str, runs: pd.DataFrame, x: str) -> pd.DataFrame:
    """BSP over sync per benchmark over the swept ``x``: NAME.csv and NAME.png."""
    piv = runs.pivot_table(index=["benchmark", x], columns="net_strategy", values="ops_per_sec", sort=False)
    sweep = (piv["bsp"] / piv["sync"]).rename("bsp_over_sync").reset_index()
    rep.write(f"{name}.csv", sweep.round(3).to_csv(index=False))
    rep.lines(name, sweep, x, "bsp_over_sync", "benchmark")
    rep.pivot_md(name, sweep, "benchmark", x, "bsp_over_sync", "{:.2f}")
    return sweep
