"""The tracer runtime under what real programs do besides their PM work: signal handlers that
touch memory, closing every descriptor, ending by ``_exit``/``quick_exit``/``exec`` or with
threads still running, many short-lived threads, ``calloc``/``realloc`` of PM, raw-byte
arguments, and its own fatal errors. Each case records a small C program and checks the trace
against what the program did (its output, its loop counts), and that the trace reads and
replays.

These tests need clang and llvm-dev (scripts/setup-tracer.sh); they fail, never skip, without.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import PMSIM, pmsim_cli
from test_tracer import _build_traced, _require_toolchain

PROG = r"""
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <fcntl.h>
#include "pmsim.h"

uint64_t *pm; /* the PM heap (--pm heap): every malloc is PM */
static volatile uint64_t *hpm;
static volatile long hits;

static void on_alarm(int s) {
  (void)s;
  hpm[hits % 8] = (uint64_t)hits + 1;
  _mm_clwb((void *)hpm);
  _mm_sfence();
  hits++;
}

static void persist(uint64_t *p, uint64_t v) { *p = v; _mm_clwb(p); _mm_sfence(); }

static void *short_thread(void *a) { persist(&pm[8 * ((long)a % 64)], (uint64_t)(long)a); return NULL; }
static void *spinner(void *a) {
  (void)a;
  for (uint64_t r = 0;; r++) persist(&pm[8 * (r % 64)], r);
  return NULL;
}
static sem_t posted, go;
static void *poster(void *a) {
  (void)a;
  sem_wait(&go);
  for (int i = 0; i < 5; i++) persist(&pm[512 + 8 * i], 0x77);
  sem_post(&posted);
  pause();
  return NULL;
}
static void *op_thread(void *a) {
  pmsim_begin("op");
  persist(&pm[8 * ((long)a % 64)], (uint64_t)(long)a);
  pmsim_end("op");
  return NULL;
}
static void *ender(void *a) {
  (void)a;
  pmsim_begin("op");
  persist(&pm[0], 1);
  pthread_exit(NULL);
}

