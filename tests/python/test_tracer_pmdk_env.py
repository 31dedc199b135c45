"""The tracer's PMDK wrappers record the flushes PMDK really executes.

libpmem chooses its flush once at start-up (PMDK src/libpmem/pmem.c `pmem_init`,
src/libpmem2/x86_64/init.c): with PMEM_NO_FLUSH=1 (how benchmarks emulate eADR) it flushes
nothing (pmem_persist is its drain's sfence, copies take their _eadr variants), PMEM_NO_FLUSH=0
flushes even on eADR; PMEM_NO_CLWB=1 makes it flush with clflushopt, with PMEM_NO_CLFLUSHOPT=1
too with clflush, whose drain has no sfence. libpmem2 does not read PMEM_NO_FLUSH: a map's store
granularity says (PMEM2_FORCE_GRANULARITY=BYTE: no flush). An msync (pmem_msync, a libpmem2
page-granularity persist, libpmemobj's persist on a pool that is not pmem, the program's own
msync) writes back the dirty lines of whole pages, so the lines of those pages the program
stored to are flushed in the trace too.

Like test_tracer.py these tests need clang, llvm-dev and PMDK's headers and fail, never skip,
when they are missing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import PMSIM
from test_tracer import _build_traced, _require_toolchain

import pmsim

PM_BASE = 0x1_0000_0000
FLUSH_KINDS = ("clwb", "clflushopt", "clflush")
KINDS = ("store", "ntstore", *FLUSH_KINDS, "sfence", "mfence")


@pytest.fixture(scope="module", autouse=True)
def _toolchain() -> None:
    _require_toolchain()


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _cpu_flush(no_clwb: bool = False, no_clflushopt: bool = False) -> str:
    """The flush libpmem picks on this CPU (pmem2_arch_init), with PMEM_NO_CLWB /
    PMEM_NO_CLFLUSHOPT as given."""
    flags = _cpu_flags()
    if "clwb" in flags and not no_clwb:
        return "clwb"
    if "clflushopt" in flags and not no_clflushopt:
        return "clflushopt"
    return "clflush"


def _record(tmp_path: Path, name: str, *args: str | Path, pm: str = "pmdk", **env: str) -> Path:
    """Records tmp_path/name with `env` added to the environment (PMEM_* knobs unset unless
    given); returns the text trace."""
    out = tmp_path / f"{name}-{len(list(tmp_path.glob('*.trace')))}.trace"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PMEM_", "PMEM2_"))}
    e.update(env)
    opts = ["--pm", pm, "--volatile", "drop", "--compute", "drop", "-o", str(out)]
    cmd = [*PMSIM, "trace", "record", *opts, "--", str(tmp_path / name), *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _events(trace: Path, base: int = 0) -> list[tuple[str, int]]:
    """(kind, offset from the trace's PM base minus `base`) of the PM stores, flushes and fences
    (fences: offset -1), in order."""
    out = []
    for f in (ln.split() for ln in trace.read_text().splitlines() if ln.startswith("T")):
        if f[1] not in KINDS:
            continue
        if f[1] in ("sfence", "mfence"):
            out.append((f[1], -1))
            continue
        a = int(f[2], 16)
        if PM_BASE <= a < PM_BASE + (16 << 30):
            out.append((f[1], a - PM_BASE - base))
    return out


def _lint(trace: Path) -> dict:
    """`pmsim trace lint`'s report (its API: the stores never persisted at the end)."""
    return pmsim.trace_lint(str(trace))


# libpmem: a persisted word; a 64 B copy (below the movnt threshold: temporal, flushed) and a
# 512 B copy (non-temporal unless libpmem does not flush: its _eadr copy stores temporally
# without flags); NODRAIN copies asking NONTEMPORAL (non-temporal also without flush) and WC
# (temporal without flush); a 100 B set without drain, then a drain. The file is on a normal
# file system.
LIBPMEM = r"""
#include <libpmem.h>
#include <stdio.h>
int main(int argc, char **argv) {
  size_t len; int is_pmem;
  char *p = pmem_map_file(argv[1], 1 << 16, PMEM_FILE_CREATE, 0644, &len, &is_pmem);
  if (!p) { perror("map"); return 1; }
  static char src[512] = "persistent";
  *(volatile long *)p = 42;
  pmem_persist(p, 8);
  pmem_memcpy_persist(p + 128, src, 64);
  pmem_memcpy_persist(p + 1024, src, 512);
  pmem_memcpy(p + 2048, src, 128, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
  pmem_memcpy(p + 2304, src, 64, PMEM_F_MEM_WC | PMEM_F_MEM_NODRAIN);
  pmem_memset_nodrain(p + 256, 0, 100);
  pmem_drain();
  pmem_unmap(p, len);
  return 0;
}
"""


def _libpmem_expected(flush: str | None, nt: bool = True) -> list[tuple[str, int]]:
    """What the LIBPMEM program executes when libpmem flushes with `flush` (None: not at all)."""
    drain = [("sfence", -1)] if flush != "clflush" else []
    fl = (lambda a: [(flush, a)]) if flush else (lambda a: [])
    if nt:  # 8 whole lines non-temporally; clflush's copy fences its ntstores itself
        big = [("ntstore", 1024 + 64 * i) for i in range(8)] + (
            [("sfence", -1)] if flush == "clflush" else []
        )
    else:
        big = [("store", 1024 + 64 * i) for i in range(8)]
    # NONTEMPORAL: ntstores, which clflush's copy and the _eadr one fence themselves; WC: a
    # non-temporal copy when flushing, a plain store without
    barrier = [("sfence", -1)] if flush in ("clflush", None) else []
    wc = (
        [("ntstore", 2304)] + ([("sfence", -1)] if flush == "clflush" else []) if flush else [("store", 2304)]
    )
    return [
        ("store", 0), *fl(0), *drain,
        ("store", 128), *fl(128), *drain,
        *big, *drain,
        ("ntstore", 2048), ("ntstore", 2112), *barrier,
        *wc,
        ("store", 256), ("store", 320), *fl(256), *fl(320), *drain,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "flush"),
    [
        ({}, _cpu_flush()),
        ({"PMEM_NO_FLUSH": "0"}, _cpu_flush()),
        ({"PMEM_NO_FLUSH": "1"}, None),
        ({"PMEM_NO_FLUSH": "1", "PMEM_NO_CLWB": "1", "PMEM_NO_CLFLUSHOPT": "1"}, None),
        ({"PMEM_NO_CLWB": "1"}, _cpu_flush(no_clwb=True)),
        ({"PMEM_NO_CLWB": "1", "PMEM_NO_CLFLUSHOPT": "1"}, "clflush"),
        ({"PMEM_NO_FLUSH": "yes"}, _cpu_flush()),  # only "1" and "0" mean anything
    ],
    ids=[
        "default",
        "no-flush-0",
        "no-flush-1",
        "no-flush-and-no-clwb",
        "no-clwb",
        "clflush",
        "no-flush-other",
    ],
)
def test_libpmem_flushes_as_its_environment_says(tmp_path, env, flush):
    _build_traced(tmp_path, "lp", LIBPMEM, "-O1", "-lpmem")
    trace = _record(tmp_path, "lp", tmp_path / "f.pmem", **env)
    got = _events(trace)
    assert got == _libpmem_expected(flush, nt=flush is not None), got
    lint = _lint(trace)
    if flush is None:
        # Without a flush the program loses its stores on ADR hardware: lint names them all.
        assert lint["never_flushed"] == lint["unpersisted_stores"] == 13, lint
        assert not any(k in FLUSH_KINDS for k, _ in got)
    else:
        assert lint["unpersisted_stores"] == 0, lint


