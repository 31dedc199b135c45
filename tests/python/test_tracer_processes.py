"""The tracer runtime where a program's life is more than one process, one mapping of a file or a
thread that returns: PM files that grow and are mapped again, several instrumented processes
under one ``pmsim trace record``, threads that end after their thread_local destructors or by
cancellation, large heap alignments, ``realloc(p, 0)``, ``-static`` and a ``--pm`` that does not
match the program. Each case records a small C/C++ program and checks the trace against what
the program did.

These tests need clang and llvm-dev (scripts/setup-tracer.sh); they fail, never skip, without.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import PMSIM, pmsim_cli
from test_tracer import _build_traced, _require_toolchain


@pytest.fixture(scope="module", autouse=True)
def _toolchain() -> None:
    _require_toolchain()


def _record(
    out: Path, *argv: str | Path, pm: str = "heap", cwd: Path | None = None
) -> subprocess.CompletedProcess:
    opts = ["--pm", pm, "--volatile", "drop", "--compute", "drop", "-o", str(out)]
    cmd = [*PMSIM, "trace", "record", *opts, "--", *map(str, argv)]
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, cwd=cwd)


def _events(trace: Path) -> list[list[str]]:
    return [ln.split() for ln in trace.read_text().splitlines() if ln.startswith("T")]


def _in_pm(addr: str) -> bool:
    return 0x1_0000_0000 <= int(addr, 16) < 0x5_0000_0000


def _stats(trace: Path) -> dict:
    return json.loads(pmsim_cli("trace", "stats", trace, "--json", check=True).stdout)


# grow two A B STEPS: two files grown one page at a time, by turns, each mapped again whole after
# every growth; step k stores 1000*(f+1) + k + 1 at offset 64 of page k of file f, k + 1 at its
# offset 0 (the header), each flushed. Then each file, mapped once more, is copied whole by one
# memcpy (loads of every line, across every part of the file the trace placed separately).
# grow big F STEPS: one file grown in 64 MiB steps, a word stored at the start of each new step.
GROW = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define RW (PROT_READ | PROT_WRITE)
static void persist(uint64_t *p, uint64_t v) { *(volatile uint64_t *)p = v; _mm_clwb(p); }
int main(int argc, char **argv) {
  int steps = atoi(argv[argc - 1]);
  if (!strcmp(argv[1], "two")) {
    int fd[2];
    for (int f = 0; f < 2; f++) fd[f] = open(argv[2 + f], O_RDWR | O_CREAT | O_TRUNC, 0644);
    uint64_t *m[2] = {NULL, NULL};
    for (int k = 0; k < steps; k++)
      for (int f = 0; f < 2; f++) {
        size_t size = (size_t)(k + 1) * 4096;
        if (m[f]) munmap(m[f], size - 4096);
        if (ftruncate(fd[f], (off_t)size)) return 1;
        m[f] = mmap(NULL, size, RW, MAP_SHARED, fd[f], 0);
        if (m[f] == MAP_FAILED) return 1;
        persist(&m[f][k * 512 + 8], 1000 * (f + 1) + k + 1);
        persist(&m[f][0], k + 1);
        _mm_sfence();
      }
    size_t size = (size_t)steps * 4096;
    uint64_t *buf = malloc(size), sum = 0;
    for (int f = 0; f < 2; f++) {
      munmap(m[f], size);
      uint64_t *c = mmap(NULL, size, RW, MAP_SHARED, fd[f], 0);
      memcpy(buf, c, size);
      for (int k = 0; k < steps; k++) sum += buf[k * 512 + 8];
      sum += buf[0];
    }
    printf("%lu\n", (unsigned long)sum);
  } else {
    size_t step = 64UL << 20, size = 0;
    int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    uint64_t *m = NULL;
    for (int i = 0; i < steps; i++) {
      if (m) munmap(m, size);
      size += step;
      if (ftruncate(fd, (off_t)size)) return 1;
      m = mmap(NULL, size, RW, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED) return 1;
      persist(m + (size - step) / 8, (uint64_t)i + 1);
      _mm_sfence();
    }
    printf("%zu\n", size >> 20);
  }
  return 0;
}
"""


