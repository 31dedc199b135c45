"""The tracer on programs shaped differently from the examples: an instrumented shared library
the program loads with ``dlopen`` (a plugin, not a link-time dependency), ``--pm dax:/`` (every
file the program maps shared), and libpmem's ``PMEM_F_MEM_WC`` copy (non-temporal on x86-64).
Each case records a small C program and checks the trace against what the program did.

These tests need clang and llvm-dev (scripts/setup-tracer.sh); they fail, never skip, without.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import pmsim_cli
from test_tracer import _build_traced, _require_toolchain
from test_tracer_processes import _events, _record

import pmsim


@pytest.fixture(scope="module", autouse=True)
def _toolchain() -> None:
    _require_toolchain()


# plog.so (instrumented, -fPIC -shared): plog_append(v) stores v into the next word of a PM log,
# clwb + sfence, then the count word, clwb + sfence; it marks its work with pmsim_begin/end.
PLUGIN = r"""
#include <immintrin.h>
#include <pmsim.h>
#include <stdint.h>
#include <stdlib.h>
static uint64_t *g_log;
void plog_append(uint64_t v) {
  if (!g_log) g_log = aligned_alloc(64, 4096);
  pmsim_begin("append");
  uint64_t n = g_log[0];
  g_log[1 + n] = v;
  _mm_clwb(&g_log[1 + n]);
  _mm_sfence();
  g_log[0] = n + 1;
  _mm_clwb(&g_log[0]);
  _mm_sfence();
  pmsim_end("append");
}
"""

# host LIB: dlopen(LIB) (a plugin the executable was not linked against), 3 appends.
HOST = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  void (*append)(uint64_t) = (void (*)(uint64_t))dlsym(h, "plog_append");
  for (uint64_t i = 0; i < 3; i++) append(100 + i);
  return 0;
}
"""


def test_an_instrumented_library_loaded_with_dlopen_is_traced(tmp_path):
    src = tmp_path / "plog.c"
    src.write_text(PLUGIN)
    lib = tmp_path / "libplog.so"
    pmsim_cli("trace", "cc", "-O2", "-fPIC", "-shared", "-mclwb", "-o", lib, src, check=True)
    _build_traced(tmp_path, "host", HOST, "-O1", "-ldl")
    r = _record(tmp_path / "h.trace", tmp_path / "host", lib)
    # Before the fix the executable did not export the runtime's symbols: dlopen failed with
    # "undefined symbol: __pmt_icount".
    assert r.returncode == 0, r.stderr
    ev = _events(tmp_path / "h.trace")
    stores = [e for e in ev if e[1] == "store"]
    assert [int(e[4], 16) for e in stores] == [100, 1, 101, 2, 102, 3]
    assert sum(e[1] == "clwb" for e in ev) == 6 and sum(e[1] == "sfence" for e in ev) == 6
    assert [e[1] for e in ev if e[1] in ("begin", "end")] == ["begin", "end"] * 3


# map FILE: FILE mapped shared, 2 words stored and flushed, one sfence.
MAP = r"""
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 4096)) return 1;
  uint64_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  for (int i = 0; i < 2; i++) { m[8 * i] = i + 7; _mm_clwb(&m[8 * i]); }
  _mm_sfence();
  return 0;
}
"""


def test_pm_dax_root_makes_every_shared_file_mapping_pm(tmp_path):
    _build_traced(tmp_path, "map", MAP, "-O1", "-mclwb")
    for i, (pm, cwd) in enumerate([("dax:/", None), ("dax:.", Path("/"))]):
        out = tmp_path / f"r{i}.trace"
        r = _record(out, tmp_path / "map", tmp_path / "f", pm=pm, cwd=cwd)
        assert r.returncode == 0 and "pmsim: hint" not in r.stderr, r.stderr
        ev = _events(out)
        assert [e[2] for e in ev if e[1] == "store"] == ["0x100000000", "0x100000040"]
        assert sum(e[1] == "clwb" for e in ev) == 2


