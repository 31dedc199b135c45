"""Persist critical-path analysis (docs/design.md §8): ``pmsim analyze`` and ``pmsim.analyze``.

The analysis itself is the Rust crate ``pmsim-analysis``: one pass over a trace in global order,
the longest chain of persist ordering constraints under strict, epoch or strand persistency,
with coalescing at the atomic-persist size A and conflicts tracked at granularity G. This module
is its front: arguments, the instruction rate it is normalised to, and the output forms.
"""

from __future__ import annotations

import argparse
import json
import numbers
import os
from typing import Any

from pmsim import PmsimError, _core

COLUMNS = [
    "model",
    "critical_path",
    "persists",
    "ops",
    "critical_path_per_op",
    "persist_bound_ops_per_s",
    "instr_ops_per_s",
    "normalized_rate",
    "atomic_bytes",
    "track_bytes",
    "persist_ns",
    "events",
]


def _strs(d: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (d or {}).items()}


def analyze_reports(
    *,
    trace: str | None = None,
    workload: str | None = None,
    model: str = "strict",
    atomic_bytes: int = 8,
    track_bytes: int = 8,
    persist_ns: float = 500.0,
    instr_ops_per_s: float | None = None,
    config: str | None = None,
    overrides: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    allow_incomplete: bool = False,
) -> list[dict]:
    """The analysis as a list of report dicts, one per model (``model`` may be ``all`` or a
    comma-separated list)."""
    from pmsim.api import path_arg

    trace, config = path_arg("trace", trace), path_arg("config", config)
    persist_ns = _num("persist_ns", persist_ns, "a positive number of ns (the persist latency)")
    if instr_ops_per_s is not None:
        instr_ops_per_s = _num(
            "instr_ops_per_s", instr_ops_per_s, "a positive number of operations per second"
        )
    if trace is not None and params:
        raise PmsimError(f"-p {', '.join(sorted(params))}: workload parameters do not apply to --trace")
    out = _core.analyze(
        trace=trace,
        workload=workload,
        params=_strs(params),
        config=config,
        overrides=_strs(overrides),
        models=str(model),
        atomic_bytes=_int("atomic_bytes", atomic_bytes),
        track_bytes=_int("track_bytes", track_bytes),
        persist_ns=persist_ns,
        instr_ops_per_s=instr_ops_per_s,
        allow_incomplete=bool(allow_incomplete),
    )
    return json.loads(out)


def _size_arg(text: str) -> int:
    """An argparse type: a granularity in bytes, a power of two from 8 to 256 (hex as elsewhere);
    argparse names the option in the message."""
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if not 8 <= v <= 256 or v & (v - 1):
        raise argparse.ArgumentTypeError(f"{v} is not a power of two from 8 to 256 bytes")
    return v


_size_arg.__name__ = "size"


def _num(name: str, v: Any, what: str) -> float:
    """A number argument (the core checks its range); anything else is refused naming it."""
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    raise PmsimError(f"{name} must be {what}, got {v!r}")


