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
