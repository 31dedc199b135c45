"""The tracer on what an outside tester's programs and command lines did: heap PM objects the
optimiser would turn into globals, libpmem/libpmem2 memmoves, `-o` naming a symlink, a FIFO or a
directory, a recording interrupted by Ctrl-C or SIGTERM, `-x c`, a program with its own
allocator, a program whose main thread makes no event, `--pm range` sizes, arguments larger
than one environment string, a program that changes directory before main, PMSIM_TRACER_SRC and
pvalloc. Each case builds a small C/C++ program and checks the trace against what it did.

These tests need clang and llvm-dev (scripts/setup-tracer.sh); they fail, never skip, without.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import PMSIM, pmsim_cli
from test_tracer import _build_traced, _require_toolchain


@pytest.fixture(scope="module", autouse=True)
def _toolchain() -> None:
    _require_toolchain()


def _record(out: Path, *argv: str | Path, pm: str = "heap", **kw) -> subprocess.CompletedProcess:
    opts = ["--pm", pm, "--volatile", "drop", "--compute", "drop", "-o", str(out)]
    cmd = [*PMSIM, "trace", "record", *opts, "--", *map(str, argv)]
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, **kw)


def _events(trace: Path) -> list[list[str]]:
    return [ln.split() for ln in trace.read_text().splitlines() if ln.startswith("T")]


def _meta(trace: Path) -> dict:
    return dict(json.loads(pmsim_cli("trace", "stats", trace, "--json", check=True).stdout)["meta"])


# A PM header on the heap, held in a static pointer that never escapes (nothing flushes it: the
# bug lint exists to find). At -O2 LLVM would make it a global in .bss (GlobalOpt) or drop its
# stores (DSE: nothing reads them), and the trace would show no PM store at all.
GOPT_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
struct hdr { uint64_t magic, nrec; };
static struct hdr *H;
int main(int argc, char **argv) {
  H = malloc(sizeof *H);
  H->magic = 0x504d4c4f47;
  H->nrec = argc;
  printf("%lu\n", (unsigned long)H->nrec);
  return 0;
}
"""
GOPT_CXX = r"""
#include <cstdint>
#include <cstdio>
struct Hdr { uint64_t magic, nrec; };
static Hdr *H;
int main(int argc, char **) {
  H = new Hdr; H->magic = 7; H->nrec = argc;
  std::printf("%lu\n", (unsigned long)H->nrec); }
"""


# A new-expression and its delete are a pair C++ lets the compiler elide (no -fno-builtin flag
# stops that; the pass marks them nobuiltin).
GOPT_DELETE = GOPT_CXX.replace("(unsigned long)H->nrec); }", "(unsigned long)H->nrec); delete H; }")


@pytest.mark.parametrize(
    ("lang", "program"),
    [("cc", GOPT_C), ("c++", GOPT_CXX), ("c++", GOPT_DELETE)],
    ids=["malloc", "new", "delete"],
)
def test_a_heap_object_in_a_static_pointer_stays_pm_at_O2(tmp_path, lang, program):
    assert "delete H" in GOPT_DELETE
    src = tmp_path / ("g.c" if lang == "cc" else "g.cpp")
    src.write_text(program)
    pmsim_cli("trace", lang, "-O2", "-o", tmp_path / "g", src, check=True)
    r = _record(tmp_path / "g.trace", tmp_path / "g")
    assert r.returncode == 0 and r.stdout == "1\n", r.stderr
    stores = [e for e in _events(tmp_path / "g.trace") if e[1] == "store"]
    assert [e[2] for e in stores] == ["0x100000000", "0x100000008"], stores
    lint = pmsim_cli("trace", "lint", tmp_path / "g.trace")
    assert lint.returncode == 1 and "2 never flushed" in lint.stdout, lint.stdout


# libpmem's memmoves and libpmem2's memmove_fn read their source as the memcpys do: each copy of
# line 0 into another line of the file is a load of line 0, then the store (and its clwb).
MOVE = r"""
#include <fcntl.h>
#include <libpmem.h>
#include <libpmem2.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  size_t len; int is_pmem;
  char *p = pmem_map_file(argv[1], 1 << 16, PMEM_FILE_CREATE, 0644, &len, &is_pmem);
  if (!p) { perror("map"); return 1; }
  pmem_memmove_persist(p + 1024, p, 64);
  pmem_memmove_nodrain(p + 2048, p, 64);
  pmem_memmove(p + 3072, p, 64, 0);
  pmem_memcpy_persist(p + 4096, p, 64);
  int fd = open(argv[2], O_CREAT | O_RDWR, 0644);
  if (fd < 0 || ftruncate(fd, 1 << 16)) { perror("open"); return 1; }
  struct pmem2_config *cfg; struct pmem2_source *src; struct pmem2_map *map;
  pmem2_config_new(&cfg); pmem2_source_from_fd(&src, fd);
  pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE);
  if (pmem2_map_new(&map, cfg, src)) { pmem2_perror("map"); return 1; }
  char *q = pmem2_map_get_address(map);
  pmem2_get_memmove_fn(map)(q + 1024, q, 64, 0);
  pmem2_get_memcpy_fn(map)(q + 2048, q, 64, 0);
  return 0;
}
"""