# libpmemobj on a pool made pmem by PMEM_IS_PMEM_FORCE=1 persists through pmem_persist: under
# PMEM_NO_FLUSH=1 the root's lines are never flushed, by default they are.
POOL = r"""
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
struct root { uint64_t a, pad[15], b; };
int main(int argc, char **argv) {
  unlink(argv[1]);
  PMEMobjpool *pop = pmemobj_create(argv[1], "env", PMEMOBJ_MIN_POOL, 0644);
  if (!pop) { perror("pool"); return 1; }
  struct root *r = pmemobj_direct(pmemobj_root(pop, sizeof(struct root)));
  r->a = 1;
  r->b = 2;
  pmemobj_persist(pop, &r->a, sizeof r->a);
  pmemobj_persist(pop, &r->b, sizeof r->b);
  printf("%p\n", (void *)r);
  pmemobj_close(pop);
  return 0;
}
"""


def _root_events(trace: Path) -> tuple[list[tuple[str, int]], int, int]:
    """The events from the program's own two stores on (the last two; libpmemobj's zeroing of the
    root comes before) on their lines, and the two stores' offsets."""
    ev = _events(trace)
    at = [i for i, (k, _) in enumerate(ev) if k == "store"][-2:]
    a, b = ev[at[0]][1], ev[at[1]][1]
    assert b - a == 128, ev
    lines = {a & ~63, b & ~63}
    return [(k, x) for k, x in ev[at[0] :] if k != "sfence" and x & ~63 in lines], a, b


