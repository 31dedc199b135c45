"""The ``pmsim`` command. One CLI for everything; ``pmsim <command> --help`` for details."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pmsim import PmsimError, api
from pmsim.output import check_not_input, check_writable, is_stdout, write_atomic


class _Parser(argparse.ArgumentParser):
    """argparse with the one-line error convention of every other pmsim error: the message, then
    the help of the (sub)command it concerns. Every option of one value is given once
    (:class:`_Once` is the default action); the repeatable ones say ``action="append"``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Subcommands' parsers are of this class too (argparse's parser_class), analyze's included.
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"pmsim: error: {message} (see '{self.prog} --help')\n")

    def print_help(self, file=None):  # type: ignore[override]
        # With stdout closed (``>&-``) argparse would drop the help without a word.
        super().print_help(sys.stderr if file is None and _no_stdout else file)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # An unknown argument is found by the top-level parser after the subcommand's has taken
        # what it knows: point at the subcommand's help (``_prog``, set by ``_sub``), not pmsim's.
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            prog = getattr(ns, "_prog", None) or self.prog
            self.exit(2, f"pmsim: error: unrecognized arguments: {' '.join(extra)} (see '{prog} --help')\n")
        return ns


class _Once(argparse.Action):
    """An option that takes one value: given twice, the first would silently not apply, so the
    second is a usage error (the option's default, if any, does not count as given)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:
            given = namespace.__dict__.setdefault("_given", {})
            if self.dest in given:
                parser.error(
                    f"{option_string} is given twice ({given[self.dest]} and {option_string} {values}): "
                    "give it once"
                )
            given[self.dest] = f"{option_string} {values}"
        setattr(namespace, self.dest, values)


def _int_at_least(lo: int, hi: int | None = None):
    """An argparse type: an integer in lo..=hi (a bad value is a usage error, exit 2)."""

    def parse(text: str) -> int:
        try:
            v = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if v < lo or (hi is not None and v > hi):
            want = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
            raise argparse.ArgumentTypeError(f"{v} must be an integer {want}")
        return v

    parse.__name__ = "integer"
    return parse


U64_MAX = 2**64 - 1


def _random_count(text: str) -> int:
    """An argparse type: the N of ``--random N`` (1 to api.MAX_RANDOM_INSTANTS)."""
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    try:
        return api.random_arg("N", v, every="--every")
    except PmsimError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_random_count.__name__ = "integer"


_FLAG = {"parameter": "-p"}


def _kv(items: list[str] | None, what: str, seen: dict[str, str] | None = None) -> dict[str, str]:
    """NAME=VALUE items as a dict. A parameter given twice is refused, whatever the spelling
    (``pm.write_ns`` and its alias ``pm_write_ns``): within ``items``, and across the calls that
    share ``seen`` (``-p``, ``--set`` and ``--grid`` of one command)."""
    out: dict[str, str] = {}
    seen = {} if seen is None else seen
    for it in items or []:
        if "=" not in it:
            raise PmsimError(f"{what} '{it}' is not of the form name=value")
        k, v = it.split("=", 1)
        k = k.strip()
        name = api.param_name(k)
        here = f"{_FLAG.get(what, what)} {it}"
        if name in seen:
            raise PmsimError(
                f"parameter {name} is given twice: {seen[name]} and {here} (give each parameter once)"
            )
        seen[name] = here
        out[k] = v.strip()
    return out


def _path(text: str) -> str:
    """An argparse type: a file or folder path the core can take. Checked here, before anything
    runs or is written: a name that is not UTF-8 (the core's paths are UTF-8 strings) failed
    only when it reached the core, after other files were written."""
    why = api.utf8_path_problem(text)
    if why is not None:
        raise argparse.ArgumentTypeError(why)
    return text


_path.__name__ = "path"


def _nonempty(text: str) -> str:
    """An argparse type: a file or folder path, not empty."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return _path(text)


_nonempty.__name__ = "path"


def _say(text: str, data_on_stdout: bool) -> None:
    """A message for the user (a status line, a summary, a table to read): on stdout, unless the
    command writes its data there (``-o /dev/stdout``), where it would corrupt the data (a trace
    or table piped on), or stdout is closed (``>&-``): then on stderr."""
    print(text, file=sys.stderr if data_on_stdout or _no_stdout else sys.stdout)


def _core_inputs(a: argparse.Namespace, params: dict[str, str]) -> dict:
    """The input and machine arguments of a core call from the shared options (--trace or
    --workload with -p, --config, --set), the trace first checked complete."""
    from pmsim import tracer

    overrides = _kv(a.set, "--set", {api.param_name(k): f"-p {k}={v}" for k, v in params.items()})
    tracer.check_complete(a.trace, a.allow_incomplete)
    return {
        "trace": a.trace,
        "workload": a.workload,
        "params": params,
        "config": a.config,
        "overrides": overrides,
        "allow_incomplete": a.allow_incomplete,
    }


def cmd_run(a: argparse.Namespace) -> int:
    params = _kv(a.param, "parameter")
    if a.trace is not None and params:
        raise PmsimError(
            f"workload parameter(s) {', '.join(sorted(params))} do not apply to a trace run "
            "(machine parameters go in --set)"
        )
    from pmsim import _core

    if a.output:
        check_writable(a.output)
        check_not_input(a.output, "-o", [("--trace", a.trace), ("--config", a.config)])
    to_stdout = bool(a.output) and is_stdout(a.output)
    inputs = _core_inputs(a, params)
    # The bar shows on a terminal only (None), never with -q.
    with api.run_bar(True if a.quiet else None) as bar:
        out = _core.run(a.design, **inputs, allow_broken=a.allow_broken_designs, progress=bar)
    stats = json.loads(out)
    if a.output:
        write_atomic(a.output, out + "\n")
    if a.json:
        if not to_stdout:  # else the JSON is on stdout already, once
            print(out)
    else:
        _say(summary(stats), to_stdout)
    return 0


def summary(s: dict) -> str:
    stalls = ", ".join(f"{k} {v}" for k, v in s["stall_cycles"].items() if v)
    if s["operations"]:
        ops = (
            f"{s['operations']}  ({s['ops_per_sec']:.0f} ops/s over {s['roi_time_ns']:.1f} ns from the "
            f"first begin at {s['roi_start_ns']:.1f} ns, avg latency {s['op_latency_avg_ns']:.1f} ns)"
        )
    else:
        ops = "0  (no begin/end pair completed)"
    lines = [
        f"design {s['design']} (promises {s['promise']}), {s['threads']} threads",
        f"  simulated time   {s['sim_time_ns']:.1f} ns (persists drained at {s['drain_time_ns']:.1f} ns)",
        f"  operations       {ops}",
        f"  events           {s['events']}  instructions {s['instructions']}",
        f"  PM stores        {s['pm_stores']}  media reads {s['pm_reads']}  media writes {s['pm_writes']}",
        f"  stall cycles     {stalls or 'none'}",
    ]
    if s.get("design_stats"):
        lines.append("  design           " + ", ".join(f"{k} {v:g}" for k, v in s["design_stats"].items()))
    net = s.get("net") or {}
    if net.get("regions"):
        lines.append(
            f"  remote ({net['strategy']})   {net['clients']} clients, {net['regions']} regions, "
            f"{net['packets']} packets; region latency {net['region_latency_avg_ns']:.1f} ns "
            f"({100 * net['round_trip_share']:.1f}% round trip, "
            f"server persist {net['server_persist_avg_ns']:.1f} ns)"
        )
    return "\n".join(lines)


def cmd_compare(a: argparse.Namespace) -> int:
    from pmsim.sweep import check_table_path, jobs_for, run_jobs

    seen: dict[str, str] = {}
    params = _kv(a.param, "parameter", seen)
    params.update(_kv(a.set, "--set", seen))
    designs = _name_list(a.designs, "--designs") if a.designs is not None else [d for d, _ in api.designs()]
    if a.output:
        # The path is checked before the first run, not refused after all of them.
        check_table_path(a.output)
        check_not_input(a.output, "-o", [("--trace", a.trace), ("--config", a.config)])
    to_stdout = bool(a.output) and is_stdout(a.output)
    if a.trace:
        df = _compare_trace(a, designs)
    else:
        jobs = jobs_for(designs, [a.workload], config=a.config, **params)
        df = run_jobs(jobs, workers=a.jobs, progress=not a.quiet)
    base = df[df.design == "baseline"]["roi_time_ns"]
    if len(base):
        df["speedup_vs_baseline"] = (base.iloc[0] / df["roi_time_ns"]).round(3)
    else:
        print("pmsim: note: no speedup_vs_baseline column: baseline is not among --designs", file=sys.stderr)
    cols = [
        c
        for c in [
            "design",
            "sim_time_ns",
            "roi_time_ns",
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
    _say(df[cols].to_string(index=False), to_stdout)
    if a.output:
        from pmsim.sweep import write_table

        write_table(df, a.output)
    return 0


def _name_list(value: str, option: str) -> list[str]:
    """A comma-separated list of names, each once; an empty name is a mistake, not "all"."""
    names = [x.strip() for x in value.split(",")]
    if not all(names):
        raise PmsimError(f"{option} '{value}': an empty name (give comma-separated names)")
    twice = sorted({x for x in names if names.count(x) > 1})
    if twice:
        raise PmsimError(f"{option} '{value}': {', '.join(twice)} given more than once")
    return names


def _compare_trace(a: argparse.Namespace, designs: list[str]):
    """`pmsim compare --trace FILE`: the trace under each design, one after another."""
    import pandas as pd

    from pmsim import tracer
    from pmsim.sweep import unchanged_inputs

    if a.param:
        raise PmsimError("-p: workload parameters do not apply to --trace (machine parameters go in --set)")
    overrides = _kv(a.set, "--set")
    rows = []
    with _readable_again(a.trace) as path, unchanged_inputs([path, a.config]):
        # A pipe's copy is checked under the name the user gave.
        tracer.check_complete(path, a.allow_incomplete, shown=a.trace)
        for d in designs:
            stats = api.run(d, trace=path, config=a.config, allow_incomplete=True, **overrides)
            rows.append({"design": d, "trace": a.trace, **api.flatten(stats)})
    return pd.DataFrame(rows)


@contextlib.contextmanager
def _readable_again(path: str):
    """`path`, or for a pipe or device (/dev/stdin), which reads once, a temporary copy of it."""
    if Path(path).is_file() or not Path(path).exists():
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="pmsim-") as d:
        copy = Path(d) / "trace"
        with open(path, "rb") as src, open(copy, "wb") as dst:
            shutil.copyfileobj(src, dst)
        yield str(copy)


def _grid_value(text: str) -> int | float | str:
    """A --grid value as the table holds it: an int or a float when it reads as one."""
    for kind in (int, float):
        try:
            v = kind(text)
        except ValueError:
            continue
        return v if kind is int or math.isfinite(v) else text
    return text


def _grid_values(texts: list[str]) -> list[int | float | str]:
    """A --grid parameter's values: numbers if every one reads as a number, else all as written
    (``true,0`` for a switch), so a column holds one type and every table format can store it."""
    vals = [_grid_value(x) for x in texts]
    return vals if not any(isinstance(v, str) for v in vals) else texts


def cmd_sweep(a: argparse.Namespace) -> int:
    from pmsim.sweep import check_table_path, jobs_for, run_jobs

    seen: dict[str, str] = {}
    fixed = _kv(a.param, "parameter", seen)
    fixed.update(_kv(a.set, "--set", seen))
    # Numbers are numbers in the table (sorting, plotting), as from the Python API's grid.
    grid = {k: _grid_values(v.split(",")) for k, v in _kv(a.grid, "--grid", seen).items()}
    designs, workloads = _name_list(a.designs, "--designs"), _name_list(a.workloads, "--workloads")
    jobs = jobs_for(designs, workloads, grid, config=a.config, **fixed)
    if a.output:
        # The path is checked before the first run, not refused after the whole sweep.
        check_table_path(a.output)
        check_not_input(a.output, "-o", [("--config", a.config)])
    # An option that would be ignored is refused: the user meant something by it.
    if a.scheduler and a.cluster:
        raise PmsimError("give --scheduler (an existing Dask scheduler) or --cluster (start one), not both")
    if a.cluster_jobs is not None and not a.cluster:
        raise PmsimError("--cluster-jobs sizes the cluster that --cluster starts: give --cluster too")
    if a.jobs is not None and (a.scheduler or a.cluster):
        where = "--scheduler" if a.scheduler else "--cluster"
        raise PmsimError(f"-j sets local parallel runs; under {where} the cluster's workers run the sweep")
    scheduler = None
    cluster = None
    if a.scheduler:
        scheduler = a.scheduler
    elif a.cluster:
        scheduler = cluster = _make_cluster(a.cluster, a.cluster_jobs or 4)
    try:
        df = run_jobs(jobs, workers=a.jobs, scheduler=scheduler, progress=not a.quiet, cache=not a.no_cache)
    finally:
        if cluster is not None:
            cluster.close()
    if a.output:
        from pmsim.sweep import write_table

        to_stdout = is_stdout(a.output)
        write_table(df, a.output)
        _say(f"wrote {len(df)} rows to {a.output}", to_stdout)
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
        # (In place, `trace convert X X`, is allowed: it normalises X. The core writes a regular
        # file atomically, a temporary file renamed onto it, so it reads the old X throughout.)
        to = a.to or api.trace_format(a.dst)
        to_stdout = is_stdout(a.dst)
        api.trace_convert(a.src, a.dst, to=to, compress=not a.no_compress)
        _say(f"wrote {a.dst} ({to})", to_stdout)
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
            print(f"compute instructions {s['compute_instructions']}")
            single = 100.0 * s["single_line_epochs"] / s["epochs"] if s["epochs"] else 0.0
            print(f"epochs {s['epochs']} ({single:.1f}% write a single line)")
            if s.get("remote_regions"):
                print(
                    f"remote regions {s['remote_regions']} ({s['remote_bytes']} bytes) "
                    f"from {s['client_threads']} client threads"
                )
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
        return tracer.record(a.pm, a.volatile, a.output, argv, compute=a.compute)
    elif a.trace_cmd == "gen":
        to_stdout = is_stdout(a.output)
        n = api.trace_generate(a.workload, a.output, compress=not a.no_compress, **_kv(a.param, "parameter"))
        _say(f"wrote {a.output}: {n} events", to_stdout)
    elif a.trace_cmd == "lint":
        return _trace_lint(a)
    return 0


def _print_lint_stores(stores: list[dict], total: int) -> None:
    for st in stores:
        op = f" in op '{st['op']}' #{st['op_index']}" if st["op"] is not None else ""
        print(
            f"  T{st['thread']} {st['kind']} {st['addr']:#x} ({st['size']} B), gid {st['gid']}"
            f"{op}: {st['state']}"
        )
    if total > len(stores):
        print(f"  ... {total - len(stores)} more (--max)")


def _trace_lint(a: argparse.Namespace) -> int:
    r = api.trace_lint(a.file, max_stores=a.max, allow_incomplete=a.allow_incomplete)
    if a.json:
        print(json.dumps(r, indent=2))
    elif r["dialect"] != "x86":
        print(
            f"{a.file}: a design-neutral trace (ofence/dfence, or no flush or x86 fence at all, and "
            "not recorded from a program): its persistence is the design's, nothing to lint "
            "(pmsim crash checks the designs)"
        )
    else:
        print(
            f"{a.file}: {r['threads']} threads, {r['events']} events, {r['pm_stores']} PM stores, "
            f"{r['flushes']} flushes, {r['fences']} fences"
        )
        n = r["unpersisted_stores"]
        cl = r["clflushed_not_fenced"]
        by_clflush = f", {cl} of them by a clflush with no sfence after it" if cl else ""
        print(
            f"unpersisted at the end: {n} store(s) in {r['unpersisted_words']} PM word(s) "
            f"({r['never_flushed']} never flushed, {r['flushed_not_fenced']} flushed but not fenced"
            f"{by_clflush})"
        )
        _print_lint_stores(r["unpersisted"], n)
        if cl:
            print(
                "  (a clflush orders its line before the thread's later stores but is not durable "
                "when it retires: an sfence after it, or a later store, is all that is missing)"
            )
        late = r["late_stores"]
        if late:
            print(
                f"late: {late} store(s) not persisted by the end of their operation, then persisted "
                "or overwritten (a crash in between loses them; not counted above)"
            )
            _print_lint_stores(r["late"], late)
        if r["unpersisted_sync_words"]:
            print(
                f"not counted: {r['unpersisted_sync_words']} PM lock word(s) whose last store never "
                "persisted (volatile by design when recovery re-initialises them, as libpmemobj does "
                "its locks; a lock is a library sync object or a word an rmw takes and its thread "
                "gives back, docs/design.md §5)"
            )
            _print_lint_stores(r["unpersisted_sync"], r["unpersisted_sync_stores"])
        print(
            f"redundant flushes {r['redundant_flushes']} (lines with nothing to write back), "
            f"volatile flushes {r['volatile_flushes']}, empty fences {r['empty_fences']} "
            "(no flush or non-temporal store to order)"
        )
        from pmsim import _core

        if r["redundant_flushes"] and dict(_core.trace_meta(a.file)).get("pm") == "pmdk":
            print(
                "note: under --pm pmdk the stores libpmemobj makes with its own code are not traced "
                "(tools/tracer/README.md), so its flushes of them count as redundant here"
            )
    return 1 if r["unpersisted_stores"] else 0


def cmd_config(a: argparse.Namespace) -> int:
    text = api.config_show(a.config, **_kv(a.set, "--set"))
    # TOML is UTF-8 whatever the locale: under a Latin-1 one, `config show > f.toml` wrote its
    # comments' § as Latin-1, and pmsim then refused its own file.
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        print(text, end="")
    else:
        sys.stdout.flush()
        out.write(text.encode("utf-8"))
        out.flush()
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
            print(f"    {p['name']} = {p['default']}{unit}  {p['help']} (valid: {api.describe_range(p)})")
    return 0


def _bench_crash(a: argparse.Namespace) -> int:
    """`pmsim bench --crash random:N|every`: crash instants checked per host second (with the
    workload's recovery unless --no-recovery), best of --repeat; docs/performance.md."""
    from pmsim import _core

    if a.design == "all":
        raise PmsimError("--crash measures one design: name it with --design")
    if a.config or a.set:
        raise PmsimError("--crash runs the default machine: --config and --set are not supported with it")
    mode, _, n = a.crash.partition(":")
    if mode == "random" and n.isdigit():
        kw = {"random": api.random_arg(f"--crash {a.crash}: N", int(n), every="--crash every")}
    elif mode == "every" and not n:
        kw = {"every": True}
    else:
        raise PmsimError(
            f"--crash {a.crash}: expected random:N (N from 1 to {api.MAX_RANDOM_INSTANTS}) or every"
        )
    params = {"threads": str(a.threads), "ops": str(a.ops)}
    best = None
    for _ in range(a.repeat):
        rep = json.loads(_core.crash_bench(a.design, a.workload, params, recovery=not a.no_recovery, **kw))
        if best is None or rep["host_seconds"] < best["host_seconds"]:
            best = rep
    check_s = max(best["host_seconds"] - best["setup_seconds"], 1e-9)
    out = {
        "workload": a.workload,
        "design": a.design,
        "crash": a.crash,
        "recovery": not a.no_recovery,
        "instants": best["images"],
        "recovery_runs": best["recovery_runs"],
        "piece_runs": best["piece_runs"],
        "setup_s": best["setup_seconds"],
        "check_s": check_s,
        "instants_per_s": best["images"] / max(best["host_seconds"], 1e-9),
        "check_instants_per_s": best["images"] / check_s,
        "failures": len(best["failures"]),
    }
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"workload {a.workload} ({a.threads} threads, {a.ops} ops/thread), design {a.design}")
    print(f"  best of             {a.repeat}")
    print(f"  crash instants      {out['instants']} ({a.crash}), {len(best['failures'])} failing")
    print(f"  recovery runs       {out['recovery_runs']}" + (" (recovery off)" if a.no_recovery else ""))
    print(f"  piece runs          {out['piece_runs']} (the recovery's memoised pieces, whole runs included)")
    print(f"  reference run       {out['setup_s']:.3f} s (full run, checker graph)")
    print(f"  checking            {check_s:.3f} s, {out['check_instants_per_s']:,.0f} instants/s")
    print(f"  instants / s        {out['instants_per_s']:,.0f}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from pmsim import _core

    if a.crash:
        return _bench_crash(a)
    if a.no_recovery:
        raise PmsimError("--no-recovery applies to --crash only (the timing benchmark runs no recovery)")
    params = {"threads": str(a.threads), "ops": str(a.ops)}
    designs = [d for d, _ in _core.designs()] if a.design == "all" else [a.design]
    results = json.loads(
        _core.bench(
            designs,
            workload=a.workload,
            params=params,
            config=a.config,
            overrides=_kv(a.set, "--set"),
            repeat=a.repeat,
        )
    )
    if a.json:
        print(json.dumps(results if a.design == "all" else results[0], indent=2))
        return 0
    first = results[0]
    print(f"workload {a.workload} ({a.threads} threads, {a.ops} ops/thread), best of {a.repeat}")
    print(f"  trace events        {first['trace_events']}")
    print(f"  simulated cores     {first['simulated_cores']}")
    print(f"  generation          {first['generation_s']:.3f} s")
    print(f"  binary decode       {first['decode_events_per_s']:,.0f} events/s")
    for r in results:
        print(f"design {r['design']}")
        print(f"  engine events       {r['engine_events']}")
        print(f"  simulation          {r['sim_s']:.3f} s wall, {r['sim_cpu_s']:.3f} s CPU")
        print(f"  trace events / s    {r['events_per_s']:,.0f} (per CPU second {r['events_per_cpu_s']:,.0f})")
    print(f"peak RSS              {results[-1]['peak_rss_bytes'] / 2**20:.0f} MiB")
    return 0


def cmd_crash(a: argparse.Namespace) -> int:
    from pmsim import _core

    params = _kv(a.param, "parameter")
    if a.trace and params:
        raise PmsimError(f"-p {', '.join(sorted(params))}: workload parameters do not apply to --trace")
    inputs = _core_inputs(a, params)
    at = [api.parse_instant(x) for x in a.at] if a.at else None
    # The bar shows on a terminal only (None), never with -q.
    started = time.perf_counter()
    with api.crash_bar(True if a.quiet else None) as bar:
        out = _core.crash(
            a.design,
            **inputs,
            at=at,
            random=a.random,
            seed=a.seed,
            every=a.every,
            model=a.model,
            allow_broken=a.allow_broken_designs,
            recovery=not a.no_recovery,
            max_failures=a.max_failures,
            progress=bar,
        )
    rep = json.loads(out)
    if a.json:
        print(out)
    else:
        # Host time is printed, never in the JSON report, which is byte-identical on any host.
        host_s = time.perf_counter() - started
        rate = rep["images"] / max(host_s, 1e-9)
        # A trace has no application recovery to run: say so, not "0 recovered" (a tester read
        # that as every recovery failing). The JSON keeps `recovered: 0` (docs/stats.md).
        if a.no_recovery:
            recovered = "application recovery not checked"
        elif getattr(a, "trace", None):
            recovered = "application recovery not checked (a trace has none)"
        elif not rep["recovery_checked"]:
            recovered = (
                "application recovery not checked (it runs at the clients, which pmsim does not crash)"
            )
        else:
            recovered = f"{rep['recovered']} recovered by the application"
        print(
            f"{rep['design']} checked against {rep['model']}: {rep['images']} crash images, "
            f"{rep['consistent']} consistent, {rep['durable']} durable, {recovered} "
            f"({host_s:.2f} s, {rate:,.0f} images/s)"
        )
        for f in rep["failures"]:
            print(f"\ncrash at {f['at_ps']} ps ({f['at_ps'] / 1000:.3f} ns):")
            v = f.get("verdict")
            if v:
                for x in v["violations"]:
                    print("  " + api.describe_violation(x))
            if f.get("recovery_error"):
                print("  application recovery: " + f["recovery_error"])
            if f.get("region_error"):
                print("  remote regions: " + f["region_error"])
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
    from pmsim.experiments import asap, broi

    if a.paper != "asap" and a.config:
        raise PmsimError(f"--config: only 'reproduce asap' runs under a configuration file, not '{a.paper}'")
    if a.paper == "persistency":
        from pmsim.experiments import persistency

        d = persistency.reproduce(out=a.out, scale=a.scale, workers=a.jobs, progress=not a.quiet)
        print(f"wrote {d}/ (table1, fig3-5, PAPER.md)")
        return 0
    if a.paper == "broi":
        broi.reproduce(out=a.out, scale=a.scale, workers=a.jobs, progress=not a.quiet, cache=not a.no_cache)
        return 0
    if a.paper != "asap":
        raise PmsimError(f"unknown paper '{a.paper}' (valid: asap, persistency, broi)")
    asap.reproduce(
        out=a.out,
        scale=a.scale,
        workers=a.jobs,
        progress=not a.quiet,
        cache=not a.no_cache,
        config=a.config,
    )
    return 0


class _Help(argparse.RawDescriptionHelpFormatter):
    """Shows each argument's default when it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        h = action.help or ""
        d = action.default
        if (
            h
            and "%(default)" not in h
            and d not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            h += " (default: %(default)s)"
        return h


def _designs_help() -> str:
    try:
        return ", ".join(d for d, _ in api.designs())
    except Exception:  # noqa: BLE001 - help must render even if the core is broken
        return "see 'pmsim designs'"


# -j's default (sweep.default_workers): the CPUs pmsim may run on, not the host's.
_JOBS_DEFAULT = "(default: one per CPU this process may run on: its affinity, e.g. taskset or a Slurm cpuset)"

EXIT_CODES = """exit status: 0 ok; 1 a finding (a crash-check violation); 2 bad input or usage;
3 internal error (a bug in pmsim: one line and a hint to report it; --debug shows the traceback)"""


def _add_input(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument(
        "--trace",
        action=_Once,
        type=_path,
        metavar="FILE",
        help="trace file, text or binary by content (a pipe like /dev/stdin works)",
    )
    g.add_argument(
        "--workload", action=_Once, metavar="NAME", help="built-in workload (see 'pmsim workloads')"
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="workload parameter, repeatable (ranges: 'pmsim workloads')",
    )


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        action=_Once,
        type=_path,
        metavar="FILE",
        help="TOML machine configuration (see configs/asap-table2.toml); give it once",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="override a machine parameter, repeatable (e.g. pm.write_ns=120; 'pmsim config show')",
    )


def _add_design(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument(
        "--design",
        action=_Once,
        required=required,
        metavar="NAME",
        help=f"persistency design: {_designs_help()}",
    )


def _sub(sub, name: str, help_: str, description: str | None = None) -> argparse.ArgumentParser:
    sp = sub.add_parser(
        name, help=help_, description=description or help_, epilog=EXIT_CODES, formatter_class=_Help
    )
    sp.set_defaults(_prog=sp.prog)  # the help an unrecognized argument points at (_Parser)
    return sp


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="pmsim",
        description="Simulate persistent-memory ordering hardware, crash it, and check it recovers.",
        epilog=EXIT_CODES,
        formatter_class=_Help,
    )
    p.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    r = _sub(sub, "run", "simulate one trace or workload under one design")
    _add_input(r)
    _add_design(r)
    _add_config(r)
    r.add_argument(
        "-o",
        "--output",
        action=_Once,
        type=_nonempty,
        metavar="FILE",
        help="write the stats JSON here (folders are created)",
    )
    r.add_argument("--json", action="store_true", help="print the stats JSON instead of a summary")
    r.add_argument("--allow-broken-designs", action="store_true", help=argparse.SUPPRESS)
    r.add_argument("--allow-incomplete", action="store_true", help="accept a trace marked incomplete")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress bar (shown on a terminal only)")
    r.set_defaults(fn=cmd_run)

    c = _sub(sub, "compare", "one workload (or a trace) under every design, as a table")
    cw = c.add_mutually_exclusive_group()
    cw.add_argument(
        "--workload", default="array", metavar="NAME", help="built-in workload ('pmsim workloads')"
    )
    cw.add_argument(
        "--trace", action=_Once, type=_path, metavar="FILE", help="a trace file instead of a workload"
    )
    c.add_argument("--allow-incomplete", action="store_true", help="accept a trace marked incomplete")
    c.add_argument(
        "-p", "--param", action="append", metavar="NAME=VALUE", help="workload or machine parameter"
    )
    c.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="machine parameter (e.g. pm.write_ns=120)"
    )
    c.add_argument(
        "--config",
        action=_Once,
        type=_path,
        metavar="FILE",
        help="TOML machine configuration every run starts from (--set applies on top); give it once",
    )
    c.add_argument(
        "--designs", metavar="A,B,...", help=f"comma-separated designs (default: all: {_designs_help()})"
    )
    c.add_argument(
        "-j",
        "--jobs",
        type=_int_at_least(1),
        help=f"parallel runs {_JOBS_DEFAULT}",
    )
    c.add_argument(
        "-o",
        "--output",
        action=_Once,
        type=_nonempty,
        metavar="FILE",
        help="write the table: .csv, .parquet or .json (any case); no suffix: CSV",
    )
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(fn=cmd_compare)

    s = _sub(
        sub,
        "sweep",
        "designs x workloads x parameter grid, in parallel",
        "designs x workloads x parameter grid, in parallel. Each run's result is cached (under\n"
        "~/.cache/pmsim or $PMSIM_CACHE), so an interrupted sweep restarted picks up where it stopped.",
    )
    s.add_argument("--designs", required=True, metavar="A,B,...", help=f"comma-separated: {_designs_help()}")
    s.add_argument(
        "--workloads", required=True, metavar="A,B,...", help="comma-separated ('pmsim workloads')"
    )
    s.add_argument(
        "--grid",
        action="append",
        metavar="NAME=V1,V2,...",
        help="a parameter's values, repeatable (cartesian)",
    )
    s.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="fixed workload parameter")
    s.add_argument("--set", action="append", metavar="NAME=VALUE", help="fixed machine parameter")
    s.add_argument(
        "--config",
        action=_Once,
        type=_path,
        metavar="FILE",
        help="TOML machine configuration every run starts from (--set applies on top); give it once",
    )
    s.add_argument(
        "-j",
        "--jobs",
        type=_int_at_least(1),
        help=f"local parallel runs {_JOBS_DEFAULT}",
    )
    s.add_argument("--scheduler", metavar="ADDR", help="Dask scheduler address (tcp://host:8786)")
    s.add_argument(
        "--cluster",
        choices=["local", "slurm", "pbs"],
        help="start a Dask cluster (slurm/pbs via dask-jobqueue)",
    )
    s.add_argument("--cluster-jobs", type=_int_at_least(1), help="workers of --cluster (default 4)")
    s.add_argument(
        "-o",
        "--output",
        action=_Once,
        type=_nonempty,
        metavar="FILE",
        help="write the rows: .csv, .parquet or .json (one object per row; any case); no suffix: CSV",
    )
    s.add_argument(
        "--no-cache", action="store_true", help="rerun every run instead of reusing cached results"
    )
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(fn=cmd_sweep)

    t = _sub(sub, "trace", "convert, inspect or generate traces")
    tsub = t.add_subparsers(dest="trace_cmd", required=True, metavar="SUBCOMMAND")
    tc = _sub(tsub, "convert", "text <-> binary, lossless")
    tc.add_argument("src", type=_path, help="trace to read (text or binary, by content)")
    tc.add_argument("dst", type=_nonempty, help="file to write")
    tc.add_argument(
        "--to",
        choices=["binary", "text"],
        help="output format (default: text for .trace/.txt in any case, else binary)",
    )
    tc.add_argument("--no-compress", action="store_true", help="binary output without LZ4 blocks")
    ts = _sub(tsub, "stats", "events by kind and thread, PM stores, epochs, bytes")
    ts.add_argument("file", nargs="?", type=_path, help="trace file (or give --workload)")
    ts.add_argument("--workload", metavar="NAME", help="a built-in workload's trace instead of a file")
    ts.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="workload parameter")
    ts.add_argument("--json", action="store_true", help="print JSON")
    tr = _sub(tsub, "record", "run a program built with 'pmsim trace cc' and record its trace")
    tr.add_argument(
        "--pm", default="heap", metavar="SPEC", help="what is PM: heap | dax:DIR | pmdk | range:ADDR:SIZE"
    )
    tr.add_argument(
        "--volatile", choices=["keep", "drop"], default="keep", help="keep or drop non-PM accesses"
    )
    tr.add_argument(
        "--compute",
        choices=["count", "drop"],
        default="count",
        help="count: the non-memory instructions between accesses become 'compute N' events, so the "
        "simulation times the program's computation; drop: only accesses, fences and flushes",
    )
    tr.add_argument(
        "-o",
        "--output",
        action=_Once,
        required=True,
        type=_nonempty,
        metavar="FILE",
        help=".trace or .txt (any case) for text, else binary",
    )
    tr.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS")
    _sub(tsub, "cc", "C compiler wrapper (clang + tracer): pmsim trace cc [gcc flags]")
    _sub(tsub, "c++", "C++ compiler wrapper (clang++ + tracer): pmsim trace c++ [gcc flags]")
    tl = _sub(
        tsub,
        "lint",
        "the PM stores a legacy x86 trace never made persistent (exit 1 if any), redundant "
        "flushes, empty fences",
    )
    tl.add_argument("file", type=_path, help="trace file (a program's, from 'pmsim trace record')")
    tl.add_argument(
        "--max",
        type=_int_at_least(0, 1_000_000),
        default=10,
        metavar="N",
        help="name at most N unpersisted stores, N late ones and N of the lock words'",
    )
    tl.add_argument("--json", action="store_true", help="print JSON")
    tl.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="lint a trace marked incomplete (a program that crashed)",
    )
    tg = _sub(tsub, "gen", "write a workload's trace to a file")
    tg.add_argument("--workload", required=True, metavar="NAME", help="built-in workload ('pmsim workloads')")
    tg.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="workload parameter")
    tg.add_argument(
        "-o",
        "--output",
        action=_Once,
        required=True,
        type=_nonempty,
        metavar="FILE",
        help="output: .trace/.txt (any case) text, anything else binary",
    )
    tg.add_argument("--no-compress", action="store_true", help="binary output without LZ4 blocks")
    t.set_defaults(fn=cmd_trace)

    cf = _sub(sub, "config", "machine configuration")
    csub = cf.add_subparsers(dest="config_cmd", required=True, metavar="SUBCOMMAND")
    cs = _sub(csub, "show", "print the effective configuration with units, ranges and defaults (valid TOML)")
    _add_config(cs)
    cf.set_defaults(fn=cmd_config)

    _sub(sub, "designs", "list designs").set_defaults(fn=cmd_designs)
    _sub(sub, "workloads", "list workloads and their parameters (default, unit, range)").set_defaults(
        fn=cmd_workloads
    )

    b = _sub(sub, "bench", "simulated trace events per host second")
    b.add_argument("--workload", default="array", metavar="NAME", help="built-in workload")
    b.add_argument(
        "--design", default="baseline", metavar="NAME", help=f"design, or 'all': {_designs_help()}"
    )
    b.add_argument("--threads", type=_int_at_least(1, 64), default=4, help="threads")
    b.add_argument("--ops", type=_int_at_least(1), default=50000, help="operations per thread")
    b.add_argument("--repeat", type=_int_at_least(1), default=3, help="runs; the best is reported")
    b.add_argument(
        "--json",
        action="store_true",
        help="print JSON: one object (a list of objects with --design all; with --crash: instants_per_s); "
        "docs/performance.md",
    )
    b.add_argument(
        "--crash",
        metavar="MODE",
        help=f"measure crash checking instead: random:N (N from 1 to {api.MAX_RANDOM_INSTANTS}) or every "
        "instants, crash instants per host second",
    )
    b.add_argument("--no-recovery", action="store_true", help="with --crash: skip the workload's recovery")
    _add_config(b)
    b.set_defaults(fn=cmd_bench)

    cr = _sub(
        sub,
        "crash",
        "crash a run and check every crash image (exit 1 on a violation)",
        "Crash a run at given, random or every state-changing instant and check each crash image\n"
        "against the design's persistency model and the workload's own recovery.",
    )
    _add_input(cr)
    _add_design(cr)
    _add_config(cr)
    mode = cr.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--at", action="append", metavar="T", help="crash instant (ps, or 120ns / 3.5us / 1ms); repeatable"
    )
    mode.add_argument(
        "--random",
        type=_random_count,
        metavar="N",
        help=f"N seeded random instants over the run, 1 to {api.MAX_RANDOM_INSTANTS} (they are kept in "
        "memory; --every checks exhaustively)",
    )
    mode.add_argument(
        "--every",
        action="store_true",
        help="every instant the persistent state changes or a dfence completes (exhaustive)",
    )
    cr.add_argument("--seed", type=_int_at_least(0, U64_MAX), default=1, help="seed of --random")
    cr.add_argument(
        "--model",
        choices=["ep", "rp", "strict", "x86"],
        help="check against this model (default: the design's promise; baseline promises x86 on traces of "
        "clwb/sfence programs)",
    )
    cr.add_argument("--no-recovery", action="store_true", help="skip the workload's own recovery check")
    cr.add_argument(
        "--max-failures",
        type=_int_at_least(1, U64_MAX),
        default=10,
        help="stop after this many failing images",
    )
    cr.add_argument("--json", action="store_true", help="print the report as JSON")
    cr.add_argument("--allow-broken-designs", action="store_true", help=argparse.SUPPRESS)
    cr.add_argument("--allow-incomplete", action="store_true", help="accept a trace marked incomplete")
    cr.add_argument("-q", "--quiet", action="store_true", help="no progress bar (shown on a terminal only)")
    cr.set_defaults(fn=cmd_crash)

    pf = _sub(sub, "profile", "persist profile of the workloads (stores, epochs, dependencies)")
    pf.add_argument("--workloads", metavar="A,B,...", help="comma-separated (default: all)")
    pf.add_argument("--threads", type=_int_at_least(1, 64), default=4, help="threads per workload")
    pf.add_argument("--ops", type=_int_at_least(1), default=1000, help="operations per thread")
    pf.add_argument("--out", type=_nonempty, metavar="DIR", help="write persist_profile.csv and a plot here")
    pf.add_argument(
        "-j",
        "--jobs",
        type=_int_at_least(1),
        help=f"parallel runs {_JOBS_DEFAULT}",
    )
    pf.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    pf.set_defaults(fn=cmd_profile)

    from pmsim.analysis import add_parser as add_analyze

    add_analyze(sub)

    rp = _sub(
        sub,
        "reproduce",
        "reproduce a paper's evaluation as tables and plots",
        "Reproduce a paper's evaluation: runs every figure's simulations (cached, so an interrupted\n"
        "reproduction restarted picks up where it stopped), then writes each figure as CSV, Markdown\n"
        "and PNG, all runs as runs.csv and runs.parquet, and NOTES.txt, under OUT/PAPER/\n"
        "(asap --config F.toml: OUT/asap-F/, so a configuration's results never replace the defaults').",
    )
    rp.add_argument(
        "paper",
        nargs="?",
        default="asap",
        choices=["asap", "persistency", "broi"],
        help="which paper (default: asap)",
    )
    rp.add_argument(
        "--scale",
        choices=["quick", "full"],
        default="quick",
        help="quick: small runs (about a minute); full: the paper's sizes",
    )
    rp.add_argument(
        "--out",
        default="results",
        type=_nonempty,
        metavar="DIR",
        help="output folder (results go to DIR/PAPER/; DIR/asap-F/ with --config F.toml)",
    )
    rp.add_argument(
        "--config",
        action=_Once,
        type=_path,
        metavar="FILE",
        help="asap only: run the whole evaluation under this TOML machine configuration "
        "(e.g. configs/asap-artifact.toml)",
    )
    rp.add_argument(
        "-j",
        "--jobs",
        type=_int_at_least(1),
        help=f"parallel runs {_JOBS_DEFAULT}",
    )
    rp.add_argument(
        "--no-cache", action="store_true", help="rerun every run instead of reusing cached results"
    )
    rp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    rp.set_defaults(fn=cmd_reproduce)
    return p


def _fail(msg: str) -> int:
    """One line on stderr, exit status 2 (messages from the core may span lines: join them)."""
    one = "; ".join(part.strip() for part in msg.splitlines() if part.strip())
    print(f"pmsim: error: {one}", file=sys.stderr)
    return 2


REPORT_HINT = (
    "this is a bug in pmsim: please report it with the command line (rerun with --debug for details)"
)


def _ignore_further_interrupts() -> None:
    """After a Ctrl-C the program only exits: another Ctrl-C (the impatient second one) must
    not turn exit 130 into a traceback or a death by SIGINT while Python tears down, which with
    pandas loaded takes about half a second."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


# How the core words a write into a pipe whose reader has gone (Rust's io::Error for EPIPE).
_EPIPE_TEXT = f"{os.strerror(errno.EPIPE)} (os error {errno.EPIPE})"


def _is_broken_pipe(e: PmsimError) -> bool:
    """A core error that is a write into a closed pipe (``pmsim trace convert X /dev/stdout |
    head``); the core names the file it was converting, so it read as bad input."""
    return str(e).rstrip().endswith(_EPIPE_TEXT)


def _broken_pipe() -> int:
    """`pmsim ... | head`: the reader is done; stop quietly, as Unix tools do (exit 0, no
    message), and keep the final flush of stdout quiet too."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


_no_stderr = False
_no_stdout = False
# What names this process' standard output as a file to write.
_STDOUT_PATHS = ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


class _ClosedStdout:
    """``sys.stdout`` when the process has none (``>&-``): data written there is refused (exit 2,
    as Unix tools report a write error) rather than lost without a word."""

    def write(self, _text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed (>&-): nowhere to write the result")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return 1  # /dev/null holds it (below)


def _hold_with_devnull(fd: int) -> None:
    """/dev/null as descriptor ``fd`` of a closed standard stream, so that the next file opened
    does not take it."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


def _sane_std_streams() -> None:
    """The ``pmsim`` process' standard streams as its messages need them. Closed stderr
    (``2>&-``): Python leaves ``sys.stderr`` None (a progress bar then failed, and ``print``
    sends an error message to stdout), and the next file opened takes descriptor 2, where the
    core's messages would go: /dev/null takes it. Messages in a locale that cannot encode some
    of their characters (Latin-1 and '—'): escaped, not a failure."""
    global _no_stderr, _no_stdout
    if sys.stdout is None:
        # /dev/null holds descriptor 1, or the next file opened (an output) would take it and
        # `-o /dev/stdout` write into that file; messages go to stderr, data is refused.
        _no_stdout = True
        _hold_with_devnull(1)
        sys.stdout = _ClosedStdout()
    if sys.stderr is None:
        _no_stderr = True
        _hold_with_devnull(2)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - the process' own stderr
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    """Runs one command. Exit status: 0 ok, 1 a finding (a crash-check violation), 2 bad input
    or usage, 3 internal error (one line and a hint to report it; --debug shows the traceback)."""
    as_program = argv is None  # the `pmsim` command, not a caller in this process
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["trace"] and argv[1:2] in (["cc"], ["c++"]):
        # Compiler wrappers take gcc-style flags verbatim (not argparse's).
        from pmsim import tracer

        try:
            return tracer.cmd_compile(argv[1], argv[2:])
        except PmsimError as e:
            return _fail(str(e))
    if as_program:
        _sane_std_streams()
    args = parser().parse_args(argv)
    if _no_stdout:
        own = (*_STDOUT_PATHS, f"/proc/{os.getpid()}/fd/1")
        named = [v for v in vars(args).values() if isinstance(v, str) and os.path.normpath(v) in own]
        if named:
            return _fail(f"{named[0]}: standard output is closed (>&-); write to a file instead")
    if _no_stderr and hasattr(args, "quiet"):
        args.quiet = True  # no stderr to draw a progress bar on
    if args.debug:
        # The core's panic hook then prints where a panic happened (and, under RUST_BACKTRACE,
        # its backtrace); without it an internal error is the one line below.
        os.environ["PMSIM_DEBUG"] = "1"
    from pmsim.sweep import Terminated

    try:
        if getattr(args, "config", None) is not None:
            # Every command's --config the same way, before any work: what is not a TOML file to
            # read (a folder, a FIFO, /dev/zero, which the core read without end) is refused.
            api.check_config_file(args.config)
        return args.fn(args)
    except PmsimError as e:
        if _is_broken_pipe(e):
            return _broken_pipe()
        if args.debug:
            raise
        return _fail(str(e))
    except BrokenPipeError:
        return _broken_pipe()
    except Terminated as e:  # `kill PID` of a parallel sweep: its workers are stopped
        print(f"pmsim: {e.what}", file=sys.stderr)
        return e.code
    except OSError as e:  # files we write ourselves (-o, --out), Dask connections
        where = f"{e.filename}: " if e.filename else ""
        return _fail(f"{where}{e.strerror or e}")
    except KeyboardInterrupt:
        print("pmsim: interrupted", file=sys.stderr)
        if as_program:
            _ignore_further_interrupts()
        return 130
    except UnicodeEncodeError as e:
        if args.debug or not isinstance(e.object, str) or "surrogates" not in e.reason:
            raise
        # A path made here (the current folder, a cache folder) that is not UTF-8, which the core
        # cannot take: the paths given were checked when parsed.
        return _fail(f"{api.utf8_path_problem(e.object) or api.shown_path(e.object)}")
    except BaseException as e:  # noqa: BLE001 - includes Rust panics (pyo3 PanicException)
        if isinstance(e, SystemExit) or args.debug:
            raise
        one = "; ".join(part.strip() for part in str(e).splitlines() if part.strip())
        print(f"pmsim: internal error: {type(e).__name__}: {one} ({REPORT_HINT})", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