def test_pmem_memmoves_load_their_source_as_the_memcpys_do(tmp_path):
    _build_traced(tmp_path, "mv", MOVE, "-O1", "-lpmem", "-lpmem2")
    out = tmp_path / "mv.trace"
    r = _record(out, tmp_path / "mv", tmp_path / "a.pmem", tmp_path / "b.pmem", pm="pmdk")
    assert r.returncode == 0, r.stderr
    ev = [(e[1], int(e[2], 16)) for e in _events(out) if e[1] in ("load", "store")]
    ev = [(k, a - 0x1_0000_0000) for k, a in ev if a >= 0x1_0000_0000]
    b = 1 << 16  # the pmem2 file follows the libpmem one in the trace's PM range
    assert ev == [
        ("load", 0), ("store", 1024), ("load", 0), ("store", 2048), ("load", 0), ("store", 3072),
        ("load", 0), ("store", 4096), ("load", b), ("store", b + 1024), ("load", b), ("store", b + 2048),
    ], ev  # fmt: skip


NOP = r"""
#include <stdio.h>
int main(int argc, char **argv) { printf("ran %d\n", argc); return 0; }
"""


def test_o_writes_through_a_symlink_and_into_a_fifo(tmp_path):
    _build_traced(tmp_path, "nop", NOP, "-O1")
    target = tmp_path / "target.trace"
    target.write_text("old\n")
    link = tmp_path / "link.trace"
    link.symlink_to("target.trace")
    r = _record(link, tmp_path / "nop")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.read_text().startswith("# pmsim trace v1")
    # A FIFO is written into, as a shell's `>` would: its reader gets the trace, the FIFO stays.
    fifo = tmp_path / "fifo.bin"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = _record(fifo, tmp_path / "nop")
    reader.join(60)
    assert r.returncode == 0, r.stderr
    assert fifo.is_fifo() and got and got[0].startswith(b"PMSIMTRB"), got
    (tmp_path / "copy.bin").write_bytes(got[0])
    assert _meta(tmp_path / "copy.bin")["program"].endswith("nop")
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []


def test_o_a_directory_or_a_bad_range_is_refused_before_the_program_runs(tmp_path):
    _build_traced(tmp_path, "nop", NOP, "-O1")
    (tmp_path / "outdir").mkdir()
    r = _record(tmp_path / "outdir", tmp_path / "nop")
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert (
        r.stderr.strip()
        == f"pmsim: error: -o {tmp_path / 'outdir'}: is a directory; give the trace's file name"
    )
    for spec, why in [
        ("range:0x7f0000000000:0x500000000", "exceeds the trace's PM range of 16 GiB"),
        ("range:0x1000:0", "the size must be > 0"),
    ]:
        r = _record(tmp_path / "r.trace", tmp_path / "nop", pm=spec)
        assert r.returncode == 2 and r.stdout == "", r.stdout
        assert len(r.stderr.splitlines()) == 1 and why in r.stderr and f"--pm {spec}" in r.stderr, r.stderr


# 50 rounds of a flushed store, 50 ms apart: long enough to be interrupted mid-way.
SLOW = r"""
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
  long *p = aligned_alloc(64, 64);
  for (int i = 0; i < 50; i++) {
    p[0] = i; _mm_clflush(p); _mm_sfence();
    if (i == 2) { printf("started\n"); fflush(stdout); }
    usleep(50000);
  }
  return 0;
}
"""


@pytest.mark.parametrize("how", ["SIGINT to the group", "SIGTERM to record"])
def test_an_interrupted_recording_keeps_the_trace_marked_incomplete(tmp_path, how):
    _build_traced(tmp_path, "slow", SLOW, "-O1")
    out = tmp_path / "slow.trace"
    cmd = [*PMSIM, "trace", "record", "--compute", "drop", "-o", str(out), "--", str(tmp_path / "slow")]
    # In a session of its own, as a shell job: Ctrl-C signals the whole process group.
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    assert p.stdout.readline() == "started\n"
    time.sleep(0.1)
    if how.startswith("SIGINT"):
        os.killpg(p.pid, signal.SIGINT)
        sig = signal.SIGINT
    else:
        p.send_signal(signal.SIGTERM)  # record alone: it passes the signal on to the program
        sig = signal.SIGTERM
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    assert (
        f"crashed ({sig.name}, exit status {128 + sig}); the partial trace in {out} is marked incomplete"
        in err
    )
    assert _meta(out)["incomplete"] == f"killed by signal {int(sig)}"
    stores = [e for e in _events(out) if e[1] == "store" and e[2] == "0x100000000"]
    assert 3 <= len(stores) < 50, len(stores)
    assert [q.name for q in tmp_path.iterdir() if "partial" in q.name] == []