def test_a_pm_file_that_grows_keeps_one_place_for_each_byte(tmp_path):
    # Before, every growth gave the whole file new trace space: the header word at offset 0 was
    # written at a new address after each remap (three in the tester's run).
    _build_traced(tmp_path, "grow", GROW, "-O1", "-mclwb")
    dax = tmp_path / "dax"
    dax.mkdir()
    steps = 6
    out = tmp_path / "two.trace"
    r = _record(out, tmp_path / "grow", "two", dax / "a", dax / "b", str(steps), pm=f"dax:{dax}")
    expected = sum(1000 * f + k + 1 for f in (1, 2) for k in range(steps)) + 2 * steps
    assert r.returncode == 0 and r.stdout == f"{expected}\n", r.stderr
    ev = [e for e in _events(out) if len(e) > 2 and _in_pm(e[2])]
    stores = [(int(e[2], 16), int(e[4], 16)) for e in ev if e[1] == "store"]
    assert len(stores) == 4 * steps
    headers = [a for a, v in stores if v <= steps]
    records = {v: a for a, v in stores if v > steps}
    # Each file's header is one word, whatever mapping wrote it; A's and B's are two words.
    assert len(headers) == 2 * steps and len(set(headers)) == 2
    assert len(set(records.values())) == 2 * steps and not set(headers) & set(records.values())
    # The copies read every line of both files once: each of the words written, nothing twice.
    loads = [int(e[2], 16) for e in ev if e[1] == "load"]
    assert len(loads) == 2 * steps * 64 and len(set(loads)) == len(loads)
    assert set(headers) | set(records.values()) <= set(loads)
    assert len([e for e in ev if e[1] == "clwb"]) == 4 * steps


def test_a_pm_file_grown_to_gigabytes_fits_the_trace_pm_range(tmp_path):
    # 24 steps of 64 MiB to 1.5 GiB: before, each growth took space for the whole file again
    # (19 GiB in all) and the program died ("exceed the trace's 16 GiB PM range").
    _build_traced(tmp_path, "grow", GROW, "-O1", "-mclwb")
    dax = tmp_path / "dax"
    dax.mkdir()
    out = tmp_path / "big.trace"
    r = _record(out, tmp_path / "grow", "big", dax / "big", "24", pm=f"dax:{dax}")
    (dax / "big").unlink()
    assert r.returncode == 0 and r.stdout == f"{24 * 64}\n", r.stderr
    stores = [(int(e[2], 16), int(e[4], 16)) for e in _events(out) if e[1] == "store" and _in_pm(e[2])]
    base = stores[0][0]
    assert stores == [(base + i * (64 << 20), i + 1) for i in range(24)]


# many DIR N SIZE: N files of SIZE bytes in DIR, each mapped and written once, all kept mapped.
MANY = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int n = atoi(argv[2]);
  size_t size = strtoull(argv[3], NULL, 0);
  char name[4096];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "%s/f%d", argv[1], i);
    int fd = open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)size)) return 1;
    long *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return 1;
    close(fd);
    p[0] = i;
  }
  printf("%d\n", n);
  return 0;
}
"""


@pytest.mark.parametrize(
    "files, size, says",
    [
        # One sparse file larger than the trace's PM range (Ralloc maps 64 GiB).
        (1, 17 << 30, ["exceed the trace's 16 GiB PM range", "/f0)", "needs 17408.0 MiB"]),
        # A log-structured store's segments, all mapped at once.
        (257, 4096, ["more than 256 persistent memory files", "the 257th: ", "/f256)"]),
    ],
    ids=["too-large", "too-many"],
)
def test_pm_files_beyond_the_runtimes_limits_are_named(tmp_path, files, size, says):
    # Tester M: the message named neither the file nor the size it needed.
    _build_traced(tmp_path, "many", MANY, "-O1")
    dax = tmp_path / "dax"
    dax.mkdir()
    out = tmp_path / "many.trace"
    r = _record(out, tmp_path / "many", dax, str(files), str(size), pm=f"dax:{dax}")
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and all(s in r.stderr for s in says), r.stderr
    assert str(dax) in r.stderr
    # What was traced before is kept, marked incomplete.
    meta = pmsim_cli("trace", "stats", out, check=True).stdout
    assert "incomplete" in meta, meta


# persist N TAG: N stores of TAG*1000 + i to the PM heap, each flushed and fenced.
PERSIST = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int n = atoi(argv[1]), tag = atoi(argv[2]);
  uint64_t *pm = aligned_alloc(64, 64 * (size_t)n);
  for (int i = 0; i < n; i++) {
    pm[8 * i] = (uint64_t)(tag * 1000 + i);
    _mm_clwb(&pm[8 * i]);
    _mm_sfence();
    if (i == 0) usleep(20000); /* the other process starts meanwhile */
  }
  printf("%d\n", tag);
  return 0;
}
"""