# wc FILE: libpmem copies of one line each: PMEM_F_MEM_WC (= NONTEMPORAL on x86-64: ntstore,
# sfence), NONTEMPORAL (the same), WC | NOFLUSH (libpmem's NOFLUSH copies with plain stores and
# neither flushes nor drains), TEMPORAL (store, clwb, sfence).
WC = r"""
#include <libpmem.h>
#include <stdio.h>
int main(int argc, char **argv) {
  size_t mapped; int is_pmem;
  char *p = pmem_map_file(argv[1], 4096, PMEM_FILE_CREATE, 0600, &mapped, &is_pmem);
  if (!p) { perror("map"); return 1; }
  char src[64];
  for (int i = 0; i < 64; i++) src[i] = (char)i;
  pmem_memcpy(p, src, 64, PMEM_F_MEM_WC);
  pmem_memcpy(p + 64, src, 64, PMEM_F_MEM_NONTEMPORAL);
  pmem_memcpy(p + 128, src, 64, PMEM_F_MEM_WC | PMEM_F_MEM_NOFLUSH);
  pmem_memcpy(p + 192, src, 64, PMEM_F_MEM_TEMPORAL);
  pmem_unmap(p, mapped);
  return 0;
}
"""


def test_libpmem_write_combining_copies_are_non_temporal(tmp_path):
    _build_traced(tmp_path, "wc", WC, "-O1", "-lpmem")
    r = _record(tmp_path / "wc.trace", tmp_path / "wc", tmp_path / "f.pmem", pm="pmdk")
    assert r.returncode == 0, r.stderr
    ev = [e[1:3] for e in _events(tmp_path / "wc.trace") if e[1] in ("store", "ntstore", "clwb", "sfence")]
    assert ev == [
        ["ntstore", "0x100000000"],
        ["sfence"],
        ["ntstore", "0x100000040"],
        ["sfence"],
        ["store", "0x100000080"],
        ["store", "0x1000000c0"],
        ["clwb", "0x1000000c0"],
        ["sfence"],
    ]


# big FILE: libpmem copies with no flag choosing: pmem_memcpy_persist of 512 B at a line (at least
# libpmem's movnt threshold, 256 B: non-temporal), of 100 B (below it: stores and clwb), of
# 300 B starting mid-line (ntstores for the whole lines, store + clwb for the partial ends).
BIG = r"""
#include <libpmem.h>
#include <stdio.h>
int main(int argc, char **argv) {
  size_t mapped; int is_pmem;
  char *p = pmem_map_file(argv[1], 8192, PMEM_FILE_CREATE, 0600, &mapped, &is_pmem);
  if (!p) { perror("map"); return 1; }
  static char src[512];
  pmem_memcpy_persist(p, src, 512);
  pmem_memcpy_persist(p + 1024, src, 100);
  pmem_memcpy_persist(p + 2048 + 32, src, 300);
  pmem_unmap(p, mapped);
  return 0;
}
"""


def test_libpmem_copies_from_the_movnt_threshold_are_non_temporal(tmp_path, monkeypatch):
    _build_traced(tmp_path, "big", BIG, "-O1", "-lpmem")

    def kinds(name: str) -> list[tuple[str, int]]:
        r = _record(tmp_path / name, tmp_path / "big", tmp_path / "f.pmem", pm="pmdk")
        assert r.returncode == 0, r.stderr
        out = []
        for e in _events(tmp_path / name):
            if e[1] in ("store", "ntstore", "clwb", "sfence"):
                out.append((e[1], int(e[2], 16) - 0x1_0000_0000 if len(e) > 2 else -1))
        return out

    got = kinds("a.trace")
    first = [k for k in got if k[1] < 1024 and k[0] != "sfence"]
    assert first == [("ntstore", 64 * i) for i in range(8)], got  # 512 B: 8 whole lines, no clwb
    second = [k for k in got if 1024 <= k[1] < 2048]
    assert {k[0] for k in second} == {"store", "clwb"}, got
    third = [k for k in got if k[1] >= 2048]
    assert [k for k in third if k[0] == "ntstore"] == [("ntstore", 2048 + 64 * i) for i in range(1, 5)], got
    assert [k for k in third if k[0] == "clwb"] == [("clwb", 2048), ("clwb", 2048 + 320)], got
    assert sum(k[0] == "sfence" for k in got) == 3
    # libpmem's own knob moves the threshold; PMEM_NO_MOVNT=1 never copies non-temporally.
    monkeypatch.setenv("PMEM_MOVNT_THRESHOLD", "1024")
    assert not any(k[0] == "ntstore" for k in kinds("b.trace"))
    monkeypatch.delenv("PMEM_MOVNT_THRESHOLD")
    monkeypatch.setenv("PMEM_NO_MOVNT", "1")
    assert not any(k[0] == "ntstore" for k in kinds("c.trace"))