@pytest.mark.parametrize(("no_flush", "flush"), [("0", _cpu_flush()), ("1", None)])
def test_libpmemobj_persists_through_libpmem_and_its_environment(tmp_path, no_flush, flush):
    _build_traced(tmp_path, "pool", POOL, "-O1", "-lpmemobj")
    trace = _record(tmp_path, "pool", tmp_path / "p.pool", PMEM_IS_PMEM_FORCE="1", PMEM_NO_FLUSH=no_flush)
    got, a, b = _root_events(trace)
    want = [("store", a), ("store", b)]
    if flush:
        want += [(flush, a & ~63), (flush, b & ~63)]
    assert got == want, got
    lint = _lint(trace)
    assert (lint["never_flushed"] > 0) == (flush is None), lint


# libpmem2: PMEM_NO_FLUSH is libpmem's only. A cache-line map flushes with the CPU's flush (clflush
# under PMEM_NO_CLWB=1 PMEM_NO_CLFLUSHOPT=1, and libpmem2's drain still fences); a byte map
# (PMEM2_FORCE_GRANULARITY=BYTE: eADR) flushes nothing, its persist is an sfence.
PMEM2 = r"""
#include <fcntl.h>
#include <libpmem2.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
  struct pmem2_config *cfg; struct pmem2_source *src; struct pmem2_map *map;
  if (fd < 0 || ftruncate(fd, 1 << 16) || pmem2_config_new(&cfg) || pmem2_source_from_fd(&src, fd) ||
      pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE) ||
      pmem2_map_new(&map, cfg, src)) { pmem2_perror("pmem2"); return 1; }
  char *p = pmem2_map_get_address(map);
  static char buf[64] = "persistent";
  *(volatile uint64_t *)p = 7;
  pmem2_get_persist_fn(map)(p, 8);
  pmem2_get_memcpy_fn(map)(p + 64, buf, 64, 0);
  printf("%d\n", (int)pmem2_map_get_store_granularity(map));
  pmem2_map_delete(&map);
  return 0;
}
"""


@pytest.mark.parametrize(
    ("env", "gran", "flush"),
    [
        ({"PMEM2_FORCE_GRANULARITY": "CACHE_LINE"}, 1, _cpu_flush()),
        ({"PMEM2_FORCE_GRANULARITY": "CACHE_LINE", "PMEM_NO_FLUSH": "1"}, 1, _cpu_flush()),
        (
            {"PMEM2_FORCE_GRANULARITY": "CACHE_LINE", "PMEM_NO_CLWB": "1", "PMEM_NO_CLFLUSHOPT": "1"},
            1,
            "clflush",
        ),
        ({"PMEM2_FORCE_GRANULARITY": "BYTE"}, 0, None),
    ],
    ids=["cache-line", "cache-line-no-flush-env", "cache-line-clflush", "byte"],
)
def test_libpmem2_flushes_as_its_map_granularity_says(tmp_path, env, gran, flush):
    _build_traced(tmp_path, "pm2", PMEM2, "-O1", "-lpmem2")
    trace = _record(tmp_path, "pm2", tmp_path / "f", **env)
    fl = (lambda a: [(flush, a)]) if flush else (lambda a: [])
    want = [("store", 0), *fl(0), ("sfence", -1), ("store", 64), *fl(64), ("sfence", -1)]
    assert _events(trace) == want
    r = subprocess.run(
        [tmp_path / "pm2", tmp_path / "g"], capture_output=True, text=True, env={**os.environ, **env}
    )
    assert r.stdout == f"{gran}\n", r.stderr


