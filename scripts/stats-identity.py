#!/usr/bin/env python3
"""Prove a refactor or an optimisation changed nothing simulated.

Every workload x design at a small fixed size is generated, simulated and crash-checked by the
`pmsim` on PATH (or `--pmsim CMD`), and the results land in one folder: the trace's SHA-256, the
stats JSON and the crash report JSON (with the workload's recovery) per pair. Two folders made
by two builds must be byte-identical; `check` does the whole round trip against a git revision
(default `main`), building that revision once into `target/stats-identity/<sha>/` and reusing it.

    scripts/stats-identity.py check [--base REV]      # build REV if needed, snapshot both, compare
    scripts/stats-identity.py snapshot DIR [--pmsim CMD]
    scripts/stats-identity.py compare DIR_A DIR_B

Host-side fields are dropped before comparing: the stats' `engine_events` (how many discrete
events the engine processed: simulator work, which optimisations may change) and the crash
report's `host_seconds` (in builds before it left the report). Every other byte must match.

Exit status: 0 identical, 1 a difference (each differing file is named), 2 usage or a failed run.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import filecmp
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGNS = ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"]
# Small enough that the whole snapshot takes about a minute on 2 cores, large enough that every
# workload issues conflicts, fences and (for the RDMA clients) remote writes.
SIZE = ["-p", "threads=4", "-p", "ops=150"]
CRASH_DESIGNS = ["baseline", "hops-rp", "asap-rp", "eadr"]
CRASH = ["--random", "40", "--seed", "7"]
# Machine configurations every pair also runs under, so non-default paths are covered too.
CONFIGS = {"default": [], "artifact": ["--config", str(ROOT / "configs/asap-artifact.toml")]}


def die(msg: str) -> None:
    print(f"stats-identity: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def workloads(pmsim: list[str]) -> list[str]:
    out = run([*pmsim, "workloads"])
    if out.returncode != 0:
        die(f"`{' '.join(pmsim)} workloads` failed: {out.stderr.strip()}")
    return [line.split(":")[0] for line in out.stdout.splitlines() if line and not line[0].isspace()]


def without_host_fields(stats_json: str) -> str:
    """The stats JSON without `engine_events`: it counts the engine's own work (a host-side
    counter that optimisations may change), not anything simulated."""
    stats = json.loads(stats_json)
    stats.pop("engine_events", None)
    return json.dumps(stats, indent=2) + "\n"


def same_file(a: Path, b: Path) -> bool:
    if a.name.endswith(".stats.json"):
        # Normalised again so snapshots written before engine_events was dropped still compare.
        try:
            return without_host_fields(a.read_text()) == without_host_fields(b.read_text())
        except (OSError, ValueError):
            pass
    return filecmp.cmp(a, b, shallow=False)


def one_job(pmsim: list[str], out: Path, kind: str, workload: str, design: str, cfg: str) -> str:
    """Run one job; return an error text, or "" when its output file was written."""
    name = f"{workload}__{design}__{cfg}"
    if kind == "trace":
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "t.trace"  # text: what every build writes for .trace
            res = run([*pmsim, "trace", "gen", "--workload", workload, *SIZE, "-o", str(path)])
            if res.returncode != 0:
                return f"trace gen {workload}: {res.stderr.strip()}"
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        (out / f"{workload}.trace.sha256").write_text(digest + "\n")
        return ""
    if kind == "run":
        res = run([*pmsim, "run", "--workload", workload, *SIZE, "--design", design, *CONFIGS[cfg], "--json"])
        if res.returncode != 0:
            return f"run {name}: {res.stderr.strip()}"
        (out / f"{name}.stats.json").write_text(without_host_fields(res.stdout))
        return ""
    res = run([*pmsim, "crash", "--workload", workload, *SIZE, "--design", design, *CRASH, "--json"])
    if res.returncode not in (0, 1):
        return f"crash {name}: {res.stderr.strip()}"
    # Older builds' reports had host_seconds, a host measurement, not the simulation's.
    report = json.loads(res.stdout)
    report.pop("host_seconds", None)
    (out / f"{name}.crash.json").write_text(json.dumps(report, sort_keys=True) + "\n")
    return ""


def snapshot(out: Path, pmsim: list[str], jobs: int) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    names = workloads(pmsim)
    todo = [("trace", w, "", "") for w in names]
    todo += [("run", w, d, c) for w in names for d in DESIGNS for c in CONFIGS]
    todo += [("crash", w, d, "default") for w in names for d in CRASH_DESIGNS]
    errors = []
    with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one_job, pmsim, out, *job) for job in todo]
        for i, fut in enumerate(cf.as_completed(futures), 1):
            if err := fut.result():
                errors.append(err)
            if sys.stderr.isatty() and (i % 10 == 0 or i == len(todo)):
                print(f"\r  {i}/{len(todo)} runs", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if errors:
        # Kept so a failing pair is as comparable as a passing one (the other build may fail too).
        (out / "errors.txt").write_text("\n".join(sorted(errors)) + "\n")
    print(f"snapshot: {len(todo)} results in {out}" + (f" ({len(errors)} failed runs)" if errors else ""))


def compare(a: Path, b: Path) -> int:
    for d in (a, b):
        if not d.is_dir():
            die(f"{d} is not a snapshot folder")
    fa = sorted(p.name for p in a.iterdir())
    fb = sorted(p.name for p in b.iterdir())
    missing = sorted(set(fa) ^ set(fb))
    mismatch = [n for n in sorted(set(fa) & set(fb)) if not same_file(a / n, b / n)]
    bad = sorted(missing + mismatch)
    for name in bad:
        print(f"differs: {name}")
    if bad:
        print(f"{len(bad)} of {len(set(fa) | set(fb))} results differ ({a} vs {b})")
        return 1
    print(f"identical: {len(fa)} results ({a} vs {b})")
    return 0


def build_base(rev: str) -> list[str]:
    """A venv with `rev`'s pmsim, built once per commit into target/stats-identity/<sha>/."""
    sha = run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"])
    if sha.returncode != 0:
        die(f"unknown revision {rev!r}")
    sha = sha.stdout.strip()
    home = ROOT / "target" / "stats-identity" / sha[:12]
    exe = home / "venv" / "bin" / "pmsim"
    if exe.exists():
        return [str(exe)]
    src = home / "src"
    if src.exists():
        shutil.rmtree(src)
    home.mkdir(parents=True, exist_ok=True)
    print(f"building {rev} ({sha[:12]}) into {home} (once; a few minutes)", file=sys.stderr)
    subprocess.run(
        f"git -C {shlex.quote(str(ROOT))} archive {sha} --prefix=src/ | tar -x -C {shlex.quote(str(home))}",
        shell=True,
        check=True,
    )
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(home / "venv")], check=True)
    env = dict(os.environ, CARGO_TARGET_DIR=str(home / "cargo-target"))
    pip = [str(home / "venv" / "bin" / "python"), "-m", "pip", "install", "--no-deps", "-q", str(src)]
    if subprocess.run(pip, env=env).returncode != 0:
        die(f"building {rev} failed")
    return [str(exe)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot", help="simulate everything into DIR")
    s.add_argument("dir", type=Path)
    s.add_argument("--pmsim", default="pmsim", help="command that runs pmsim (default: pmsim on PATH)")
    s.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    c = sub.add_parser("compare", help="compare two snapshot folders byte by byte")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    k = sub.add_parser("check", help="snapshot the base revision and the current pmsim, compare")
    k.add_argument("--base", default="main", help="git revision to compare against (default: main)")
    k.add_argument("--pmsim", default="pmsim", help="command that runs the changed pmsim")
    k.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    if args.cmd == "snapshot":
        snapshot(args.dir, shlex.split(args.pmsim), args.jobs)
        return 0
    if args.cmd == "compare":
        return compare(args.a, args.b)
    base = build_base(args.base)
    out = ROOT / "target" / "stats-identity"
    snapshot(out / "base", base, args.jobs)
    snapshot(out / "new", shlex.split(args.pmsim), args.jobs)
    return compare(out / "base", out / "new")


if __name__ == "__main__":
    sys.exit(main())
