"""The tracer on memory accesses that are not plain IR loads and stores.

libc calls that copy or set memory (what `_FORTIFY_SOURCE` and `-fno-builtin` leave as calls)
must be traced like llvm.memcpy / memset; libatomic calls (16-byte and misaligned atomics) like
the native atomics they stand for; C11 release stores and acquire loads as `release` /
`acquire` with the value written; an rmw with the value it wrote; inline-asm flushes at the
address their operand computes (a displacement, an index, Intel syntax, raw `.byte` encodings),
and a flush whose address the asm does not tell is reported at compile time, never traced at a
wrong line.

Programs map their PM at a fixed address (`--pm range:`, as in test_tracer_vector.py) unless
they need the PM heap, so a PM byte at offset o is at 0x100000000 + o in the trace. Like
test_tracer.py these tests need clang and llvm-dev and fail, never skip, when they are missing.
"""

from __future__ import annotations

from pathlib import Path

from conftest import pmsim_cli
from test_tracer import _build_traced, _require_toolchain
from test_tracer_vector import PM_BASE, PM_RANGE, PRELUDE

PM_SIZE = 16 << 30

Event = tuple[int, str, int, int, "bytes | None"]  # thread, kind, PM offset, size, value


def _events(trace: Path, kinds: tuple[str, ...] | None = None) -> list[Event]:
    """(thread, kind, PM offset, size, value bytes or None) of the trace's events on PM (fences:
    offset -1), in the trace's global order; `kinds` keeps only those."""
    out = []
    for f in (ln.split() for ln in trace.read_text().splitlines() if ln.startswith("T")):
        thread, kind = int(f[0][1:]), f[1]
        if kinds is not None and kind not in kinds:
            continue
        if kind in ("mfence", "sfence"):
            out.append((thread, kind, -1, 0, None))
            continue
        if len(f) < 3 or kind in ("compute", "begin", "end"):
            continue
        addr = int(f[2], 16)
        if not PM_BASE <= addr < PM_BASE + PM_SIZE:
            continue
        default = 8 if kind in ("acquire", "release") else 1
        size = int(f[3]) if len(f) > 3 else default
        value = int(f[4], 16).to_bytes(size, "little") if len(f) > 4 else None
        out.append((thread, kind, addr - PM_BASE, size, value))
    return out


