"""The ``pmsim`` command. One CLI for everything; ``pmsim <command> --help`` for details."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from pmsim import PmsimError, api


class _Parser(argparse.ArgumentParser):
    """argparse with the one-line error convention of every other pmsim error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"pmsim: error: {self.prog}: {message} (see '{self.prog} --help')\n")


def _kv(items: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items or []:
        if "=" not in it:
            raise PmsimError(f"{what} '{it}' is not of the form name=value")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def write_atomic(path: str | Path, text: str) -> None:
    """Writes via a temporary file so an interrupted run never leaves a half-written result."""
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".partial")
    try:
        tmp.write_text(text)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _add_input(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--trace", help="trace file (text or binary)")
    g.add_argument("--workload", help="built-in workload (see 'pmsim workloads')")
    p.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="workload parameter")


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML configuration file")
    p.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="override a parameter (e.g. pm.write_ns=120)"
    )


def cmd_run(a: argparse.Namespace) -> int:
    params = _kv(a.param, "parameter")
    overrides = _kv(a.set, "--set")
    if a.trace is not None and params:
        raise PmsimError(
            f"workload parameter(s) {', '.join(sorted(params))} do not apply to a trace run "
            "(machine parameters go in --set)"
        )
    from pmsim import _core, tracer

    tracer.check_complete(a.trace, a.allow_incomplete)
    out = _core.run(
        a.design,
        trace=a.trace,
        workload=a.workload,
        params=params,
        config=a.config,
        overrides=overrides,
        allow_broken=a.allow_broken_designs,
    )
    stats = json.loads(out)
    if a.output:
        write_atomic(a.output, out + "\n")
    if a.json:
        print(out)
    else:
        print(summary(stats))
    return 0


def summary(s: dict) -> str:
    stalls = ", ".join(f"{k} {v}" for k, v in s["stall_cycles"].items() if v)
    lines = [
        f"design {s['design']} (promises {s['promise']}), {s['threads']} threads",
        f"  simulated time   {s['sim_time_ns']:.1f} ns (persists drained at {s['drain_time_ns']:.1f} ns)",
        f"  operations       {s['operations']}  ({s['ops_per_sec']:.0f} ops/s, "
        f"avg latency {s['op_latency_avg_ns']:.1f} ns)",
        f"  events           {s['events']}  instructions {s['instructions']}",
        f"  PM stores        {s['pm_stores']}  media reads {s['pm_reads']}  media writes {s['pm_writes']}",
        f"  stall cycles     {stalls or 'none'}",
    ]
    if s.get("design_stats"):
        lines.append("  design           " + ", ".join(f"{k} {v:g}" for k, v in s["design_stats"].items()))
    return "\n".join(lines)


def cmd_compare(a: argparse.Namespace) -> int:
    from pmsim.sweep import jobs_for, run_jobs

    params = _kv(a.param, "parameter")
    params.update(_kv(a.set, "--set"))
    designs = a.designs.split(",") if a.designs else [d for d, _ in api.designs()]
    if a.trace:
        df = _compare_trace(a, designs)
    else:
        df = run_jobs(jobs_for(designs, [a.workload], **params), workers=a.jobs, progress=not a.quiet)
    base = df[df.design == "baseline"]["sim_time_ns"]
    if len(base):
        df["speedup_vs_baseline"] = (base.iloc[0] / df["sim_time_ns"]).round(3)
    cols = [
        c
        for c in [
            "design",
            "sim_time_ns",
            "speedup_vs_baseline",
            "ops_per_sec",
            "pm_writes",
            "pm_reads",
            "stall_fence",
            "stall_dfence",
            "stall_pb_full",
        ]
        if c in df
    ]
    print(df[cols].to_string(index=False))
    if a.output:
        write_atomic(a.output, df.to_csv(index=False))
    return 0


def _compare_trace(a: argparse.Namespace, designs: list[str]):
    """`pmsim compare --trace FILE`: the trace under each design, one after another."""
    import pandas as pd

    from pmsim import tracer

    if a.param:
        raise PmsimError("-p: workload parameters do not apply to --trace (machine parameters go in --set)")
    tracer.check_complete(a.trace, a.allow_incomplete)
    rows = []
    for d in designs:
        stats = api.run(d, trace=a.trace, **_kv(a.set, "--set"))
        rows.append({"design": d, "trace": a.trace, **api.flatten(stats)})
    return pd.DataFrame(rows)


