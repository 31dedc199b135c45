"""The tracer on a multi-threaded program killed with SIGKILL (an outside tester's report: a
traced libpmemobj-cpp example with 30 workers, killed while main sat in pthread_join, left a
trace of 0 events). A SIGKILL leaves every thread's buffer in memory unwritten, and record's
repair keeps only the events before the first event id no block holds: main's first buffer,
never written while main waits, cut the whole trace away. The trace must keep a useful prefix:
main's first events and most of what the workers did before the kill.

These tests need clang and llvm-dev (scripts/setup-tracer.sh); they fail, never skip, without.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import PMSIM, pmsim_cli
from test_tracer import _build_traced, _require_toolchain


@pytest.fixture(scope="module", autouse=True)
def _toolchain() -> None:
    _require_toolchain()


# main makes 3 PM stores, starts 2 workers that each make 20,000 PM stores (several 64 KiB
# buffers' worth) and then wait forever, and waits for them: in pthread_join, or (a wait the
# tracer has no wrapper for) in pause(). The second worker to finish prints "ready PID".
KILLED = r"""
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define N 20000
static atomic_int done;
static void *worker(void *arg) {
  volatile long *a = malloc(N * sizeof(long));
  for (long i = 0; i < N; i++)
    a[i] = i + (long)arg;
  if (atomic_fetch_add(&done, 1) == 1) {
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
  }
  for (;;)
    pause();
  return NULL;
}
int main(int argc, char **argv) {
  volatile long *m = malloc(3 * sizeof(long));
  m[0] = 0x1111; m[1] = 0x2222; m[2] = 0x3333;
  pthread_t t[2];
  for (long i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, worker, (void *)(i << 32));
  if (argc > 1)
    for (;;)
      pause();
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  return 0;
}
"""


def _stats(trace: Path) -> dict:
    return json.loads(pmsim_cli("trace", "stats", trace, "--json", check=True).stdout)


@pytest.mark.parametrize("wait", ["pthread_join", "pause"])
def test_a_sigkilled_program_keeps_a_prefix_with_mains_first_events(tmp_path, wait):
    _build_traced(tmp_path, "killed", KILLED, "-O1", "-pthread")
    out = tmp_path / "killed.trace"
    argv = [str(tmp_path / "killed")] + (["pause"] if wait == "pause" else [])
    cmd = [*PMSIM, "trace", "record", "--pm", "heap", "--volatile", "drop", "--compute", "drop",
           "-o", str(out), "--", *argv]  # fmt: skip
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        line = p.stdout.readline()
        assert line.startswith("ready "), line
        os.kill(int(line.split()[1]), signal.SIGKILL)  # the traced program, not record
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 2, err
    assert f"crashed (SIGKILL, exit status 137); the partial trace in {out} is marked incomplete" in err
    s = _stats(out)
    assert dict(s["meta"])["incomplete"] == "killed by signal 9"
    events = [ln.split() for ln in out.read_text().splitlines() if ln.startswith("T")]
    # main's stores come first (its thread took id 0 at its first event)...
    main = [e for e in events if e[0] == "T0" and e[1] == "store"]
    assert len(main) == 3, events[:10]
    # ...and most of the workers' 40,000 stores survive the cut: all but what they still had
    # buffered (a 64 KiB buffer holds some 4,000 stores) and what followed its first event.
    workers = [e for e in events if e[0] != "T0" and e[1] == "store"]
    assert 20000 <= len(workers) <= 40000, len(workers)
    assert s["events"] == len(events)


# Stores, flushes and fences as fast as it can, in THREADS threads, for ITERATIONS rounds (0:
# until killed): a hung program under `timeout` writes its trace at some 70 MB/s.
SPIN = r"""
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static long iterations;
static void *spin(void *arg) {
  volatile long *a = aligned_alloc(64, 4096);
  for (long i = 0; iterations == 0 || i < iterations; i++) {
    a[i % 512] = i + (long)arg;
    _mm_clwb((void *)&a[i % 512]);
    _mm_sfence();
  }
  return NULL;
}
int main(int argc, char **argv) {
  int threads = atoi(argv[1]);
  iterations = atol(argv[2]);
  pthread_t t[8];
  for (long k = 1; k < threads; k++)
    pthread_create(&t[k], NULL, spin, (void *)k);
  printf("started %d\n", (int)getpid());
  fflush(stdout);
  spin(0);
  for (int k = 1; k < threads; k++)
    pthread_join(t[k], NULL);
  return 0;
}
"""


@pytest.mark.parametrize("how", ["SIGTERM to record", "SIGKILL to the program"])
def test_a_long_recording_stopped_by_a_signal_is_repaired_in_bounded_memory(tmp_path, how):
    # A tester's finding: record repaired the partial trace in memory (its peak RSS was the
    # trace's size), so a program stopped after minutes (gigabytes) lost its trace to a
    # MemoryError. The repair streams: record's peak RSS does not grow with the trace.
    _build_traced(tmp_path, "spin", SPIN, "-O1", "-mclwb", "-pthread")
    out = tmp_path / "spin.bin"

    def partial_size() -> int:
        """The size of the runtime's trace so far (in record's private folder beside `out`)."""
        found = list(tmp_path.glob(".pmsim-record-*/trace.partial.bin"))
        return found[0].stat().st_size if found else 0

    sig = signal.SIGTERM if how.startswith("SIGTERM") else signal.SIGKILL
    stop_at = 80 << 20

    def record(*args: str, stop: bool) -> tuple[int, str, int]:
        """Runs record on spin ARGS (stopped by `how` once its trace has `stop_at` bytes);
        returns its exit status, stderr and peak RSS in bytes (its own, by wait4)."""
        cmd = [*PMSIM, "trace", "record", "--pm", "heap", "--compute", "drop",
               "-o", str(out), "--", str(tmp_path / "spin"), *args]  # fmt: skip
        p = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            line = p.stdout.readline()
            assert line.startswith("started "), line
            deadline = time.monotonic() + 60
            while stop and partial_size() < stop_at:
                assert time.monotonic() < deadline, partial_size()
                time.sleep(0.02)
            if stop and sig == signal.SIGTERM:
                p.send_signal(sig)  # record passes it on to the program
            elif stop:
                os.kill(int(line.split()[1]), sig)  # the traced program, not record
            while (waited := os.wait4(p.pid, os.WNOHANG))[0] == 0:
                assert time.monotonic() < deadline + 60, "record did not end"
                time.sleep(0.05)
            p.returncode = os.waitstatus_to_exitcode(waited[1])
            return p.returncode, p.stderr.read(), waited[2].ru_maxrss * 1024
        finally:
            if p.returncode is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    status, err, base = record("1", "1000", stop=False)  # record's own footprint
    assert status == 0, err
    status, err, peak = record("2" if sig == signal.SIGKILL else "1", "0", stop=True)
    assert status == 2, err
    assert (
        f"crashed ({sig.name}, exit status {128 + sig}); the partial trace in {out} is marked incomplete"
        in err
    )
    # The trace is kept (SIGKILL: cut at its first missing event), readable, marked incomplete.
    assert out.stat().st_size > stop_at // 2, out.stat().st_size
    s = _stats(out)
    assert dict(s["meta"])["incomplete"] == f"killed by signal {int(sig)}"
    assert s["events"] > 5_000_000, s["events"]
    left = [q.name for q in tmp_path.iterdir() if "partial" in q.name or q.suffix == ".cut"]
    assert left + [q.name for q in tmp_path.glob(".pmsim-record-*")] == []
    # In memory, the repair took a copy of the trace (and decoded the SIGKILL one: 10x its size).
    assert peak - base < stop_at // 4, (peak, base)