def _record(tmp_path: Path, name: str, pm: str = PM_RANGE, *args: str) -> tuple[str, list[Event]]:
    """Runs tmp_path/name under `pmsim trace record` (volatile accesses dropped; sync events
    are kept); returns its stdout and the PM events of its trace."""
    out = tmp_path / f"{name}.trace"
    r = pmsim_cli(
        "trace", "record", "--pm", pm, "--volatile", "drop", "-o", out, "--", tmp_path / name, *args
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, _events(out)


def _flat(events: list[Event]) -> list[tuple[str, int, int, bytes | None]]:
    return [e[1:] for e in events]


def _le(v: int, n: int) -> bytes:
    return v.to_bytes(n, "little")


# libc copies and sets with a length known only at run time: under -D_FORTIFY_SOURCE=2 they
# become __memcpy_chk, __memset_chk, __mempcpy_chk, __memmove_chk, __explicit_bzero_chk and
# __wmemcpy_chk (the destination's size is known from aligned_alloc); with -fno-builtin they stay
# memcpy, memset, ... Both builds must trace the same stores (and the loads of a PM source).
LIBC = r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
struct node { char key[32]; char val[32]; char pad[64]; };
int main(int argc, char **argv) {
  struct node *n = aligned_alloc(64, sizeof *n);
  const char *k = argc > 1 ? argv[1] : "some-key";
  size_t kl = strlen(k) + 1;                  /* 11 */
  memcpy(n->key, k, kl);                      /* store +0, 11 bytes */
  memset(n->val, 'v', kl);                    /* store +32 */
  char *e = mempcpy(n->pad, k, kl);           /* store +64 */
  memmove(n->pad + 1, n->pad, kl);            /* load +64, store +65 */
  explicit_bzero(n->val + 16, kl);            /* store +48, zeros */
  wchar_t w[2] = {L'x', L'y'};
  wmemcpy((wchar_t *)(n->pad + 32), w, kl / 5); /* store +96, 8 bytes */
  printf("%s %c %d %lc\n", n->key, n->val[0], (int)(e - n->pad), (wint_t)((wchar_t *)(n->pad + 32))[1]);
  return 0;
}
"""


def test_libc_copies_and_sets_are_traced_like_the_intrinsics(tmp_path):
    _require_toolchain()
    key = b"abcdefghij\0"
    expected = [
        ("store", 0, 11, key),
        ("store", 32, 11, b"v" * 11),
        ("store", 64, 11, key),
        ("load", 64, 11, None),
        ("store", 65, 11, key),
        ("store", 48, 11, bytes(11)),
        ("store", 96, 8, _le(ord("x"), 4) + _le(ord("y"), 4)),
    ]
    for name, flags in (
        ("fortified", ("-O2", "-D_FORTIFY_SOURCE=2")),
        ("nobuiltin", ("-O2", "-fno-builtin")),
    ):
        _build_traced(tmp_path, name, LIBC, *flags)
        out, events = _record(tmp_path, name, "heap", "abcdefghij")
        assert out == "abcdefghij v 11 y\n", name
        assert events and events[0][1] == "store", (name, events)
        base = events[0][2]  # the node: its first store
        assert base % 64 == 0, (name, events)
        got = [(k, off - base, size, v) for k, off, size, v in _flat(events) if k in ("load", "store")]
        assert got[: len(expected)] == expected, name
        # then printf's arguments n->val[0] and the second wide character
        assert sorted(got[len(expected) :]) == [("load", 32, 1, None), ("load", 100, 4, None)], name


# libatomic: 16-byte atomics without -mcx16 (clang calls the generic __atomic_compare_exchange,
# __atomic_load, __atomic_store, __atomic_exchange and the sized __atomic_fetch_add_16), a
# 24-byte struct across a line (an rmw of its first line's bytes and a store of the rest), and
# misaligned 8-byte atomics (the sized __atomic_*_8).
LIBATOMIC = (
    PRELUDE
    + r"""
typedef unsigned __int128 u128;
struct big { uint64_t a, b, c; };
struct __attribute__((packed)) odd { char c; uint64_t v; };
#define D1 (((u128)0x1122334455667788 << 64) | 0x99)
#define D2 (((u128)0xaabb << 64) | 0xcc)
int main(void) {
  char *pm = pm_map();
  u128 *p = (u128 *)(pm + 0x40), *e = (u128 *)(pm + 0x80);
  volatile uint64_t *w = (volatile uint64_t *)p, *we = (volatile uint64_t *)e;
  w[0] = 7; w[1] = 0;
  u128 exp = 7;
  int ok1 = __atomic_compare_exchange_n(p, &exp, D1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  we[0] = 5; we[1] = 0;
  int ok2 = __atomic_compare_exchange_n(p, e, D2, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); /* fails */
  u128 v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
  u128 r = __atomic_load_n(p, __ATOMIC_RELAXED);
  __atomic_store_n(p, v + 1, __ATOMIC_RELEASE);
  __atomic_fetch_add(p, 0x10, __ATOMIC_RELAXED);
  u128 old = __atomic_exchange_n(p, 3, __ATOMIC_SEQ_CST);
  struct big *b = (struct big *)(pm + 0xf0), nb = {1, 2, 3}, rb;
  __atomic_store(b, &nb, __ATOMIC_SEQ_CST);
  __atomic_load(b, &rb, __ATOMIC_ACQUIRE);
  struct odd *o = (struct odd *)(pm + 0x200);
  __atomic_store_n(&o->v, 0x1234, __ATOMIC_RELEASE);
  uint64_t f = __atomic_fetch_add(&o->v, 0x10, __ATOMIC_RELAXED);
  uint64_t x = __atomic_exchange_n(&o->v, 0x55, __ATOMIC_SEQ_CST);
  uint64_t ex = 0x55;
  int ok3 = __atomic_compare_exchange_n(&o->v, &ex, 0x66, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  uint64_t l = __atomic_load_n(&o->v, __ATOMIC_SEQ_CST);
  struct odd *o2 = (struct odd *)(pm + 0x23b); /* v at 0x23c..0x243: across a line */
  __atomic_store_n(&o2->v, 0x0102030405060708, __ATOMIC_SEQ_CST);
  printf("%d %d %d %d %lx %lx %lx %lx\n", ok1, ok2, ok3, (int)(r == v), (unsigned long)old,
         (unsigned long)rb.c, (unsigned long)(f + x), (unsigned long)l);
  return 0;
}
"""
)


def test_libatomic_calls_are_traced_as_the_atomics_they_are(tmp_path):
    _require_toolchain()
    _build_traced(tmp_path, "latomic", LIBATOMIC, "-O2", "-Wno-atomic-alignment", "-latomic")
    out, events = _record(tmp_path, "latomic")
    assert out == "1 0 1 1 aa 3 2478 66\n"
    d1 = (0x1122334455667788 << 64) | 0x99
    assert _flat(events) == [
        ("store", 0x40, 8, _le(7, 8)),
        ("store", 0x48, 8, _le(0, 8)),
        ("rmw", 0x40, 16, _le(d1, 16)),  # the CAS succeeded: the desired value
        ("store", 0x80, 8, _le(5, 8)),
        ("store", 0x88, 8, _le(0, 8)),
        ("load", 0x80, 16, None),  # the expected value, read from PM
        ("rmw", 0x40, 16, _le(d1, 16)),  # failed: the value the location keeps
        ("store", 0x80, 16, _le(d1, 16)),  # ... which the library copies into *expected
        ("acquire", 0x40, 16, None),
        ("load", 0x40, 16, None),
        ("release", 0x40, 16, _le(d1 + 1, 16)),
        ("rmw", 0x40, 16, _le(d1 + 0x11, 16)),
        ("rmw", 0x40, 16, _le(3, 16)),
        ("rmw", 0xF0, 16, _le(1, 8) + _le(2, 8)),  # 24 bytes across a line: rmw, then a store
        ("store", 0x100, 8, _le(3, 8)),
        ("acquire", 0xF0, 16, None),
        ("load", 0x100, 8, None),
        ("release", 0x201, 8, _le(0x1234, 8)),
        ("rmw", 0x201, 8, _le(0x1244, 8)),
        ("rmw", 0x201, 8, _le(0x55, 8)),
        ("rmw", 0x201, 8, _le(0x66, 8)),
        ("acquire", 0x201, 8, None),
        ("rmw", 0x23C, 4, _le(0x05060708, 4)),
        ("store", 0x240, 4, _le(0x01020304, 4)),
    ]


# C11 atomics: release stores and acquire loads synchronise (`release` with the value stored,
# `acquire`), seq_cst stores are rmws (xchg), relaxed ones plain accesses; every rmw records
# the value it wrote (a failing test_and_set wrote 1 too; a failing CAS rewrote the old value).
# Then message passing between two threads and a contended atomic_flag spinlock.
C11 = (
    PRELUDE
    + r"""
#include <pthread.h>
#include <stdatomic.h>
static atomic_int *ready;
static uint64_t *data, *out, *counter;
static atomic_flag *lock;
static void *producer(void *a) {
  *data = 42;
  _mm_clwb(data);
  _mm_sfence();
  atomic_store_explicit(ready, 1, memory_order_release);
  return a;
}
static void *consumer(void *a) {
  while (!atomic_load_explicit(ready, memory_order_acquire))
    ;
  *out = *data + 1;
  return a;
}
static void *locker(void *a) {
  for (int i = 0; i < 2000; i++) {
    while (atomic_flag_test_and_set_explicit(lock, memory_order_acquire))
      ;
    ++*counter;
    atomic_flag_clear_explicit(lock, memory_order_release);
  }
  return a;
}
int main(void) {
  char *pm = pm_map();
  atomic_int *x = (atomic_int *)(pm + 0x100);
  atomic_store_explicit(x, 5, memory_order_relaxed);
  atomic_store_explicit(x, 6, memory_order_release);
  atomic_store(x, 7);
  int s = atomic_load_explicit(x, memory_order_relaxed);
  s += atomic_load_explicit(x, memory_order_acquire);
  s += atomic_load(x);
  atomic_flag *f = (atomic_flag *)(pm + 0x140);
  int t1 = atomic_flag_test_and_set(f);
  int t2 = atomic_flag_test_and_set(f);
  atomic_flag_clear_explicit(f, memory_order_release);
  atomic_flag_clear(f);
  atomic_fetch_add_explicit(x, 3, memory_order_relaxed);
  int expected = 1;
  int c1 = atomic_compare_exchange_strong(x, &expected, 9);
  int c2 = atomic_compare_exchange_strong(x, &expected, 9);
  ready = (atomic_int *)(pm + 0x180);
  data = (uint64_t *)(pm + 0x1c0);
  out = (uint64_t *)(pm + 0x200);
  lock = (atomic_flag *)(pm + 0x240);
  counter = (uint64_t *)(pm + 0x280);
  pthread_t p, c, l1, l2;
  pthread_create(&c, NULL, consumer, NULL);
  pthread_create(&p, NULL, producer, NULL);
  pthread_join(p, NULL);
  pthread_join(c, NULL);
  pthread_create(&l1, NULL, locker, NULL);
  pthread_create(&l2, NULL, locker, NULL);
  pthread_join(l1, NULL);
  pthread_join(l2, NULL);
  printf("%d %d %d %d %d %lu %lu\n", s, t1, t2, c1, c2, (unsigned long)*out, (unsigned long)*counter);
  return 0;
}
"""
)


def test_c11_release_and_acquire_are_sync_events_with_their_values(tmp_path):
    _require_toolchain()
    _build_traced(tmp_path, "c11", C11, "-O2", "-mclwb", "-pthread")
    out, events = _record(tmp_path, "c11")
    assert out == "21 0 1 0 1 43 4000\n"
    main = [e for e in _flat(events) if 0 <= e[1] < 0x180]
    assert main == [
        ("store", 0x100, 4, _le(5, 4)),  # relaxed
        ("release", 0x100, 4, _le(6, 4)),
        ("rmw", 0x100, 4, _le(7, 4)),  # seq_cst: xchg
        ("load", 0x100, 4, None),
        ("acquire", 0x100, 4, None),
        ("acquire", 0x100, 4, None),
        ("rmw", 0x140, 1, b"\x01"),
        ("rmw", 0x140, 1, b"\x01"),  # it was set already: it still wrote 1
        ("release", 0x140, 1, b"\x00"),
        ("rmw", 0x140, 1, b"\x00"),  # atomic_flag_clear: seq_cst
        ("rmw", 0x100, 4, _le(10, 4)),
        ("rmw", 0x100, 4, _le(10, 4)),  # the CAS failed: the location keeps 10
        ("rmw", 0x100, 4, _le(9, 4)),
    ]
    # Message passing: the producer's release precedes, in the global order, the consumer's
    # last acquire (the one that saw it), which precedes the consumer's read of the data.
    rel = [i for i, e in enumerate(events) if e[1:3] == ("release", 0x180)]
    acq = [i for i, e in enumerate(events) if e[1:3] == ("acquire", 0x180)]
    assert len(rel) == 1 and events[rel[0]][3:] == (4, _le(1, 4)) and acq
    consumer = events[acq[-1]][0]
    assert rel[0] < acq[-1]
    assert events[rel[0]][0] != consumer
    # (the locker threads below may reuse the joined consumer's thread id)
    after = [e[1:4] for e in events[acq[-1] + 1 :] if e[0] == consumer and e[2] < 0x240]
    assert after == [("load", 0x1C0, 8), ("store", 0x200, 8)]
    # The spinlock: every test_and_set wrote 1 (also the failed ones, which may race with the
    # holder's clear), every unlock is a release of 0; 4000 critical sections.
    lock = [e[1:] for e in events if e[2] == 0x240]
    assert {(k, v) for k, _, _, v in lock} == {("rmw", b"\x01"), ("release", b"\x00")}
    assert sum(1 for k, *_ in lock if k == "release") == 4000
    assert sum(1 for e in events if e[1:3] == ("store", 0x280)) == 4000


# Inline-asm flushes whose operand computes an address: AT&T displacement, base + index *
# scale, an immediate operand as displacement, a register bound by its constraint, a tied
# operand, a constant the compiler holds in a register (`"r"(15L)` as the index); Intel syntax
# (-masm=intel) with `BYTE PTR [...]`. A flush whose register nothing binds is reported at
# compile time and not traced.
ASM_ATT = (
    PRELUDE
    + r"""
int main(int argc, char **argv) {
  char *pm = pm_map();
  for (int i = 0; i < 12; i++)
    *(volatile uint64_t *)(pm + 64 * i) = i;
  long idx = argc + 22; /* 24: run with one argument */
  char *q = pm + 0x1f8;
  asm volatile("clwb 64(%0)" :: "r"(pm) : "memory");                        /* 0x40 */
  asm volatile("clflushopt -64(%0)" :: "r"(pm + 0x100) : "memory");         /* 0xc0 */
  asm volatile("clwb 0x40(%0,%1,8)" :: "r"(pm), "r"(idx) : "memory");       /* 0x100 */
  asm volatile("clflush %c1(%0)" :: "r"(pm), "i"(0x140) : "memory");        /* 0x140 */
  asm volatile("clwb (,%0,1)" :: "r"(pm + 0x180) : "memory");               /* 0x180 */
  asm volatile("clwb 0x10(%%rdi)" :: "D"(pm + 0x1b0) : "memory");           /* 0x1c0 */
  asm volatile("clwb 8(%0)" : "+r"(q) :: "memory");                         /* 0x200 */
  asm volatile("clwb 8(%0,%1,8)" :: "r"(pm + 0x200), "r"(15L) : "memory");  /* 0x280 */
  asm volatile("clwb (%0,%1,1)" :: "r"(pm + 0x2c0), "r"(0L) : "memory");    /* 0x2c0 */
  if (argc > 5)
    asm volatile("clwb 64(%%rsi)" :: "D"(pm) : "memory");                   /* not traced */
  asm volatile("sfence" ::: "memory");
  printf("%ld\n", (long)(q - pm));
  return 0;
}
"""
)

ASM_INTEL = (
    PRELUDE
    + r"""
int main(int argc, char **argv) {
  char *pm = pm_map();
  long idx = argc + 7; /* 8 */
  asm volatile("clwb [%0]" :: "r"(pm) : "memory");                          /* 0 */
  asm volatile("clflushopt BYTE PTR [%0+64]" :: "r"(pm) : "memory");        /* 0x40 */
  asm volatile("clwb [%0+%1*8+0x80]" :: "r"(pm), "r"(idx) : "memory");      /* 0xc0 */
  asm volatile("clflush byte ptr [%0-64]" :: "r"(pm + 0x140) : "memory");   /* 0x100 */
  asm volatile("clwb [%0+%1*8]" :: "r"(pm + 0x100), "r"(16L) : "memory");   /* 0x180 */
  asm volatile("sfence" ::: "memory");
  printf("ok\n");
  return 0;
}
"""
)


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("pmsim trace cc: warning:")]


def test_inline_asm_flush_addresses_come_from_their_operands(tmp_path):
    _require_toolchain()
    src = tmp_path / "att.c"
    src.write_text(ASM_ATT)
    r = pmsim_cli("trace", "cc", "-O2", "-o", tmp_path / "att", src)
    assert r.returncode == 0, r.stderr
    assert _warnings(r.stderr) == [
        'pmsim trace cc: warning: inline asm not traced in main: "clwb 64(%%rsi)" flushes an address '
        "the tracer cannot tell from the asm's operands"
    ]
    out, events = _record(tmp_path, "att", PM_RANGE, "x")
    assert out == "504\n"
    assert [(k, off) for k, off, _, _ in _flat(events) if k != "store"] == [
        ("clwb", 0x40),
        ("clflushopt", 0xC0),
        ("clwb", 0x100),
        ("clflush", 0x140),
        ("clwb", 0x180),
        ("clwb", 0x1C0),
        ("clwb", 0x200),
        ("clwb", 0x280),
        ("clwb", 0x2C0),
        ("sfence", -1),
    ]
    src = tmp_path / "intel.c"
    src.write_text(ASM_INTEL)
    r = pmsim_cli("trace", "cc", "-O2", "-masm=intel", "-o", tmp_path / "intel", src)
    assert r.returncode == 0 and not _warnings(r.stderr), r.stderr
    out, events = _record(tmp_path, "intel")
    assert out == "ok\n"
    assert [(k, off) for k, off, _, _ in _flat(events)] == [
        ("clwb", 0),
        ("clflushopt", 0x40),
        ("clwb", 0xC0),
        ("clflush", 0x100),
        ("clwb", 0x180),
        ("sfence", -1),
    ]


# Flushes written as raw bytes, as the Linux kernel does for assemblers that lack the
# mnemonics: the ModRM's register is the operand bound to it by its constraint ("a": %rax,
# "D": %rdi), with a disp8; a `.byte 0x3e` (DS) prefix is no instruction. A flush through a
# register nothing binds is reported as such (it writes no memory), xsaveopt as a write.
ASM_BYTES = (
    PRELUDE
    + r"""
__attribute__((noinline)) void never_called(char *pm, char *area) {
  asm volatile(".byte 0x66, 0x0f, 0xae, 0x36" :: "D"(pm) : "memory");    /* clwb (%rsi): unbound */
  asm volatile(".byte 0x0f, 0xae, 0x30" :: "a"(area) : "memory");        /* xsaveopt (%rax) */
}
int main(int argc, char **argv) {
  char *pm = pm_map();
  for (int i = 0; i < 8; i++)
    *(volatile uint64_t *)(pm + 64 * i) = i;
  asm volatile(".byte 0x66, 0x0f, 0xae, 0x30" : "+m"(*(volatile char *)pm) : "a"(pm));  /* clwb 0 */
  asm volatile(".byte 0x66, 0x0f, 0xae, 0x38" :: "a"(pm + 0x40) : "memory");           /* clflushopt */
  asm volatile(".byte 0x0f, 0xae, 0x38" :: "a"(pm + 0x80) : "memory");                 /* clflush */
  asm volatile(".byte 0x66, 0x0f, 0xae, 0x37" :: "D"(pm + 0xc0) : "memory");           /* clwb (%rdi) */
  asm volatile(".byte 0x66, 0x0f, 0xae, 0x77, 0x40" :: "D"(pm + 0xc0) : "memory");     /* 0x40(%rdi) */
  asm volatile(".byte 0x3e; clflush %0" : "+m"(*(volatile char *)(pm + 0x140)));       /* clflush */
  asm volatile(".byte 0x0f, 0xae, 0xf8" ::: "memory");                                  /* sfence */
  if (argc > 5)
    never_called(pm, pm);
  printf("ok\n");
  return 0;
}
"""
)


def test_raw_byte_flushes_are_decoded(tmp_path):
    _require_toolchain()
    src = tmp_path / "bytes.c"
    src.write_text(ASM_BYTES)
    r = pmsim_cli("trace", "cc", "-O2", "-o", tmp_path / "bytes", src)
    assert r.returncode == 0, r.stderr
    assert _warnings(r.stderr) == [
        'pmsim trace cc: warning: inline asm not traced in never_called: ".byte 0x66, 0x0f, 0xae, 0x36" '
        "flushes an address the tracer cannot tell from the asm's operands",
        'pmsim trace cc: warning: inline asm not traced in never_called: ".byte 0x0f, 0xae, 0x30" '
        "writes memory the tracer does not see",
    ]
    out, events = _record(tmp_path, "bytes")
    assert out == "ok\n"
    assert [(k, off) for k, off, _, _ in _flat(events) if k != "store"] == [
        ("clwb", 0),
        ("clflushopt", 0x40),
        ("clflush", 0x80),
        ("clwb", 0xC0),
        ("clwb", 0x100),
        ("clflush", 0x140),
        ("sfence", -1),
    ]