def cmd_sweep(a: argparse.Namespace) -> int:
    from pmsim.sweep import jobs_for, run_jobs

    fixed = _kv(a.param, "parameter")
    fixed.update(_kv(a.set, "--set"))
    grid = {k: v.split(",") for k, v in _kv(a.grid, "--grid").items()}
    jobs = jobs_for(a.designs.split(","), a.workloads.split(","), grid, **fixed)
    scheduler = None
    cluster = None
    if a.scheduler:
        scheduler = a.scheduler
    elif a.cluster:
        scheduler = cluster = _make_cluster(a.cluster, a.cluster_jobs)
    try:
        df = run_jobs(jobs, workers=a.jobs, scheduler=scheduler, progress=not a.quiet)
    finally:
        if cluster is not None:
            cluster.close()
    if a.output:
        write_atomic(a.output, df.to_csv(index=False))
        print(f"wrote {len(df)} rows to {a.output}")
    else:
        print(df.to_string(index=False))
    return 0


def _make_cluster(kind: str, n: int):
    try:
        if kind == "local":
            from distributed import LocalCluster

            return LocalCluster(n_workers=n, threads_per_worker=1)
        import dask_jobqueue

        cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[kind]
        cluster = cls(cores=1, memory="2GB", processes=1)
        cluster.scale(jobs=n)
        return cluster
    except ImportError as e:
        raise PmsimError(f"--cluster {kind} needs Dask: pip install 'pmsim[cluster]' ({e})") from e


def cmd_trace(a: argparse.Namespace) -> int:
    if a.trace_cmd == "convert":
        to = a.to or ("text" if a.dst.endswith((".trace", ".txt")) else "binary")
        api.trace_convert(a.src, a.dst, to=to, compress=not a.no_compress)
        print(f"wrote {a.dst} ({to})")
    elif a.trace_cmd == "stats":
        params = _kv(a.param, "parameter")
        if a.file and (a.workload or params):
            raise PmsimError("give a trace file or --workload (with -p parameters), not both")
        s = api.trace_stats(a.file) if a.file else api.trace_stats(workload=a.workload, **params)
        if a.file:
            from pmsim import _core

            meta = _core.trace_meta(a.file)
            if meta:  # only traces that carry metadata (e.g. from `pmsim trace record`)
                s["meta"] = meta
        if a.json:
            print(json.dumps(s, indent=2))
        else:
            print(f"threads {s['threads']}  events {s['events']}  operations {s['operations']}")
            print(
                f"PM stores {s['pm_stores']} ({s['pm_store_bytes']} bytes)  "
                f"volatile stores {s['volatile_stores']}  loads {s['loads']} ({s['load_bytes']} bytes)"
            )
            single = 100.0 * s["single_line_epochs"] / s["epochs"] if s["epochs"] else 0.0
            print(f"epochs {s['epochs']} ({single:.1f}% write a single line)")
            print("events by kind: " + ", ".join(f"{k} {v}" for k, v in s["events_by_kind"].items() if v))
            print("events by thread: " + ", ".join(f"T{i} {v}" for i, v in enumerate(s["events_by_thread"])))
            print(f"PM footprint {s['pm_footprint_bytes']} bytes")
            for k, v in s.get("meta", []):
                print(f"{k}: {v}")
    elif a.trace_cmd == "record":
        from pmsim import tracer

        argv = list(a.program)
        if argv and argv[0] == "--":
            argv = argv[1:]
        return tracer.record(a.pm, a.volatile, a.output, argv)
    elif a.trace_cmd == "gen":
        n = api.trace_generate(a.workload, a.output, compress=not a.no_compress, **_kv(a.param, "parameter"))
        print(f"wrote {a.output}: {n} events")
    return 0


def cmd_config(a: argparse.Namespace) -> int:
    print(api.config_show(a.config, **_kv(a.set, "--set")), end="")
    return 0