def _int(name: str, v: Any) -> int:
    """A size in bytes: the core checks it is a power of two in 8..=256; anything that is not an
    integer (a string too, as every numeric argument of the API), or out of that range (too
    large for the core's u64), is refused here."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v <= 2**64 - 1:
        return int(v)
    raise PmsimError(f"{name} must be a power of two from 8 to 256 bytes, got {v!r}")


def analyze(
    trace: str | os.PathLike | None = None,
    *,
    workload: str | None = None,
    model: str = "strict",
    atomic_bytes: int = 8,
    track_bytes: int = 8,
    persist_ns: float = 500.0,
    instr_ops_per_s: float | None = None,
    config: str | os.PathLike | None = None,
    allow_incomplete: bool = False,
    **params: Any,
):
    """Persist critical path of a trace file or built-in workload under ``model``.

    Returns a dict for one model, a pandas DataFrame (one row per model) for several
    (``model="all"`` or ``"strict,epoch"``). ``params`` mixes workload parameters
    (``threads=8, variant="racing"``) and machine configuration (``core_freq_ghz=3``) for the
    ``eadr`` run that gives the instruction rate when ``instr_ops_per_s`` is not given. A trace
    marked incomplete is refused unless ``allow_incomplete=True``.
    """
    from pmsim.api import (
        A_WORKLOAD,
        bool_arg,
        check_complete,
        check_once,
        check_workload_keywords,
        name_arg,
        path_arg,
    )

    trace = path_arg("trace", trace)
    workload = name_arg("workload", workload, A_WORKLOAD, optional=True)
    model = name_arg("model", model, "a str: strict, epoch, strand, all or a comma-separated list of them")
    allow_incomplete = bool_arg("allow_incomplete", allow_incomplete)
    check_once([("keyword", params)])
    check_complete(trace, allow_incomplete)
    cfg, wl = _core.split_kwargs(_strs(params))
    if trace is not None and wl:
        # The same words as pmsim.run: the API's caller never typed '-p'.
        raise PmsimError(f"unknown parameter(s) for a trace run: {', '.join(sorted(wl))}")
    check_workload_keywords(workload, wl)
    reps = analyze_reports(
        trace=trace,
        workload=workload,
        model=model,
        atomic_bytes=atomic_bytes,
        track_bytes=track_bytes,
        persist_ns=persist_ns,
        instr_ops_per_s=instr_ops_per_s,
        config=config,
        overrides=cfg,
        params=wl,
        allow_incomplete=allow_incomplete,
    )
    if len(reps) == 1:
        return reps[0]
    import pandas as pd

    return pd.DataFrame(reps, columns=COLUMNS)


def _fmt(v: Any) -> str:
    if v is None:
        return "unbounded"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def _instr(v: float | None) -> str:
    return "not needed: no operations" if v is None else f"{_fmt(v)} ops/s"


def render(reps: list[dict]) -> str:
    """A plain-text table of reports."""
    cols = [
        ("model", "model"),
        ("critical_path", "critical path"),
        ("persists", "persists"),
        ("ops", "ops"),
        ("critical_path_per_op", "path/op"),
        ("persist_bound_ops_per_s", "persist-bound ops/s"),
        ("normalized_rate", "normalized"),
    ]
    # Without operations the path stands, but nothing is per operation (null is not "unbounded").
    per_op = {"critical_path_per_op", "persist_bound_ops_per_s", "normalized_rate"}
    rows = [["n/a" if r["ops"] == 0 and k in per_op else _fmt(r.get(k)) for k, _ in cols] for r in reps]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, (_, h) in enumerate(cols)]
    lines = ["  ".join(h.rjust(w) for (_, h), w in zip(cols, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    r0 = reps[0]
    lines.append(
        f"(A = {r0['atomic_bytes']} B, G = {r0['track_bytes']} B, L = {r0['persist_ns']:g} ns, "
        f"instruction rate {_instr(r0.get('instr_ops_per_s'))})"
    )
    return "\n".join(lines)


def _bench(a: argparse.Namespace, params: dict[str, str]) -> int:
    """Events per host second of the analysis alone (a nominal instruction rate skips eadr);
    a workload's trace is generated once into a temporary binary file, which is then streamed."""
    import tempfile
    import time
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        trace = a.trace
        if trace is None:
            trace = str(Path(tmp) / "bench.bin")
            _core.trace_generate(a.workload, params, trace, True, True)
        rows = []
        for model in ("strict", "epoch", "strand", "all"):
            best = None
            for _ in range(3):
                t0 = time.perf_counter()
                r = analyze_reports(
                    trace=trace,
                    model=model,
                    atomic_bytes=a.atomic_bytes,
                    track_bytes=a.track_bytes,
                    instr_ops_per_s=1.0,
                )
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
            ev = r[0]["events"]
            rows.append({"model": model, "events": ev, "host_seconds": best, "events_per_s": ev / best})
            if not a.json:
                print(
                    f"{model:>7}: {ev} events in {best:.3f} s = {ev / best / 1e6:.1f} M events/s (best of 3)"
                )
    if a.json:
        # One object keyed by model, as `analyze --json` over several models.
        print(json.dumps({r["model"]: r for r in rows}))
    return 0


def cmd_analyze(a: argparse.Namespace) -> int:
    from pmsim.api import check_complete
    from pmsim.cli import _kv

    seen: dict[str, str] = {}
    params = _kv(a.param, "parameter", seen)
    overrides = _kv(a.set, "--set", seen)
    check_complete(a.trace, a.allow_incomplete)
    if a.bench:
        return _bench(a, params)
    reps = analyze_reports(
        trace=a.trace,
        workload=a.workload,
        model=a.model,
        atomic_bytes=a.atomic_bytes,
        track_bytes=a.track_bytes,
        persist_ns=a.persist_ns,
        instr_ops_per_s=a.instr_ops_per_s,
        config=a.config,
        overrides=overrides,
        params=params,
        allow_incomplete=a.allow_incomplete,
    )
    if a.json:
        # One model: its report; several: one object keyed by model.
        obj = reps[0] if len(reps) == 1 else {r["model"]: r for r in reps}
        print(json.dumps(obj))
    else:
        print(render(reps))
    return 0


def add_parser(sub: Any) -> None:
    """Registers ``pmsim analyze``."""
    from pmsim.cli import _add_config, _add_input, _sub

    an = _sub(
        sub,
        "analyze",
        "persist critical path under strict/epoch/strand persistency (docs/design.md §8)",
        "Persist critical-path analysis (the Memory Persistency paper's §7): how many persists lie on\n"
        "the longest chain of ordering constraints of a trace or workload under each persistency\n"
        "model, with infinite bandwidth, and the operation rate that bounds.",
    )
    _add_input(an)
    an.add_argument(
        "--model",
        default="strict",
        help="strict, epoch, strand, all, or a comma-separated list (racing epochs: epoch on "
        "a workload's variant=racing)",
    )
    an.add_argument(
        "--atomic-bytes",
        type=_size_arg,
        default=8,
        metavar="A",
        help="atomic persist size in bytes (8..256)",
    )
    an.add_argument(
        "--track-bytes",
        type=_size_arg,
        default=8,
        metavar="G",
        help="tracking granularity in bytes (8..256)",
    )
    an.add_argument("--persist-ns", type=float, default=500.0, metavar="L", help="persist latency in ns")
    an.add_argument(
        "--instr-ops-per-s",
        type=float,
        metavar="R",
        help="instruction execution rate (default: the trace's op rate on the engine under eadr)",
    )
    _add_config(an)
    an.add_argument("--allow-incomplete", action="store_true", help="accept a trace marked incomplete")
    an.add_argument("--json", action="store_true", help="print one JSON object")
    an.add_argument(
        "--bench", action="store_true", help="report the analysis' speed (events per host second) instead"
    )
    an.set_defaults(fn=cmd_analyze, _prog=an.prog)
