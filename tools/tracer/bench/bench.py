"""Tracing overhead: native vs traced wall time, and trace events written per second.

Run from a checkout with pmsim installed:   python3 tools/tracer/bench/bench.py [--keys N]

Builds tools/tracer/bench/pm_hash.c and examples/pm_list.c natively (clang -O2, no plugin) and
traced (pmsim trace cc -O2), runs each (best of --repeat), and records the traced run to a binary
trace (and, with --text, to a text trace). Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PMSIM = [sys.executable, "-m", "pmsim.cli"]


def best(cmd: list[str], repeat: int, env: dict | None = None) -> float:
    t = []
    for _ in range(repeat):
        if env and "PMSIM_TRACE_OUT" in env:  # the runtime traces only into a file it creates
            Path(env["PMSIM_TRACE_OUT"]).unlink(missing_ok=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        t.append(time.perf_counter() - t0)
    return min(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=300000, help="pm_hash inserts per thread")
    ap.add_argument("--nodes", type=int, default=20000, help="pm_list nodes per thread")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--text", action="store_true", help="also time text output")
    a = ap.parse_args()
    progs = [
        ("pm_hash", REPO / "tools/tracer/bench/pm_hash.c", [str(a.keys)]),
        ("pm_list", REPO / "examples/pm_list.c", [str(a.nodes)]),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for name, src, args in progs:
            native, traced = d / f"{name}.native", d / f"{name}.traced"
            flags = ["-O2", "-mclwb", "-pthread"]
            subprocess.run(["clang", *flags, "-o", native, src], check=True)
            subprocess.run([*PMSIM, "trace", "cc", *flags, "-o", traced, src], check=True)
            tn = best([str(native), *args], a.repeat)
            outs = [("binary", d / f"{name}.bin")] + ([("text", d / f"{name}.trace")] if a.text else [])
            for fmt, out in outs:
                cmd = [
                    *PMSIM,
                    "trace",
                    "record",
                    "--volatile",
                    "keep",
                    "-o",
                    str(out),
                    "--",
                    str(traced),
                    *args,
                ]
                tt = best(cmd, a.repeat)
                st = json.loads(subprocess.run([*PMSIM, "trace", "stats", str(out), "--json"], check=True,
                                               capture_output=True, text=True).stdout)  # fmt: skip
                # The instrumented program alone (no pmsim start-up, no text conversion).
                env = dict(os.environ, PMSIM_TRACE_OUT=str(d / "raw.bin"), PMSIM_TRACE_VOLATILE="keep")
                tp = best([str(traced), *args], a.repeat, env)
                rows.append((name, fmt, tn, tt, tp, st["events"], out.stat().st_size))
    print(
        "| program | output | native s | `pmsim trace record` s | slowdown | program alone s | slowdown "
        "| events | events/s written (program alone) | bytes/event |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, fmt, tn, tt, tp, ev, size in rows:
        print(
            f"| {name} | {fmt} | {tn:.3f} | {tt:.3f} | {tt / tn:.1f}x | {tp:.3f} | {tp / tn:.1f}x | {ev:,} "
            f"| {ev / tp:,.0f} | {size / ev:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
