"""``pmsim trace lint``: the program's own persistence, end to end through the CLI and the API.

Hand-written legacy traces (text, and binary through ``trace convert``), a design-neutral one,
bad input, and a real C program recorded by the tracer in a correct and a missing-flush variant
(that test needs clang: scripts/setup-tracer.sh).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import PMSIM, pmsim_cli

import pmsim

# T0 persists A (flush + fence), writes B and flushes it without a fence, writes C and never
# flushes it; T1 flushes a line nobody wrote and fences with nothing to order.
LEGACY = """# pmsim trace v1
threads 2
T0 begin put
T0 store 0x100000000 8 1
T0 clwb 0x100000000
T0 sfence
T0 store 0x100000040 8 2
T0 clflushopt 0x100000040
T0 end put
T0 begin put
T0 store 0x100000080 16 0303
T0 end put
T1 clwb 0x100001000
T1 sfence
T1 mfence
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _lint_json(path: Path, *extra: str) -> tuple[int, dict]:
    r = pmsim_cli("trace", "lint", path, "--json", *extra)
    assert r.stderr == "", r.stderr
    return r.returncode, json.loads(r.stdout)


def test_lint_names_the_stores_a_program_never_persisted(tmp_path):
    text = _write(tmp_path, "t.trace", LEGACY)
    binary = tmp_path / "t.bin"
    pmsim_cli("trace", "convert", text, binary, check=True)
    reports = []
    for path in (text, binary):
        rc, r = _lint_json(path)
        assert rc == 1
        assert r["dialect"] == "x86"
        assert (r["unpersisted_stores"], r["never_flushed"], r["flushed_not_fenced"]) == (2, 1, 1)
        assert r["unpersisted_words"] == 3  # B, and C's two words
        assert [(s["gid"], s["state"], s["op"], s["op_index"]) for s in r["unpersisted"]] == [
            (4, "flushed-not-fenced", "put", 0),
            (8, "never-flushed", "put", 1),
        ]
        # T1's flush of a line nobody wrote is redundant; its mfence orders nothing.
        assert (r["redundant_flushes"], r["empty_fences"], r["fences"]) == (1, 1, 3)
        reports.append(r)
    assert reports[0] == reports[1]  # text and binary (streamed) give the same report
    assert pmsim.trace_lint(text) == reports[0]
    assert len(pmsim.trace_lint(text, max_stores=1)["unpersisted"]) == 1

    human = pmsim_cli("trace", "lint", text)
    assert human.returncode == 1
    assert "unpersisted at the end: 2 store(s) in 3 PM word(s)" in human.stdout
    assert "T0 store 0x100000080 (16 B), gid 8 in op 'put' #1: never-flushed" in human.stdout


def test_a_fully_persisted_trace_exits_0(tmp_path):
    ok = _write(
        tmp_path,
        "ok.trace",
        "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 ntstore 0x100000040 8 2\n"
        "T0 clwb 0x100000000\nT0 sfence\n",
    )
    r = pmsim_cli("trace", "lint", ok)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unpersisted at the end: 0 store(s)" in r.stdout


def test_a_design_neutral_trace_has_nothing_to_lint(tmp_path):
    neutral = _write(
        tmp_path, "n.trace", "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 ofence\n"
    )
    r = pmsim_cli("trace", "lint", neutral)
    assert r.returncode == 0 and "design-neutral" in r.stdout, r.stdout


def test_bad_input_is_one_clear_message(tmp_path):
    bad = _write(tmp_path, "bad.trace", "# pmsim trace v1\nthreads 1\nT0 stor 0x100000000 8 1\n")
    for args, words in [
        ((tmp_path / "missing.trace",), "no such file"),
        ((bad,), "bad.trace"),
        ((bad, "--max", "-1"), "argument --max"),
    ]:
        r = pmsim_cli("trace", "lint", *args)
        assert r.returncode == 2 and r.stdout == "", r  # 1 means findings: an error is not one
        assert words in r.stderr and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    with pytest.raises(pmsim.PmsimError, match="max_stores"):
        pmsim.trace_lint(bad, max_stores="3")