int main(int argc, char **argv) {
  const char *mode = argv[1];
  long n = argc > 2 ? atol(argv[2]) : 0;
  pm = aligned_alloc(64, 1 << 16);
  memset(pm, 0, 1 << 16);
  if (!strcmp(mode, "signal")) {
    /* A timer firing every 20 us while the program copies 16 KiB blocks: most ticks land
     * inside the tracer's work on a copy. */
    hpm = aligned_alloc(64, 64);
    static uint8_t src[16384];
    uint8_t *dst = malloc(sizeof src);
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 20}, {0, 20}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (long i = 0; i < n; i++) {
      src[i % sizeof src] = (uint8_t)i;
      memcpy(dst, src, sizeof src);
      _mm_clwb(dst + (i % 256) * 64); /* keeps the copy: its result is written back */
    }
    setitimer(ITIMER_REAL, &off, NULL);
    printf("%ld\n", hits);
  } else if (!strcmp(mode, "closeall")) {
    /* A daemon's clean-up: every descriptor it did not open, then its own log file. */
    for (int fd = 3; fd < 2048; fd++)
      close(fd);
    closefrom(3);
    int log = open(argv[3], O_CREAT | O_TRUNC | O_WRONLY, 0644);
    for (long i = 0; i < n; i++) persist(&pm[8 * (i % 64)], (uint64_t)i);
    dprintf(log, "log line\n");
    close(log);
    printf("%d\n", log);
  } else if (!strcmp(mode, "_exit")) {
    persist(&pm[0], 5);
    _exit(5);
  } else if (!strcmp(mode, "quick_exit")) {
    persist(&pm[0], 6);
    quick_exit(6);
  } else if (!strcmp(mode, "exec")) {
    persist(&pm[0], 7);
    execlp("true", "true", (char *)0);
    return 1;
  } else if (!strcmp(mode, "exec_fails")) {
    persist(&pm[0], 8);
    execlp("/nonexistent/pmsim-no-such-program", "x", (char *)0);
    persist(&pm[8], 9); /* traced: the failed exec took the trace's end back */
  } else if (!strcmp(mode, "threads")) {
    /* n threads one after another: never more than two alive. */
    for (long i = 0; i < n; i++) {
      pthread_t t;
      pthread_create(&t, NULL, short_thread, (void *)i);
      pthread_join(t, NULL);
    }
  } else if (!strcmp(mode, "wide")) {
    /* n threads created before any is joined: n + 1 trace threads. */
    pthread_t t[128];
    for (long i = 0; i < n && i < 128; i++) pthread_create(&t[i], NULL, op_thread, (void *)i);
    for (long i = 0; i < n && i < 128; i++) pthread_join(t[i], NULL);
  } else if (!strcmp(mode, "pthread_exit")) {
    pthread_t t;
    pthread_create(&t, NULL, ender, NULL);
    pthread_join(t, NULL);
    persist(&pm[8], 2);
  } else if (!strcmp(mode, "running")) {
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    usleep(20000);
    return 0; /* the spinner is still writing */
  } else if (!strcmp(mode, "alloc")) {
    uint64_t *a = malloc(256);
    for (int i = 0; i < 32; i++) a[i] = 0xdead0000 + i;
    for (int i = 0; i < 4; i++) _mm_clwb(&a[8 * i]);
    _mm_sfence();
    free(a);
    uint64_t *c = calloc(32, 8); /* reuses a's block: the zeroing is stores */
    printf("%d %lx\n", c == a, (unsigned long)c[5]);
    c[0] = 0x1111;
    c[1] = 0x2222;
    uint64_t *d = realloc(c, 1 << 20); /* moves: the copy is loads and stores */
    printf("%d %lx\n", d != c, (unsigned long)d[1]);
  } else if (!strcmp(mode, "split")) {
    uint64_t *w = (uint64_t *)((char *)&pm[64] + 60); /* bytes 60..67 of a line */
    __atomic_fetch_add(w, 0x0101010101010101ULL, __ATOMIC_SEQ_CST);
  } else if (!strcmp(mode, "killed")) {
    /* main writes several blocks, then T1 stores and posts, then waits with its buffer
     * unwritten (its events are recent: no other thread writes it out), and main dies of
     * SIGKILL: T1's event ids and those of main's last buffer are missing from the file. */
    sem_init(&posted, 0, 0);
    sem_init(&go, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, poster, NULL);
    for (long i = 0; i < 20000; i++) persist(&pm[8 * (i % 64)], (uint64_t)i);
    sem_post(&go);
    sem_wait(&posted);
    kill(getpid(), SIGKILL);
  } else if (!strcmp(mode, "bad_end")) {
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    usleep(2000);
    pmsim_end("never-begun");
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> Path:
    _require_toolchain()
    d = tmp_path_factory.mktemp("runtime")
    _build_traced(d, "prog", PROG, "-O1", "-mclwb", "-pthread")
    return d / "prog"


def _record(prog: Path, out: Path, *args: str | bytes, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [*PMSIM, "trace", "record", "--compute", "drop", "-o", str(out), "--", str(prog), *args]
    r = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout)
    return subprocess.CompletedProcess(
        r.args, r.returncode, r.stdout.decode(), r.stderr.decode(errors="replace")
    )


def _events(trace: Path) -> list[list[str]]:
    return [ln.split() for ln in trace.read_text().splitlines() if ln.startswith("T")]


def _in_pm(addr: str) -> bool:
    return 0x1_0000_0000 <= int(addr, 16) < 0x5_0000_0000


def _meta(trace: Path) -> dict:
    return dict(json.loads(pmsim_cli("trace", "stats", trace, "--json", check=True).stdout)["meta"])


def _replays(trace: Path) -> None:
    r = pmsim_cli("crash", "--trace", trace, "--design", "baseline", "--random", "50", "-q")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_signal_handlers_that_touch_memory_are_traced_without_hanging_or_corruption(prog, tmp_path):
    # The handler's stores land inside the tracer's work on a copy: before, the handler waited
    # for the file lock its own thread held (a hang), or wrote into the half-written event.
    for i in range(2):
        out = tmp_path / f"sig{i}.trace"
        r = _record(prog, out, "signal", "800", timeout=60)
        assert r.returncode == 0, r.stderr
        hits = int(r.stdout)
        assert hits > 10
        ev = _events(out)
        # 256 line stores per copy; the handler's are 8-byte stores of 1, 2, ... hits, in order.
        copies = [e for e in ev if e[1] == "store" and e[3] == "64"]
        assert len(copies) >= 800 * 256
        handler = [int(e[4], 16) for e in ev if e[1] == "store" and e[3] == "8" and _in_pm(e[2])]
        assert handler[-hits:] == list(range(1, hits + 1))
    _replays(out)


def test_a_program_that_closes_every_descriptor_keeps_its_files_and_its_trace(prog, tmp_path):
    log = tmp_path / "app.log"
    out = tmp_path / "closeall.trace"
    r = _record(prog, out, "closeall", "300", str(log))
    assert r.returncode == 0, r.stderr
    assert log.read_text() == "log line\n"  # not the trace's blocks
    stores = [e for e in _events(out) if e[1] == "store" and e[3] == "8" and _in_pm(e[2])]
    assert len(stores) == 300
    assert _meta(out).get("incomplete") is None


@pytest.mark.parametrize("mode,status,value", [("_exit", 5, 5), ("quick_exit", 6, 6), ("exec", 0, 7)])
def test_exit_paths_that_skip_atexit_still_finish_the_trace(prog, tmp_path, mode, status, value):
    out = tmp_path / f"{mode}.trace"
    r = _record(prog, out, mode)
    assert r.returncode == status, r.stderr
    assert "incomplete" not in _meta(out)
    ev = _events(out)
    assert ["T0", "store", "0x100000000", "8", f"{value:x}"] in ev
    assert ev[-1][1] == "sfence"
    _replays(out)


def test_a_failed_exec_goes_on_tracing(prog, tmp_path):
    out = tmp_path / "exec_fails.trace"
    r = _record(prog, out, "exec_fails")
    assert r.returncode == 0, r.stderr
    ev = _events(out)
    assert ["T0", "store", "0x100000000", "8", "8"] in ev and ["T0", "store", "0x100000040", "8", "9"] in ev
    _replays(out)


def test_threads_that_ended_leave_their_slot_to_later_threads(prog, tmp_path):
    # 100 threads one after another: two trace threads (main and one slot reused), so the
    # trace fits the 64 cores pmsim simulates; every thread's store is there.
    out = tmp_path / "threads.trace"
    r = _record(prog, out, "threads", "100")
    assert r.returncode == 0, r.stderr
    ev = _events(out)
    assert {e[0] for e in ev} == {"T0", "T1"}
    stores = [int(e[4], 16) for e in ev if e[0] == "T1" and e[1] == "store"]
    assert sorted(stores) == list(range(100))
    # Each thread's creation is a release main makes and the thread acquires; its end a release
    # main's join acquires: in the one stream, thread k's events lie between its pair.
    assert sum(1 for e in ev if e[0] == "T1" and e[1] == "acquire") == 100
    assert sum(1 for e in ev if e[0] == "T1" and e[1] == "release") == 100
    assert "warning" not in r.stderr
    _replays(out)


def test_more_threads_than_cores_record_with_a_warning_and_analyze_with_a_given_rate(prog, tmp_path):
    out = tmp_path / "wide.trace"
    r = _record(prog, out, "wide", "70")
    assert r.returncode == 0, r.stderr
    assert "has 71 threads" in r.stderr and "at most 64" in r.stderr, r.stderr
    run = pmsim_cli("run", "--trace", out, "--design", "eadr")
    assert run.returncode == 2 and "71 threads" in run.stderr
    # The critical path needs no timing engine; only the instruction rate does.
    a = pmsim_cli("analyze", "--trace", out, "--model", "epoch")
    assert a.returncode == 2 and "--instr-ops-per-s" in a.stderr, a.stderr
    a = pmsim_cli("analyze", "--trace", out, "--model", "epoch", "--instr-ops-per-s", "1e6", "--json")
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["persists"] >= 70


def test_pthread_exit_is_joined_like_a_return(prog, tmp_path):
    out = tmp_path / "pexit.trace"
    r = _record(prog, out, "pthread_exit")
    assert r.returncode == 0, r.stderr
    ev = _events(out)
    t1_release = [e for e in ev if e[0] == "T1" and e[1] == "release"]
    assert len(t1_release) == 1
    joined = [e for e in ev if e[0] == "T0" and e[1] == "acquire" and e[2] == t1_release[0][2]]
    assert len(joined) == 1


def test_a_thread_still_running_at_exit_leaves_a_whole_trace(prog, tmp_path):
    for i in range(4):
        out = tmp_path / f"running{i}.bin"
        r = _record(prog, out, "running")
        assert r.returncode == 0, r.stderr
        s = pmsim_cli("trace", "stats", out, "--json")
        assert s.returncode == 0, s.stderr  # no gap in the event ids
        assert json.loads(s.stdout)["threads"] == 2


def test_calloc_zeroing_and_realloc_copy_of_pm_are_traced(prog, tmp_path):
    out = tmp_path / "alloc.trace"
    r = _record(prog, out, "alloc")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0", "1", "2222"]
    ev = _events(out)
    # calloc reused a's block (it said so): after a's stores, zero stores cover its 4 lines.
    dead = [k for k, e in enumerate(ev) if e[1] == "store" and e[4].startswith("dead")]
    lines = {int(ev[k][2], 16) & ~63 for k in dead}
    assert len(dead) == 32 and len(lines) == 4
    zeroed = {int(e[2], 16) & ~63 for e in ev[dead[-1] :] if e[1] == "store" and e[4] == "0"}
    assert lines <= zeroed
    # realloc's copy: a 64-byte store of the old block's first line at the new place.
    moved = [e for e in ev if e[1] == "store" and e[3] == "64" and e[4].endswith("1111")]
    assert moved and int(moved[-1][2], 16) != 0x100000000


def test_a_split_lock_rmw_is_its_first_lines_bytes_and_a_store_of_the_rest(prog, tmp_path):
    out = tmp_path / "split.trace"
    assert _record(prog, out, "split").returncode == 0
    ev = _events(out)
    i = next(k for k, e in enumerate(ev) if e[1] == "rmw")
    assert ev[i][2:5] == ["0x10000023c", "4", "1010101"]
    assert ev[i + 1][1:5] == ["store", "0x100000240", "4", "1010101"]


def test_a_killed_programs_trace_is_cut_at_its_first_missing_event(prog, tmp_path):
    # SIGKILL cannot be caught: T1's buffer dies with the process while main's blocks reached
    # the file, so event ids are missing. The repair keeps the prefix before the first one.
    out = tmp_path / "killed.bin"
    r = _record(prog, out, "killed")
    assert r.returncode == 2 and "SIGKILL" in r.stderr, r.stderr
    s = pmsim_cli("trace", "stats", out, "--json")
    assert s.returncode == 0, s.stderr
    stats = json.loads(s.stdout)
    assert dict(stats["meta"])["incomplete"] == "killed by signal 9"
    text = tmp_path / "killed.trace"
    pmsim_cli("trace", "convert", out, text, check=True)
    ev = _events(text)
    assert stats["events"] == len(ev)
    assert not [e for e in ev if e[0] == "T1" and e[1] == "store"]  # T1's stores were lost
    # main's blocks before its last buffer were kept, the rest of its 20,000 stores cut away.
    lines = {hex(0x100000000 + 64 * k) for k in range(64)}
    i = [int(e[4], 16) for e in ev if e[0] == "T0" and e[1] == "store" and e[2] in lines and e[3] == "8"]
    assert i == list(range(len(i))) and 10000 < len(i) < 20000, i[-3:]
    c = pmsim_cli("crash", "--trace", out, "--design", "baseline", "--every", "--allow-incomplete", "-q")
    assert c.returncode == 0 and "OK" in c.stdout, c.stdout + c.stderr


def test_a_runtime_error_gives_one_message_and_a_readable_incomplete_trace(prog, tmp_path):
    out = tmp_path / "bad.trace"
    r = _record(prog, out, "bad_end")
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and 'pmsim_end("never-begun") without a pmsim_begin' in errors[0], r.stderr
    assert "pmsim_end" in _meta(out)["incomplete"]
    assert pmsim_cli("run", "--trace", out, "--design", "baseline", "--allow-incomplete").returncode == 0


def test_raw_byte_and_multi_line_arguments_are_kept_readably(prog, tmp_path):
    # Before, a non-UTF-8 argument made the META record unreadable and a newline split it.
    out = tmp_path / "args.trace"
    r = _record(prog, out, "split", "a\nb", b"\xff\xfe")
    assert r.returncode == 0, r.stderr
    args = _meta(out)["args"]
    assert "\\n" in args and "\\xff\\xfe" in args, args
    assert [ln for ln in out.read_text().splitlines() if ln.startswith("# meta args=")] == [
        f"# meta args={args}"
    ]


# An allocator library as jemalloc is one: it exports malloc & co. and its own operator
# new/delete, whose new allocates inside the library while its delete calls `free` (through the
# PLT, so the traced program's `free` gets it). Each block carries a header; a block it did not
# make aborts `free`, as glibc's "free(): invalid pointer" did when the runtime gave the
# library's blocks to libc.
ALLOC_LIB = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
#define MAGIC 0x5eedf00d5eedf00dULL
static long made;
static void *own(size_t n, size_t align) {
  if (align < 16) align = 16;
  uint8_t *raw = __libc_malloc(n + align + 32);
  if (!raw) return NULL;
  uint8_t *q = (uint8_t *)(((uintptr_t)raw + 32 + align - 1) & ~(uintptr_t)(align - 1));
  uint64_t *h = (uint64_t *)q - 3;
  h[0] = MAGIC; h[1] = (uint64_t)(uintptr_t)raw; h[2] = n;
  made++;
  return q;
}
static uint64_t *header(void *q) {
  uint64_t *h = (uint64_t *)q - 3;
  if (h[0] != MAGIC) { fputs("alloc lib: a block it did not make\n", stderr); abort(); }
  return h;
}
long lib_blocks_made(void) { return made; }
void *malloc(size_t n) { return own(n, 16); }
void free(void *q) { if (q) { uint64_t *h = header(q); h[0] = 0; __libc_free((void *)(uintptr_t)h[1]); } }
void *calloc(size_t a, size_t b) { void *p = own(a * b, 16); if (p) memset(p, 0, a * b); return p; }
void *realloc(void *q, size_t n) {
  if (!q) return own(n, 16);
  void *p = own(n, 16);
  if (p) { size_t old = header(q)[2]; memcpy(p, q, old < n ? old : n); free(q); }
  return p;
}
void *memalign(size_t align, size_t n) { return own(n, align); }
void *_Znwm(size_t n) { void *p = own(n, 16); if (!p) abort(); return p; }
void *_Znam(size_t n) { return _Znwm(n); }
void _ZdlPv(void *q) { free(q); }
void _ZdaPv(void *q) { free(q); }
void _ZdlPvm(void *q, size_t n) { (void)n; free(q); }
void _ZdaPvm(void *q, size_t n) { (void)n; free(q); }
"""

ALLOC_USER = r"""
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
extern "C" long lib_blocks_made(void);
int main() {
  std::map<std::string, std::string> m;
  m[std::string(80, 'k')] = std::string(90, 'v');
  void *p = std::malloc(100);
  p = std::realloc(p, 300);
  std::free(p);
  void *a = nullptr;
  if (posix_memalign(&a, 256, 64) != 0) return 1;
  std::free(a);
  std::printf("%zu %ld\n", m.size(), lib_blocks_made());
  return 0;
}
"""


@pytest.mark.parametrize("pm", ["heap", "dax"])
def test_a_program_linked_with_an_allocator_library_uses_it_throughout(tmp_path, pm):
    # Tester M: a C++ program linked with jemalloc died at its first delete, traced or not.
    lib_src = tmp_path / "alloc.c"
    lib_src.write_text(ALLOC_LIB)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", tmp_path / "liballoc.so", lib_src], check=True)
    src = tmp_path / "user.cpp"
    src.write_text(ALLOC_USER)
    prog = tmp_path / "user"
    link = [f"-L{tmp_path}", f"-Wl,-rpath,{tmp_path}", "-lalloc"]
    pmsim_cli("trace", "c++", "-O2", "-o", prog, src, *link, check=True)
    untraced = subprocess.run([prog], capture_output=True, text=True, timeout=60)
    assert untraced.returncode == 0, untraced.stderr
    size, made = map(int, untraced.stdout.split())
    # The strings (new), malloc, realloc and posix_memalign: all the library's.
    assert size == 1 and made >= 5, untraced.stdout
    (tmp_path / "pm").mkdir()
    opt = "heap" if pm == "heap" else f"dax:{tmp_path / 'pm'}"
    r = pmsim_cli("trace", "record", "--pm", opt, "-o", tmp_path / "t.bin", "--", prog)
    assert r.returncode == 0, r.stderr
    size, traced_made = map(int, r.stdout.split())
    # Under --pm heap the C allocations are the PM heap's; new stays the library's (its own).
    assert size == 1 and (traced_made == made if pm != "heap" else 2 <= traced_made < made), r.stdout
    pmsim_cli("trace", "stats", tmp_path / "t.bin", check=True)
