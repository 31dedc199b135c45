#!/usr/bin/env python3
"""Real PM programs against pmsim's built-in models of them, per operation.

Why it exists: the built-in workloads reimplement the papers' benchmarks; this measures how far
their operations are from the real programs' (instructions, loads, PM stores, lines flushed,
simulated time under eADR and the baseline, default and artifact configurations), with both
traced and simulated by pmsim. docs/asap-results.md ("Real programs against the built-in
models") shows its output.

    python3 tools/tracer/real/compare.py --cceh DIR --fastfair DIR [--threads 4]

DIR is a checkout of DICL/CCEH or DICL/FAST_FAIR (not shipped with pmsim). Each program is built
with `pmsim trace c++` and this folder's driver (N inserts of random keys by T threads), traced
with `--pm heap --volatile keep`, at two sizes; every number is the difference of the two runs
divided by the difference of their operations, so start-up cancels. Needs clang (see
scripts/setup-tracer.sh).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARTIFACT = HERE.parents[2] / "configs" / "asap-artifact.toml"


def _json(args: list[str]) -> dict:
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def _sim(trace: Path, design: str, config: Path | None) -> dict:
    args = ["pmsim", "run", "--trace", str(trace), "--design", design, "--json"]
    return _json(args + (["--config", str(config)] if config else []))


def measure(name: str, traces: list[Path], ops: list[int], threads: int) -> dict:
    dn = ops[1] - ops[0]
    st = [_json(["pmsim", "trace", "stats", str(t), "--json"]) for t in traces]
    row: dict = {"program": name}
    for key, label in (
        ("compute_instructions", "instructions"),
        ("loads", "loads"),
        ("pm_stores", "pm_stores"),
    ):
        row[label] = round((st[1][key] - st[0][key]) / dn, 1)
    for cfg_name, cfg in (("default", None), ("artifact", ARTIFACT)):
        for design in ("baseline", "eadr", "asap-rp"):
            runs = [_sim(t, design, cfg) for t in traces]
            # Simulated ns per operation per thread.
            row[f"{cfg_name}_{design}_ns"] = round(
                (runs[1]["sim_time_ns"] - runs[0]["sim_time_ns"]) / dn * threads
            )
            if design == "baseline" and cfg_name == "default":
                row["lines_flushed"] = round(
                    (runs[1]["design_stats"]["clwbs"] - runs[0]["design_stats"]["clwbs"]) / dn, 1
                )
        row[f"{cfg_name}_eadr_over_baseline"] = round(
            row[f"{cfg_name}_baseline_ns"] / row[f"{cfg_name}_eadr_ns"], 2
        )
    return row


def real(name: str, build: list[str], src: Path, work: Path, ops: list[int], threads: int) -> dict:
    exe = work / f"{name}-driver"
    subprocess.run(["pmsim", "trace", "c++", *build, "-o", str(exe)], cwd=src, check=True)
    traces = []
    for n in ops:
        t = work / f"{name}-{n}.bin"
        subprocess.run(
            ["pmsim", "trace", "record", "--pm", "heap", "--volatile", "keep", "-o", str(t), "--",
             str(exe), str(n), str(threads)],
            check=True, capture_output=True,
        )  # fmt: skip
        traces.append(t)
    return measure(f"{name} (real)", traces, ops, threads)


def builtin(name: str, work: Path, ops: list[int], threads: int) -> dict:
    traces = []
    for n in ops:
        t = work / f"builtin-{name}-{n}.bin"
        subprocess.run(
            ["pmsim", "trace", "gen", "--workload", name, "-p", f"ops={n // threads}",
             "-p", f"threads={threads}", "-o", str(t)],
            check=True, capture_output=True,
        )  # fmt: skip
        traces.append(t)
    return measure(f"{name} (built-in)", traces, ops, threads)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cceh", type=Path, help="a DICL/CCEH checkout")
    ap.add_argument("--fastfair", type=Path, help="a DICL/FAST_FAIR checkout")
    ap.add_argument("--threads", type=int, default=4)
    a = ap.parse_args()
    if not a.cceh and not a.fastfair:
        ap.error("give --cceh DIR and/or --fastfair DIR")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if a.cceh:
            build = [
                "-std=c++17",
                "-O3",
                "-I.",
                "-DINPLACE",
                "-pthread",
                str(HERE / "cceh_driver.cpp"),
                "src/CCEH_MSB.cpp",
            ]
            rows.append(real("cceh", build, a.cceh, work, [20000, 40000], a.threads))
            rows.append(builtin("cceh", work, [8000, 16000], a.threads))
        if a.fastfair:
            build = ["-std=c++14", "-O2", "-Iconcurrent/src", "-pthread", str(HERE / "fastfair_driver.cpp")]
            rows.append(real("fastfair", build, a.fastfair, work, [20000, 40000], a.threads))
            rows.append(builtin("fastfair", work, [8000, 16000], a.threads))
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