def cmd_designs(a: argparse.Namespace) -> int:
    for name, about in api.designs():
        print(f"{name:12s} {about}")
    return 0


def cmd_workloads(a: argparse.Namespace) -> int:
    for w in api.workloads():
        print(f"{w['name']}: {w['description']}")
        for p in w["params"]:
            unit = f" [{p['unit']}]" if p["unit"] else ""
            print(f"    {p['name']} = {p['default']}{unit}  {p['help']}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from pmsim import _core

    params = {"threads": str(a.threads), "ops": str(a.ops)}
    stats_t = json.loads(_core.trace_stats(workload=a.workload, params=params))
    best = None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        out = json.loads(_core.run(a.design, workload=a.workload, params=params))
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    t0 = time.perf_counter()
    _core.trace_stats(workload=a.workload, params=params)
    gen = time.perf_counter() - t0
    sim = max(best - gen, 1e-9)
    ev = stats_t["events"]
    print(f"workload {a.workload} ({a.threads} threads, {a.ops} ops/thread), design {a.design}")
    print(f"  trace events        {ev}")
    print(f"  engine events       {out['engine_events']}")
    print(f"  generation          {gen:.3f} s")
    print(f"  simulation          {sim:.3f} s (best of {a.repeat})")
    print(f"  trace events / s    {ev / sim:,.0f}")
    return 0


def cmd_crash(a: argparse.Namespace) -> int:
    from pmsim import _core

    params = _kv(a.param, "parameter")
    if a.trace and params:
        raise PmsimError(f"-p {', '.join(sorted(params))}: workload parameters do not apply to --trace")
    from pmsim import tracer

    tracer.check_complete(a.trace, a.allow_incomplete)
    at = [api.parse_instant(x) for x in a.at] if a.at else None
    out = _core.crash(
        a.design,
        trace=a.trace,
        workload=a.workload,
        params=params,
        config=a.config,
        overrides=_kv(a.set, "--set"),
        at=at,
        random=a.random,
        seed=a.seed,
        every=a.every,
        model=a.model,
        allow_broken=a.allow_broken_designs,
        recovery=not a.no_recovery,
        max_failures=a.max_failures,
    )
    rep = json.loads(out)
    if a.json:
        print(out)
    else:
        rate = rep["images"] / max(rep["host_seconds"], 1e-9)
        recovered = (
            "application recovery not checked"
            if a.no_recovery
            else f"{rep['recovered']} recovered by the application"
        )
        print(
            f"{rep['design']} checked against {rep['model']}: {rep['images']} crash images, "
            f"{rep['consistent']} consistent, {rep['durable']} durable, {recovered} "
            f"({rep['host_seconds']:.2f} s, {rate:,.0f} images/s)"
        )
        for f in rep["failures"]:
            print(f"\ncrash at {f['at_ps']} ps ({f['at_ps'] / 1000:.3f} ns):")
            v = f.get("verdict")
            if v:
                for x in v["violations"]:
                    print("  " + api.describe_violation(x))
            if f.get("recovery_error"):
                print("  application recovery: " + f["recovery_error"])
            print("  replay: " + f["replay"])
        print(
            "OK: every image consistent and durable"
            if not rep["failures"]
            else f"\n{len(rep['failures'])} failing image(s)"
        )
    return 0 if not rep["failures"] else 1


def cmd_profile(a: argparse.Namespace) -> int:
    from pmsim.experiments import profile

    names = a.workloads.split(",") if a.workloads else None
    df = profile.profile(names, threads=a.threads, ops=a.ops, out=a.out, workers=a.jobs, progress=not a.quiet)
    print(profile.render(df))
    if a.out:
        print(f"\nwrote {a.out}/persist_profile.csv and fig2_persist_profile.png")
    return 0


def cmd_reproduce(a: argparse.Namespace) -> int:
    from pmsim.experiments import asap

    if a.paper != "asap":
        raise PmsimError(f"unknown paper '{a.paper}' (valid: asap)")
    asap.reproduce(out=a.out, scale=a.scale, workers=a.jobs, progress=not a.quiet)
    return 0


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pmsim", description="Simulate persistent-memory ordering hardware.")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="simulate one trace or workload under one design")
    _add_input(r)
    r.add_argument("--design", required=True)
    _add_config(r)
    r.add_argument("-o", "--output", help="write stats JSON here")
    r.add_argument("--json", action="store_true", help="print the stats JSON")
    r.add_argument("--allow-broken-designs", action="store_true", help=argparse.SUPPRESS)
    r.add_argument("--allow-incomplete", action="store_true", help="accept a trace marked incomplete")
    r.set_defaults(fn=cmd_run)

    c = sub.add_parser("compare", help="one workload (or a trace) under every design, as a table")
    c.add_argument("--workload", default="array")
    c.add_argument("--trace", help="a trace file instead of a workload")
    c.add_argument("--allow-incomplete", action="store_true", help="accept a trace marked incomplete")
    c.add_argument("-p", "--param", action="append", metavar="NAME=VALUE")
    c.add_argument("--set", action="append", metavar="NAME=VALUE")
    c.add_argument("--designs", help="comma-separated (default: all)")
    c.add_argument("-j", "--jobs", type=int, help="parallel runs (default: cores)")
    c.add_argument("-o", "--output", help="write the table as CSV")
    c.add_argument("-q", "--quiet", action="store_true")
    c.set_defaults(fn=cmd_compare)

    s = sub.add_parser("sweep", help="designs x workloads x parameter grid, in parallel")
    s.add_argument("--designs", required=True)
    s.add_argument("--workloads", required=True)
    s.add_argument("--grid", action="append", metavar="NAME=V1,V2,...")
    s.add_argument("-p", "--param", action="append", metavar="NAME=VALUE")
    s.add_argument("--set", action="append", metavar="NAME=VALUE")
    s.add_argument("-j", "--jobs", type=int, help="local parallel runs (default: cores)")
    s.add_argument("--scheduler", help="Dask scheduler address (tcp://host:8786)")
    s.add_argument(
        "--cluster", choices=["local", "slurm", "pbs"], help="start a Dask cluster (dask-jobqueue)"
    )
    s.add_argument("--cluster-jobs", type=int, default=4)
    s.add_argument("-o", "--output", help="CSV output")
    s.add_argument("-q", "--quiet", action="store_true")
    s.set_defaults(fn=cmd_sweep)

    t = sub.add_parser("trace", help="convert, inspect or generate traces")
    tsub = t.add_subparsers(dest="trace_cmd", required=True)
    tc = tsub.add_parser("convert", help="text <-> binary, lossless")
    tc.add_argument("src")
    tc.add_argument("dst")
    tc.add_argument("--to", choices=["binary", "text"], help="default: by the destination's extension")
    tc.add_argument("--no-compress", action="store_true")
    ts = tsub.add_parser("stats", help="events by kind and thread, PM stores, epochs, bytes")
    ts.add_argument("file", nargs="?")
    ts.add_argument("--workload")
    ts.add_argument("-p", "--param", action="append", metavar="NAME=VALUE")
    ts.add_argument("--json", action="store_true")
    tr = tsub.add_parser("record", help="run a program built with 'pmsim trace cc' and record its trace")
    tr.add_argument("--pm", default="heap", help="heap | dax:DIR | pmdk | range:ADDR:SIZE (default heap)")
    tr.add_argument("--volatile", choices=["keep", "drop"], default="keep", help="trace non-PM accesses?")
    tr.add_argument("-o", "--output", required=True, help=".trace for text, else binary")
    tr.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS")
    tsub.add_parser("cc", help="C compiler wrapper (clang + tracer): pmsim trace cc [gcc flags]")
    tsub.add_parser("c++", help="C++ compiler wrapper (clang++ + tracer)")
    tg = tsub.add_parser("gen", help="write a workload's trace to a file")
    tg.add_argument("--workload", required=True)
    tg.add_argument("-p", "--param", action="append", metavar="NAME=VALUE")
    tg.add_argument("-o", "--output", required=True, help=".trace for text, .bin for binary")
    tg.add_argument("--no-compress", action="store_true")
    t.set_defaults(fn=cmd_trace)

    cf = sub.add_parser("config", help="configuration")
    csub = cf.add_subparsers(dest="config_cmd", required=True)
    cs = csub.add_parser("show", help="print the effective configuration with units and defaults")
    _add_config(cs)
    cf.set_defaults(fn=cmd_config)

    sub.add_parser("designs", help="list designs").set_defaults(fn=cmd_designs)
    sub.add_parser("workloads", help="list workloads and their parameters").set_defaults(fn=cmd_workloads)

    b = sub.add_parser("bench", help="simulated trace events per host second")
    b.add_argument("--workload", default="array")
    b.add_argument("--design", default="baseline")
    b.add_argument("--threads", type=int, default=4)
    b.add_argument("--ops", type=int, default=50000)
    b.add_argument("--repeat", type=int, default=3)
    b.set_defaults(fn=cmd_bench)

    cr = sub.add_parser("crash", help="crash a run and check every crash image (exit 1 on a violation)")
    _add_input(cr)
    cr.add_argument("--design", required=True)
    _add_config(cr)
    mode = cr.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--at", action="append", metavar="T", help="crash instant (ps, or 120ns / 3.5us); repeatable"
    )
    mode.add_argument("--random", type=int, metavar="N", help="N seeded random instants over the run")
    mode.add_argument("--every", action="store_true", help="every instant the persistent state changes")
    cr.add_argument("--seed", type=int, default=1, help="seed of --random (default 1)")
    cr.add_argument(
        "--model",
        choices=["ep", "rp", "strict", "x86"],
        help="check against this model (default: the design's; x86 for traces of clwb/sfence programs)",
    )
    cr.add_argument("--no-recovery", action="store_true", help="skip the workload's own recovery check")
    cr.add_argument("--max-failures", type=int, default=10, help="stop after this many failing images")
    cr.add_argument("--json", action="store_true", help="print the report as JSON")
    cr.add_argument("--allow-broken-designs", action="store_true", help=argparse.SUPPRESS)
    cr.add_argument("--allow-incomplete", action="store_true", help="accept a trace marked incomplete")
    cr.set_defaults(fn=cmd_crash)

    pf = sub.add_parser("profile", help="persist profile of the workloads (stores, epochs, dependencies)")
    pf.add_argument("--workloads", help="comma-separated (default: all)")
    pf.add_argument("--threads", type=int, default=4)
    pf.add_argument("--ops", type=int, default=1000, help="operations per thread")
    pf.add_argument("--out", help="write persist_profile.csv and a plot here")
    pf.add_argument("-j", "--jobs", type=int)
    pf.add_argument("-q", "--quiet", action="store_true")
    pf.set_defaults(fn=cmd_profile)

    rp = sub.add_parser("reproduce", help="reproduce a paper's evaluation as tables and plots")
    rp.add_argument("paper", nargs="?", default="asap")
    rp.add_argument("--scale", choices=["quick", "full"], default="quick")
    rp.add_argument("--out", default="results")
    rp.add_argument("-j", "--jobs", type=int)
    rp.add_argument("-q", "--quiet", action="store_true")
    rp.set_defaults(fn=cmd_reproduce)
    return p


def _fail(msg: str) -> int:
    """One line on stderr, exit status 2 (messages from the core may span lines: join them)."""
    one = "; ".join(part.strip() for part in msg.splitlines() if part.strip())
    print(f"pmsim: error: {one}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["trace"] and argv[1:2] in (["cc"], ["c++"]):
        # Compiler wrappers take gcc-style flags verbatim (not argparse's).
        from pmsim import tracer

        try:
            return tracer.cmd_compile(argv[1], argv[2:])
        except PmsimError as e:
            return _fail(str(e))
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except PmsimError as e:
        return _fail(str(e))
    except BrokenPipeError:  # `pmsim ... | head`: stop quietly (and keep the final flush quiet too)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # files we write ourselves (-o, --out), Dask connections
        where = f"{e.filename}: " if e.filename else ""
        return _fail(f"{where}{e.strerror or e}")
    except KeyboardInterrupt:
        print("pmsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