def _tags(trace: Path) -> dict[int, int]:
    """Stores per TAG in the trace (the PERSIST program's values)."""
    tags: dict[int, int] = {}
    for e in _events(trace):
        if e[1] == "store" and _in_pm(e[2]):
            tags[int(e[4], 16) // 1000] = tags.get(int(e[4], 16) // 1000, 0) + 1
    return tags


def test_one_traced_process_per_trace_the_others_run_untraced_and_say_so(tmp_path):
    # Before, every instrumented process under one record opened the trace with O_TRUNC: two at
    # once corrupted it ("data after the END record"), one after the other left the last one's.
    _build_traced(tmp_path, "persist", PERSIST, "-O1", "-mclwb")
    out = tmp_path / "seq.trace"
    r = _record(out, "sh", "-c", "./persist 3 1; ./persist 5 2", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "1\n2\n", r.stderr
    assert _tags(out) == {1: 3}  # the first process's trace, whole
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 2, r.stderr
    assert "runs untraced: another process started by the same 'pmsim trace record'" in warnings[0]
    assert "2 instrumented processes ran" in warnings[1] and "is the trace of ./persist (pid" in warnings[1]
    meta = dict(_stats(out)["meta"])
    assert meta["traced_process"].startswith("./persist (pid ") and meta["untraced_processes"].startswith(
        "./persist (pid "
    )
    assert "incomplete" not in meta
    # Started at the same time: whichever creates the trace first has it, the other none of it.
    for i in range(2):
        out = tmp_path / f"par{i}.bin"
        r = _record(out, "sh", "-c", "./persist 40 1 & ./persist 40 2; wait", cwd=tmp_path)
        assert r.returncode == 0 and sorted(r.stdout.split()) == ["1", "2"], r.stderr
        tags = _tags_bin(out, tmp_path)
        assert list(tags.values()) == [40], tags
        assert r.stderr.count("runs untraced") == 1, r.stderr
    s = pmsim_cli("run", "--trace", out, "--design", "baseline", "-q")
    assert s.returncode == 0, s.stderr


def _tags_bin(trace: Path, tmp: Path) -> dict[int, int]:
    text = tmp / (trace.stem + ".trace")
    pmsim_cli("trace", "convert", trace, text, check=True)
    return _tags(text)


# worker (ids 0, 1) returns, exiter (2) calls pthread_exit from a nested call, spinner (3) is
# cancelled at pthread_testcancel, waiter (4) is cancelled inside pthread_cond_wait (its cleanup
# handler unlocks the mutex). Each thread's thread_local Stat persists 100 + id in its destructor;
# workers set a pthread key to their id, whose destructor (for a value other than NULL: worker 1)
# persists 200 + id.
THREADS = r"""
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static uint64_t *pm;
static void persist(uint64_t *p, uint64_t v) { *(volatile uint64_t *)p = v; _mm_clwb(p); _mm_sfence(); }
struct Stat {
  int id = -1;
  ~Stat() { if (id >= 0) persist(&pm[8 * id], 100 + id); }
};
static thread_local Stat st;
static pthread_key_t key;
static void key_end(void *v) { persist(&pm[8 * (8 + (intptr_t)v)], 200 + (intptr_t)v); }
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void unlock(void *) { pthread_mutex_unlock(&m); }

static void *worker(void *a) {
  st.id = (int)(intptr_t)a;
  pthread_setspecific(key, a);
  persist(&pm[8 * (16 + st.id)], 1);
  return nullptr;
}
static void nested(int id) { persist(&pm[8 * (16 + id)], 1); pthread_exit(nullptr); }
static void *exiter(void *a) { st.id = (int)(intptr_t)a; nested(st.id); return nullptr; }
static void *spinner(void *a) {
  st.id = (int)(intptr_t)a;
  for (uint64_t i = 1;; i++) { persist(&pm[8 * (16 + st.id)], i); usleep(500); pthread_testcancel(); }
  return nullptr;
}
static void *waiter(void *a) {
  st.id = (int)(intptr_t)a;
  pthread_mutex_lock(&m);
  pthread_cleanup_push(unlock, nullptr);
  for (;;) pthread_cond_wait(&cv, &m);
  pthread_cleanup_pop(0);
  return nullptr;
}
int main() {
  pm = (uint64_t *)aligned_alloc(64, 64 * 32);
  pthread_key_create(&key, key_end);
  void *(*fn[5])(void *) = {worker, worker, exiter, spinner, waiter};
  pthread_t t[5];
  for (intptr_t i = 0; i < 5; i++) pthread_create(&t[i], nullptr, fn[i], (void *)(i + 0));
  usleep(30000);
  pthread_cancel(t[3]);
  pthread_cancel(t[4]);
  for (auto &x : t) pthread_join(x, nullptr);
  for (int i = 0; i < 5; i++) printf("%lu ", (unsigned long)pm[8 * i]);
  printf("%lu\n", (unsigned long)pm[8 * 9]);
  return 0;
}
"""


def test_a_thread_ends_after_its_destructors_and_when_cancelled(tmp_path):
    # Before, a thread's end (the release its join acquires) came right after its start
    # function returned: the thread_local destructor's persist came after it, as a new trace
    # thread no join ordered; a cancelled thread never released, so its join acquired nothing.
    src = tmp_path / "threads.cpp"
    src.write_text(THREADS)
    pmsim_cli("trace", "c++", "-O1", "-mclwb", "-o", tmp_path / "threads", src, check=True)
    out = tmp_path / "threads.trace"
    r = _record(out, tmp_path / "threads")
    assert r.returncode == 0 and r.stdout == "100 101 102 103 104 201\n", r.stderr
    ev = _events(out)
    assert len({e[0] for e in ev}) == 6  # main and its five threads, no more
    for tid in sorted({e[0] for e in ev} - {"T0"}):
        mine = [e for e in ev if e[0] == tid and e[1] != "compute"]
        # The thread's last event is its end; its destructors' persists come before it.
        assert mine[-1][1] == "release", (tid, mine[-3:])
        assert any(e[1] == "store" and int(e[4], 16) in range(100, 105) for e in mine), tid
    # Every join acquires a thread's end: a release of its address by that thread before it.
    joins = [k for k, e in enumerate(ev) if e[0] == "T0" and e[1] == "acquire"][-5:]
    for k in joins:
        ends = [e for e in ev[:k] if e[1] == "release" and e[2] == ev[k][2]]
        assert len(ends) == 1 and ends[0][0] != "T0", ev[k]
    # The waiter, cancelled inside pthread_cond_wait, holds the mutex again (an acquire) before
    # its cleanup handler unlocks it (a release).
    waiter = next(e[0] for e in ev if e[1] == "store" and e[4] == "68")  # 104: thread 4's Stat
    sync = [e[1] for e in ev if e[0] == waiter and e[1] in ("acquire", "release")]
    assert sync == ["acquire", "acquire", "release", "acquire", "release", "release"], sync
    s = pmsim_cli("crash", "--trace", out, "--design", "baseline", "--random", "30", "-q")
    assert s.returncode == 0 and "OK" in s.stdout, s.stdout + s.stderr


# Heap-allocation edge cases under --pm heap; prints 1 for each property that holds.
ALLOC = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <immintrin.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define ALIGNED(p, a) (((uintptr_t)(p) & ((a) - 1)) == 0)
int main(void) {
  void *small = malloc(100); /* the heap is not empty before the aligned blocks */
  uint64_t *p = NULL;
  int r = posix_memalign((void **)&p, 2 << 20, 4 << 20); /* a 2 MiB-aligned PM pool */
  uint64_t *q = aligned_alloc(1 << 20, 1 << 20);
  uint64_t *s = memalign(256 << 10, 100);
  void *bad = NULL;
  int einval = posix_memalign(&bad, 24, 64);
  p[0] = 1; q[0] = 2; s[0] = 3;
  _mm_clflush(p); _mm_clflush(q); _mm_clflush(s); _mm_sfence();
  free(q);
  uint64_t *q2 = aligned_alloc(1 << 20, 1 << 20); /* from the free list, aligned again */
  q2[1] = 4;
  void *z = malloc(64);
  void *zr = realloc(z, 0); /* glibc frees and returns NULL */
  printf("%d %d %d %d %d %d %d\n", r == 0, ALIGNED(p, 2 << 20), q && ALIGNED(q, 1 << 20),
         s && ALIGNED(s, 256 << 10), einval == EINVAL, q2 && ALIGNED(q2, 1 << 20), zr == NULL);
  free(small);
  return 0;
}
"""


def test_the_pm_heap_gives_large_alignments_and_realloc_to_zero_frees(tmp_path):
    # Before, every alignment above 64 KiB failed (ENOMEM) and realloc(p, 0) returned p.
    _build_traced(tmp_path, "alloc", ALLOC, "-O0", "-mclwb")  # -O0: no allocation elided
    out = tmp_path / "alloc.trace"
    r = _record(out, tmp_path / "alloc")
    assert r.returncode == 0 and r.stdout == "1 1 1 1 1 1 1\n", r.stdout + r.stderr
    stores = {int(e[4], 16): int(e[2], 16) for e in _events(out) if e[1] == "store" and _in_pm(e[2])}
    # The trace's PM addresses keep the blocks' alignment.
    assert stores[1] % (2 << 20) == 0 and stores[2] % (1 << 20) == 0 and stores[3] % (256 << 10) == 0
    assert (stores[4] - 8) % (1 << 20) == 0
    assert len({stores[1], stores[2], stores[3]}) == 3


def test_static_linking_is_refused_with_one_line(tmp_path):
    # Before, the linker's "multiple definition of 'realloc'" and more.
    src = tmp_path / "s.c"
    src.write_text("int main(void) { return 0; }\n")
    r = pmsim_cli("trace", "cc", "-static", "-O1", "-o", tmp_path / "s", src)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.count("\n") == 1 and "-static is not supported" in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()
    # Compiling only (no link) with -static is harmless and goes through.
    assert pmsim_cli("trace", "cc", "-static", "-c", "-o", tmp_path / "s.o", src).returncode == 0


# flush DIR/F: a file mapped shared, 4 words stored and flushed (what a PM program without PMDK
# does): PM under --pm dax:DIR, not under --pm heap.
FLUSH = r"""
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 4096)) return 1;
  uint64_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  for (int i = 0; i < 4; i++) { m[8 * i] = i; _mm_clwb(&m[8 * i]); }
  _mm_sfence();
  return 0;
}
"""


def test_flushes_without_pm_give_a_hint_about_the_pm_option(tmp_path):
    _build_traced(tmp_path, "flush", FLUSH, "-O1", "-mclwb")
    dax = tmp_path / "dax"
    dax.mkdir()
    r = _record(tmp_path / "heap.bin", tmp_path / "flush", dax / "f")
    assert r.returncode == 0, r.stderr
    hints = [ln for ln in r.stderr.splitlines() if ln.startswith("pmsim: hint:")]
    assert len(hints) == 1 and "flushed cache lines" in hints[0], r.stderr
    assert "--pm pmdk" in hints[0] and "--pm dax:DIR" in hints[0]
    r = _record(tmp_path / "dax.bin", tmp_path / "flush", dax / "f", pm=f"dax:{dax}")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert _stats(tmp_path / "dax.bin")["pm_stores"] == 4