# own FILE: a program with its own pmem_persist (research code that predates PMDK ships one):
# it must link against the runtime and run its own, whose clflush and sfence are then traced.
OWN = r"""
#include <emmintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
void pmem_persist(const void *addr, size_t len) {
  for (uintptr_t a = (uintptr_t)addr & ~(uintptr_t)63; a < (uintptr_t)addr + len; a += 64)
    _mm_clflush((const void *)a);
  _mm_sfence();
}
int main(void) {
  uint64_t *p = aligned_alloc(64, 256);
  p[0] = 1;
  p[8] = 2;
  pmem_persist(p, 72);
  return 0;
}
"""

# deep FILE: pmem_deep_flush writes back its range (a clwb per line) and does not fence.
DEEP = r"""
#include <libpmem.h>
#include <stdio.h>
int main(int argc, char **argv) {
  size_t mapped; int is_pmem;
  char *p = pmem_map_file(argv[1], 4096, PMEM_FILE_CREATE, 0600, &mapped, &is_pmem);
  if (!p) { perror("map"); return 1; }
  p[0] = 1;
  p[64] = 2;
  pmem_deep_flush(p, 65);
  pmem_drain();
  pmem_unmap(p, mapped);
  return 0;
}
"""

# noflush: stores to PM, never a flush or a fence: the program's x86 code, not a design-neutral
# trace, so lint names both stores.
NOFLUSH = r"""
#include <stdint.h>
#include <stdlib.h>
int main(void) {
  volatile uint64_t *p = aligned_alloc(64, 128);
  p[0] = 1;
  p[8] = 2;
  return 0;
}
"""


def test_a_program_with_its_own_pmem_persist_links_and_runs_it(tmp_path):
    _build_traced(tmp_path, "own", OWN, "-O1")
    r = _record(tmp_path / "own.trace", tmp_path / "own")
    assert r.returncode == 0, r.stderr
    ev = [e[1] for e in _events(tmp_path / "own.trace") if e[1] in ("store", "clflush", "sfence")]
    assert ev == ["store", "store", "clflush", "clflush", "sfence"]


def test_pmem_deep_flush_is_traced_as_the_flushes_it_makes(tmp_path):
    _build_traced(tmp_path, "deep", DEEP, "-O1", "-lpmem")
    r = _record(tmp_path / "deep.trace", tmp_path / "deep", tmp_path / "f.pmem", pm="pmdk")
    assert r.returncode == 0, r.stderr
    ev = [e[1:3] for e in _events(tmp_path / "deep.trace") if e[1] in ("store", "clwb", "sfence")]
    assert ev == [
        ["store", "0x100000000"],
        ["store", "0x100000040"],
        ["clwb", "0x100000000"],
        ["clwb", "0x100000040"],
        ["sfence"],
    ]
    lint = pmsim_cli("trace", "lint", tmp_path / "deep.trace")
    assert lint.returncode == 0, lint.stdout


def test_lint_of_a_recorded_program_that_never_flushes_names_its_stores(tmp_path):
    _build_traced(tmp_path, "noflush", NOFLUSH, "-O1")
    r = _record(tmp_path / "n.trace", tmp_path / "noflush")
    assert r.returncode == 0, r.stderr
    lint = pmsim_cli("trace", "lint", tmp_path / "n.trace")
    assert lint.returncode == 1, lint.stdout
    assert "2 store(s)" in lint.stdout and "2 never flushed" in lint.stdout, lint.stdout
    # It is the program's x86 code: baseline runs it as written (no clwb it never issues), in
    # the text trace and in its binary conversion (which keeps the metadata).
    pmsim_cli("trace", "convert", tmp_path / "n.trace", tmp_path / "n.bin", check=True)
    for t in ("n.trace", "n.bin"):
        s = pmsim.run("baseline", trace=tmp_path / t)
        assert s["promise"] == "x86" and s["design_stats"]["clwbs"] == 0, (t, s["promise"], s["design_stats"])