# An msync writes back whole pages. The program stores to lines 0, 2 and 3 of a page, persists
# line 3 itself, then makes line 0 durable the page way: line 2 (stored to, dirty) is written
# back too, line 3 (already flushed) and the lines never stored to are not. Four ways: libpmem's
# pmem_msync, a libpmem2 page-granularity persist, libpmemobj's persist on a pool that is not
# pmem (it calls pmem_msync), and the program's own msync of a DAX file mapping.
MSYNC = r"""
#include <fcntl.h>
#include <libpmem.h>
#include <libpmem2.h>
#include <libpmemobj.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
  char *p; PMEMobjpool *pop = NULL; struct pmem2_map *map = NULL; size_t len = 1 << 16;
  if (!strcmp(argv[1], "pmem_msync")) {
    int is_pmem;
    p = pmem_map_file(argv[2], len, PMEM_FILE_CREATE, 0644, &len, &is_pmem);
  } else if (!strcmp(argv[1], "pmem2")) {
    int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
    struct pmem2_config *cfg; struct pmem2_source *src;
    if (fd < 0 || ftruncate(fd, len) || pmem2_config_new(&cfg) || pmem2_source_from_fd(&src, fd) ||
        pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE) ||
        pmem2_map_new(&map, cfg, src)) { pmem2_perror("pmem2"); return 1; }
    p = pmem2_map_get_address(map);
  } else if (!strcmp(argv[1], "pmemobj")) {
    unlink(argv[2]);
    pop = pmemobj_create(argv[2], "msync", PMEMOBJ_MIN_POOL, 0644);
    if (!pop) { perror("pool"); return 1; }
    p = pmemobj_direct(pmemobj_root(pop, 8192));
    p = (char *)(((uintptr_t)p + 4095) & ~(uintptr_t)4095); /* a page of the root object */
  } else {
    int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ftruncate(fd, len)) return 1;
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (!p || p == MAP_FAILED) { perror("map"); return 1; }
  p[0] = 1;
  p[128] = 2;
  p[192] = 3;
  pmem_persist(p + 192, 1);
  if (!strcmp(argv[1], "pmem_msync")) pmem_msync(p + 8, 8);
  else if (map) pmem2_get_persist_fn(map)(p + 8, 8);
  else if (pop) pmemobj_persist(pop, p + 8, 8);
  else if (msync(p, 64, MS_SYNC)) return 2;
  printf("%s\n", argv[1]);
  return 0;
}
"""


@pytest.mark.parametrize("how", ["pmem_msync", "pmem2", "pmemobj", "msync"])
def test_an_msync_writes_back_the_stored_lines_of_its_pages(tmp_path, how):
    _build_traced(tmp_path, "ms", MSYNC, "-O1", "-lpmem", "-lpmem2", "-lpmemobj")
    dax = tmp_path / "dax"
    dax.mkdir()
    pm = f"dax:{dax}" if how == "msync" else "pmdk"
    trace = _record(tmp_path, "ms", how, dax / "f", pm=pm)
    ev = _events(trace)
    first = [i for i, (k, _) in enumerate(ev) if k == "store"][-3]  # libpmemobj's zeroing first
    page = ev[first][1]
    tail = [(k, a - page if a >= 0 else a) for k, a in ev[first:]]
    flush = _cpu_flush()
    assert tail == [
        ("store", 0), ("store", 128), ("store", 192), (flush, 192), ("sfence", -1),
        ("clwb", 0), ("clwb", 128), ("sfence", -1),
    ], tail  # fmt: skip
    lint = _lint(trace)
    assert lint["unpersisted_stores"] == 0, lint