# A persistent log: each append writes the entry, persists it, then bumps and persists the
# count. BUG=1 forgets the entry's clwb in the last append.
PROGRAM = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
int main(void) {
  uint64_t *log = aligned_alloc(64, 64 * 8);
  for (int i = 0; i < 4; i++) {
    log[8 + 8 * i] = 100 + i;
    if (!(BUG && i == 3)) _mm_clwb(&log[8 + 8 * i]);
    _mm_sfence();
    log[0] = i + 1;
    _mm_clwb(&log[0]);
    _mm_sfence();
  }
  return 0;
}
"""


def test_a_real_program_missing_one_flush(tmp_path):
    from test_tracer import _build_traced, _require_toolchain

    _require_toolchain()
    got = {}
    for bug in (0, 1):
        _build_traced(tmp_path, f"log{bug}", PROGRAM, "-O1", "-mclwb", f"-DBUG={bug}")
        out = tmp_path / f"log{bug}.bin"
        cmd = [*PMSIM, "trace", "record", "--pm", "heap", "--volatile", "drop", "--compute", "drop"]
        rec = subprocess.run(
            [*cmd, "-o", str(out), "--", str(tmp_path / f"log{bug}")], capture_output=True, text=True
        )
        assert rec.returncode == 0, rec.stderr
        got[bug] = _lint_json(out)
    assert got[0][0] == 0 and got[0][1]["unpersisted_stores"] == 0, got[0]
    rc, r = got[1]
    assert rc == 1 and r["unpersisted_stores"] == 1, r
    (s,) = r["unpersisted"]
    # The 4th entry's word: the log's 4th line (the heap's first PM address is the log).
    assert (s["state"], s["addr"] % (64 * 8), s["size"]) == ("never-flushed", 64 * 4, 8)


# Operation 1 writes a record and its commit word but persists only the record; operation 2
# persists its own record; operation 3 writes and persists the commit word's line again. Lint's
# end-of-run rule finds nothing unpersisted; the commit word of operation 1 was left behind.
LATE = """# pmsim trace v1
threads 1
T0 begin put
T0 store 0x100000000 8 1
T0 store 0x100001000 8 1
T0 clwb 0x100000000
T0 sfence
T0 end put
T0 begin put
T0 store 0x100002000 8 2
T0 clwb 0x100002000
T0 sfence
T0 end put
T0 begin put
T0 store 0x100001008 8 3
T0 clwb 0x100001000
T0 sfence
T0 end put
"""


def test_lint_names_a_store_left_behind_until_a_later_operation_flushed_its_line(tmp_path):
    rc, r = _lint_json(_write(tmp_path, "late.trace", LATE))
    assert rc == 0 and r["unpersisted_stores"] == 0
    assert r["late_stores"] == 1
    assert [(s["gid"], s["state"], s["op"], s["op_index"]) for s in r["late"]] == [
        (2, "persisted-late", "put", 0)
    ]
    out = pmsim_cli("trace", "lint", tmp_path / "late.trace").stdout
    assert "late: 1 store(s)" in out and "gid 2 in op 'put' #0: persisted-late" in out


def test_lint_names_lock_words_apart_and_says_what_a_trailing_clflush_lacks(tmp_path):
    # A spinlock on PM taken by CAS (0 -> 1) and given back by a plain store: a lock, listed
    # apart, not counted. A C11 release store publishing data is data: counted. The data store
    # flushed by a clflush at the end lacks only a fence.
    text = _write(
        tmp_path,
        "lock.trace",
        "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 0\nT0 clwb 0x100000000\nT0 sfence\n"
        "T0 begin put\nT0 rmw 0x100000000 8 1\nT0 store 0x100000040 8 7\nT0 release 0x100000080 8 9\n"
        "T0 store 0x100000000 8 0\nT0 end put\nT0 clflush 0x100000040\n",
    )
    rc, r = _lint_json(text)
    assert rc == 1
    assert (r["unpersisted_sync_words"], r["unpersisted_sync_stores"]) == (1, 1)
    assert [(s["addr"], s["state"]) for s in r["unpersisted_sync"]] == [(0x100000000, "lock")]
    states = {s["addr"]: s["state"] for s in r["unpersisted"]}
    assert states == {0x100000040: "clflushed-not-fenced", 0x100000080: "never-flushed"}
    assert r["clflushed_not_fenced"] == 1
    human = pmsim_cli("trace", "lint", text).stdout
    assert "1 of them by a clflush with no sfence after it" in human
    assert "not counted: 1 PM lock word(s)" in human
    assert "T0 store 0x100000000 (8 B), gid 7 in op 'put' #0: lock" in human