def test_x_c_applies_to_the_programs_sources_not_the_runtime(tmp_path):
    (tmp_path / "m.c").write_text(NOP)
    pmsim_cli("trace", "cc", "-x", "c", "-o", tmp_path / "m", tmp_path / "m.c", check=True)
    r = _record(tmp_path / "m.trace", tmp_path / "m")
    assert r.returncode == 0 and r.stdout == "ran 1\n", r.stderr


# A bump allocator of its own (malloc, free, calloc, realloc): it links, and its memory (a static
# arena) is not the PM heap; pvalloc, valloc and memalign (the runtime's, not the program's: it
# defines no such function) would be.
MYMALLOC = r"""
#include <stddef.h>
#include <stdio.h>
static char arena[1 << 20] __attribute__((aligned(64))); static size_t off;
void *malloc(size_t n) { void *p = arena + off; off += (n + 63) & ~63ul; return p; }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b) {
  char *p = malloc(a * b); for (size_t i = 0; i < a * b; i++) p[i] = 0; return p; }
void *realloc(void *p, size_t n) { (void)p; return malloc(n); }
int main(void) { volatile long *x = malloc(64); x[0] = 1; printf("%ld\n", x[0]); return 0; }
"""
PVALLOC = r"""
#include <malloc.h>
#include <stdio.h>
int main(void) {
  volatile long *p = pvalloc(100), *q = valloc(100), *r = memalign(64, 100);
  p[0] = 1; q[0] = 2; r[0] = 3;
  printf("%d\n", ((unsigned long)p & 4095) == 0);
  return 0;
}
"""


def test_a_program_with_its_own_malloc_links_and_pvalloc_is_heap_pm(tmp_path):
    _build_traced(tmp_path, "mym", MYMALLOC, "-O1")
    r = _record(tmp_path / "mym.trace", tmp_path / "mym", pm="heap")
    assert r.returncode == 0 and r.stdout == "1\n", r.stderr
    assert not any(e[1] == "store" for e in _events(tmp_path / "mym.trace"))  # not PM: dropped
    _build_traced(tmp_path, "pv", PVALLOC, "-O1")
    r = _record(tmp_path / "pv.trace", tmp_path / "pv", pm="heap")
    assert r.returncode == 0 and r.stdout == "1\n", r.stderr
    stores = [e for e in _events(tmp_path / "pv.trace") if e[1] == "store"]
    assert [e[4] for e in stores] == ["1", "2", "3"], stores


# A main() that only computes on its stack: no traced event, but its work is counted at exit.
NOPM = r"""
#include <stdio.h>
int main(void) {
  int a[100]; long s = 0;
  for (int i = 0; i < 100; i++) a[i] = i;
  for (int i = 0; i < 100; i++) s += a[i];
  printf("%ld\n", s);
  return 0;
}
"""


def test_a_main_thread_without_events_keeps_its_computation(tmp_path):
    _build_traced(tmp_path, "nopm", NOPM, "-O0")
    out = tmp_path / "nopm.trace"
    r = subprocess.run(
        [*PMSIM, "trace", "record", "-o", str(out), "--", str(tmp_path / "nopm")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and r.stdout == "4950\n", r.stderr
    ev = _events(out)
    assert len(ev) == 1 and ev[0][:2] == ["T0", "compute"] and int(ev[0][2]) > 1000, ev
    assert "threads 1" in out.read_text()


def test_arguments_larger_than_one_environment_string_are_recorded(tmp_path):
    _build_traced(tmp_path, "nop", NOP, "-O1")
    # Each below the kernel's 128 KiB limit on one argument or environment string, both above it.
    big = "x" * 70_000
    r = _record(tmp_path / "big.bin", tmp_path / "nop", big, big)
    assert r.returncode == 0 and r.stdout == "ran 3\n", r.stderr
    assert _meta(tmp_path / "big.bin")["args"] == f"{big} {big}"


# A program that changes directory in a constructor, before main: the trace still lands where
# record was told (relative to where record started).
CHDIR = r"""
#include <immintrin.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor(101))) static void early(void) { if (chdir("/")) abort(); }
int main(void) { long *p = aligned_alloc(64, 64); p[0] = 1; _mm_clflush(p); _mm_sfence(); return 0; }
"""


def test_a_relative_trace_path_survives_an_early_chdir(tmp_path):
    _build_traced(tmp_path, "cd", CHDIR, "-O1")
    r = _record(Path("cd.trace"), tmp_path / "cd", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [e[1] for e in _events(tmp_path / "cd.trace")] == ["store", "clflush", "sfence"]


def test_a_missing_pmsim_tracer_src_is_refused(tmp_path):
    (tmp_path / "m.c").write_text(NOP)
    env = dict(os.environ, PMSIM_TRACER_SRC=str(tmp_path / "nonexistent"))
    r = subprocess.run(
        [*PMSIM, "trace", "cc", "-o", str(tmp_path / "m"), str(tmp_path / "m.c")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 2 and not (tmp_path / "m").exists()
    assert r.stderr.startswith(f"pmsim: error: PMSIM_TRACER_SRC={tmp_path / 'nonexistent'}: not a folder")
    assert len(r.stderr.splitlines()) == 1, r.stderr
