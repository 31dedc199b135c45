"""The tracer on vector accesses with lane masks and on inline asm it must read closely.

Masked stores and loads (autovectorised `if` loops, AVX/AVX2/AVX-512 mask intrinsics),
scatters, gathers, compressing stores, expanding loads and maskmovdqu must be traced as exactly
the bytes of their active lanes; a locked instruction in asm is a full fence; a flush in
multi-instruction asm flushes the operand it names; asm that writes memory the tracer cannot
model is reported at compile time.

Every program maps its PM at a fixed address (`--pm range:`), so a PM byte at offset o is at
0x100000000 + o in the trace. Like test_tracer.py these tests need clang and llvm-dev and fail,
never skip, when they are missing. The AVX-512 parts are compiled for AVX-512 with target
attributes and run only where the CPU has it (the program says which ran).
"""

from __future__ import annotations

from pathlib import Path

from conftest import pmsim_cli
from test_tracer import _build_traced, _require_toolchain

PM_BASE = 0x1_0000_0000
PM_RANGE = "range:0x7e0000000000:0x10000"

PRELUDE = r"""
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#define PM_ADDR 0x7e0000000000UL
static char *pm_map(void) {
  void *p = mmap((void *)PM_ADDR, 0x10000, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p != (void *)PM_ADDR) {
    perror("mmap");
    exit(1);
  }
  return p;
}
/* clwb every line of [p, p+n), then sfence */
static void persist(const void *p, size_t n) {
  for (uintptr_t a = (uintptr_t)p & ~63UL; a < (uintptr_t)p + n; a += 64)
    _mm_clwb((void *)a);
  _mm_sfence();
}
"""


def _events(trace: Path) -> list[tuple[str, int, int, bytes | None]]:
    """(kind, PM offset, size, value bytes or None) of the trace's events on PM, in order;
    fences as (kind, -1, 0, None)."""
    out = []
    for f in (ln.split() for ln in trace.read_text().splitlines() if ln.startswith("T")):
        kind = f[1]
        if kind in ("mfence", "sfence"):
            out.append((kind, -1, 0, None))
        elif kind in ("store", "ntstore", "load", "rmw", "clwb", "clflush", "clflushopt"):
            addr = int(f[2], 16)
            if not PM_BASE <= addr < PM_BASE + 0x10000:
                continue
            size = int(f[3]) if len(f) > 3 else 1
            value = int(f[4], 16).to_bytes(size, "little") if len(f) > 4 else None
            out.append((kind, addr - PM_BASE, size, value))
    return out


def _record(tmp_path: Path, name: str, *args: str) -> tuple[str, list]:
    """Runs tmp_path/name under `pmsim trace record` (PM: the fixed range; volatile dropped);
    returns its stdout and the PM events of its trace."""
    out = tmp_path / f"{name}.bin"
    r = pmsim_cli("trace", "record", "--pm", PM_RANGE, "--volatile", "drop", "-o", out, "--",
                  tmp_path / name, *args)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    pmsim_cli("trace", "convert", out, tmp_path / f"{name}.trace", check=True)
    return r.stdout, _events(tmp_path / f"{name}.trace")


def _written(
    events: list, kinds: tuple[str, ...] = ("store",), lo: int = 0, hi: int = 0x10000
) -> dict[int, int]:
    """PM offset -> last byte value written by events of `kinds` in [lo, hi)."""
    out: dict[int, int] = {}
    for kind, off, size, value in events:
        if kind in kinds and lo <= off < hi:
            assert value is not None, (kind, off)
            for k in range(size):
                out[off + k] = value[k]
    return out


def _words(base: int, words: dict[int, int], esize: int = 8) -> dict[int, int]:
    """The bytes of little-endian elements {index: value} at PM offset `base`."""
    out = {}
    for i, v in words.items():
        for k, b in enumerate(v.to_bytes(esize, "little")):
            out[base + i * esize + k] = b
    return out


def _loaded(events: list, lo: int, hi: int) -> set[int]:
    """PM bytes in [lo, hi) read by load events."""
    return {
        off + k for kind, off, size, _ in events if kind == "load" and lo <= off < hi for k in range(size)
    }


# An `if` in a loop that clang -O3 vectorises into masked stores: pm[i] = key[i] * 3 where
# key[i] is odd. key is a global (volatile memory, dropped from the trace).
AUTOVEC = (
    PRELUDE
    + r"""
#define N 128
uint64_t key[N];
__attribute__((noinline)) void fill(uint64_t *restrict pm, const uint64_t *restrict k) {
  for (int i = 0; i < N; i++)
    if (k[i] & 1)
      pm[i] = k[i] * 3;
}
int main(void) {
  uint64_t *pm = (uint64_t *)pm_map();
  for (int i = 0; i < N; i++)
    key[i] = (uint64_t)i * 5 + (i % 3 == 0) + 0x100;
  fill(pm, key);
  persist(pm, N * 8);
  uint64_t s = 0;
  for (int i = 0; i < N; i++)
    s += key[i];
  printf("%lu\n", (unsigned long)s);
  return 0;
}
"""
)


def test_autovectorised_conditional_store_traces_only_the_written_words(tmp_path):
    _require_toolchain()
    flags = ("-O3", "-march=native", "-mclwb")
    _build_traced(tmp_path, "autovec", AUTOVEC, *flags)
    # The loop really is a masked store at this optimisation level (else this test tests nothing).
    ir = tmp_path / "autovec.ll"
    pmsim_cli("trace", "cc", *flags, "-S", "-emit-llvm", "-o", ir, tmp_path / "autovec.c", check=True)
    assert "@llvm.masked.store" in ir.read_text()
    _, events = _record(tmp_path, "autovec")
    keys = [i * 5 + (i % 3 == 0) + 0x100 for i in range(128)]
    expected = _words(0, {i: k * 3 for i, k in enumerate(keys) if k & 1})
    assert len(expected) == 8 * sum(k & 1 for k in keys) > 0
    assert _written(events) == expected
    assert not [e for e in events if e[0] == "ntstore"]
    # the stores come before the flushes of their lines and the final sfence
    kinds = [e[0] for e in events]
    assert kinds.index("clwb") > max(i for i, k in enumerate(kinds) if k == "store")
    assert kinds[-1] == "sfence" and kinds.count("clwb") == 128 * 8 // 64


# Each form writes its own 256 B of PM with a known pattern and mask, through masks the
# compiler cannot fold (volatile globals), then persists it. AVX-512 parts run only on AVX-512.
INTRINSICS = (
    PRELUDE
    + r"""
static volatile uint64_t m8 = 0xb5, m_scatter = 0x5b, m_compress = 0x96;
static volatile uint64_t m_load = 0x3c, m_gather = 0x21, m_expand = 0x0b;
static volatile int on = 1;
static volatile uint64_t sink;

__attribute__((target("avx512f"))) static void avx512_stores(char *pm) {
  __m512i v = _mm512_set_epi64(0x8888, 0x7777, 0x6666, 0x5555, 0x4444, 0x3333, 0x2222, 0x1111);
  _mm512_mask_storeu_epi64(pm, (__mmask8)m8, v);
  __m512i idx = _mm512_set_epi64(4, 15, 1, 9, 12, 3, 0, 7);
  __m512i sv = _mm512_set_epi64(0xa7, 0xa6, 0xa5, 0xa4, 0xa3, 0xa2, 0xa1, 0xa0);
  _mm512_mask_i64scatter_epi64(pm + 0x200, (__mmask8)m_scatter, idx, sv, 8);
  __m512i cv = _mm512_set_epi64(0xc7, 0xc6, 0xc5, 0xc4, 0xc3, 0xc2, 0xc1, 0xc0);
  _mm512_mask_compressstoreu_epi64(pm + 0x400, (__mmask8)m_compress, cv);
}

__attribute__((target("avx512f"))) static void avx512_loads(char *pm) {
  __m512i a = _mm512_maskz_loadu_epi64((__mmask8)m_load, pm + 0x800);
  __m512i idx = _mm512_set_epi64(1, 2, 6, 3, 4, 5, 7, 0);
  __m512i g = _mm512_mask_i64gather_epi64(a, (__mmask8)m_gather, idx, pm + 0xa00, 8);
  __m512i e = _mm512_maskz_expandloadu_epi64((__mmask8)m_expand, pm + 0xb00);
  sink = _mm512_reduce_add_epi64(_mm512_add_epi64(g, e));
}

__attribute__((target("avx2"))) static void avx2_stores(char *pm) {
  __m256i m = _mm256_set_epi32(0, -on, 0, 0, 0, -on, -on, 0); /* lanes 1, 2, 6 */
  __m256i v = _mm256_set_epi32(0x107, 0x106, 0x105, 0x104, 0x103, 0x102, 0x101, 0x100);
  _mm256_maskstore_epi32((int *)(pm + 0x100), m, v);
}

__attribute__((target("avx2"))) static void avx2_loads(char *pm) {
  __m256i m = _mm256_set_epi32(-on, 0, 0, 0, 0, 0, 0, -on); /* lanes 0, 7 */
  __m256i a = _mm256_maskload_epi32((const int *)(pm + 0x900), m);
  __m256i idx = _mm256_set_epi32(0, 1, 2, 3, 4, 5, 6, 9);
  __m256i gm = _mm256_set_epi32(0, 0, -on, 0, 0, 0, 0, -on); /* lanes 0, 5 */
  __m256i g = _mm256_mask_i32gather_epi32(a, (const int *)(pm + 0xc00), idx, gm, 4);
  sink = (uint64_t)_mm256_extract_epi32(g, 0) + (uint64_t)_mm256_extract_epi32(g, 5);
}

int main(void) {
  char *pm = pm_map();
  int avx512 = __builtin_cpu_supports("avx512f");
  if (avx512)
    avx512_stores(pm);
  avx2_stores(pm);
  /* maskmovdqu: bytes 0, 1, 2, 5, 9, 10, 15 (the top bit of each mask byte) */
  __m128i bm = _mm_set_epi8(-128 * on, 0, 0, 0, 0, -1, -2, 0, 0, 0, -3, 0, 0, -4, -5, -6);
  __m128i bv = _mm_set_epi8(0x3f, 0x3e, 0x3d, 0x3c, 0x3b, 0x3a, 0x39, 0x38, 0x37, 0x36, 0x35, 0x34,
                            0x33, 0x32, 0x31, 0x30);
  _mm_maskmoveu_si128(bv, bm, pm + 0x300);
  persist(pm, 0x500);
  if (avx512)
    avx512_loads(pm);
  avx2_loads(pm);
  printf("avx512=%d\n", avx512 != 0);
  return 0;
}
"""
)


def test_mask_intrinsics_trace_exactly_the_active_lanes(tmp_path):
    _require_toolchain()
    _build_traced(tmp_path, "intr", INTRINSICS, "-O2", "-march=native", "-mclwb")
    out, events = _record(tmp_path, "intr")
    avx512 = out.strip() == "avx512=1"
    assert out.strip() in ("avx512=0", "avx512=1"), out
    expected: dict[int, int] = {}
    if avx512:
        # _mm512_mask_storeu_epi64, mask 0xb5: lanes 0, 2, 4, 5, 7
        expected |= _words(0, {i: 0x1111 * (i + 1) for i in (0, 2, 4, 5, 7)})
        # _mm512_mask_i64scatter_epi64, mask 0x5b: lanes 0, 1, 3, 4, 6 (indices 7, 0, 12, 9, 15)
        idx = [7, 0, 3, 12, 9, 1, 15, 4]
        expected |= _words(0x200, {idx[i]: 0xA0 + i for i in (0, 1, 3, 4, 6)})
        # _mm512_mask_compressstoreu_epi64, mask 0x96: lanes 1, 2, 4, 7 packed at the pointer
        expected |= _words(0x400, {k: 0xC0 + lane for k, lane in enumerate((1, 2, 4, 7))})
    # _mm256_maskstore_epi32: lanes 1, 2, 6
    expected |= _words(0x100, {i: 0x100 + i for i in (1, 2, 6)}, esize=4)
    assert _written(events, ("store",)) == expected
    # _mm_maskmoveu_si128: a non-temporal store of the bytes whose mask byte has its top bit set
    assert _written(events, ("ntstore",)) == {0x300 + i: 0x30 + i for i in (0, 1, 2, 5, 9, 10, 15)}
    # every written line flushed, then one sfence, before the loads
    kinds = [e[0] for e in events]
    assert "sfence" in kinds and all(k == "load" for k in kinds[kinds.index("sfence") + 1 :])
    # loads: only the active lanes' bytes
    if avx512:
        assert _loaded(events, 0x800, 0x900) == set(range(0x800 + 16, 0x800 + 48))  # lanes 2..5
        assert _loaded(events, 0xA00, 0xB00) == {
            0xA00 + 8 * i + k for i in (0, 6) for k in range(8)
        }  # idx 0, 6
        assert _loaded(events, 0xB00, 0xC00) == set(range(0xB00, 0xB00 + 24))  # popcount(0x0b) = 3
    else:
        # No AVX-512: its masked loads are not run (0x900..0xA00 is the AVX2 gather's, below).
        assert _loaded(events, 0x800, 0x900) == set() and _loaded(events, 0xA00, 0xC00) == set()
    assert _loaded(events, 0x900, 0xA00) == {0x900 + k for k in range(4)} | {0x91C + k for k in range(4)}
    assert _loaded(events, 0xC00, 0xD00) == {0xC00 + 4 * i + k for i in (9, 2) for k in range(4)}


# A scatter whose mask is all zero writes nothing; one with a single lane writes one word.
SCATTER_MASKS = (
    PRELUDE
    + r"""
static volatile uint64_t mask = 0;
__attribute__((target("avx512f"))) static void scatter(char *pm, uint64_t m) {
  __m512i idx = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  _mm512_mask_i64scatter_epi64(pm, (__mmask8)m, idx, _mm512_set1_epi64(0x77), 8);
}
int main(int argc, char **argv) {
  char *pm = pm_map();
  if (!__builtin_cpu_supports("avx512f")) {
    printf("no avx512\n");
    return 0;
  }
  scatter(pm, mask);
  scatter(pm + 64, mask | 0x40);
  persist(pm, 128);
  printf("ok\n");
  return 0;
}
"""
)


def test_scatter_lanes_with_mask_bit_zero_write_nothing(tmp_path):
    _require_toolchain()
    _build_traced(tmp_path, "scat", SCATTER_MASKS, "-O2", "-march=native", "-mclwb")
    out, events = _record(tmp_path, "scat")
    if out == "no avx512\n":  # the program cannot run a scatter on this CPU: it wrote nothing
        assert _written(events) == {}
        return
    assert out == "ok\n"
    assert _written(events) == _words(64, {6: 0x77})
    assert [e for e in events if e[0] == "store"] == [("store", 64 + 48, 8, (0x77).to_bytes(8, "little"))]


# asm the pass must read: a locked instruction as a full fence, and a flush that names its
# operand after another instruction's operand; recognised flush spellings keep working.
ASM = (
    PRELUDE
    + r"""
int main(void) {
  char *pm = pm_map();
  uint64_t *p = (uint64_t *)(pm + 0x240), *q = (uint64_t *)(pm + 0x80), *r = (uint64_t *)(pm + 0x400);
  uint64_t local = 5, slot = 1;
  *p = 0x1234;
  *q = 0x5678;
  *r = 0x9abc;
  asm volatile("prefetcht0 (%0)\n\tclwb (%1)" :: "r"(q), "r"(p) : "memory");       /* clwb p */
  asm volatile("lock; addl $0,(%%rsp)" ::: "memory", "cc");                          /* mfence */
  asm volatile("prefetcht0 %[a]\n\tclflushopt %[b]" :: [a] "m"(*q), [b] "m"(*r));     /* clflushopt r */
  asm volatile("lock orq $0, (%%rsp)" ::: "memory", "cc");                           /* mfence */
  asm volatile("xchg %0, %1" : "+r"(local), "+m"(slot));                             /* mfence */
  asm volatile("clwb %0" : "+m"(*q));                                                 /* clwb q */
  asm volatile(".byte 0x66; xsaveopt %0" : "+m"(*r));                                 /* clwb r */
  asm volatile(".byte 0x66; clflush %0" : "+m"(*p));                                  /* clflushopt p */
  asm volatile("clflush (%0)" :: "r"(q) : "memory");                                  /* clflush q */
  asm volatile("sfence" ::: "memory");
  asm volatile("mfence" ::: "memory");
  printf("%lu\n", (unsigned long)local);
  return 0;
}
"""
)


def test_inline_asm_lock_is_a_fence_and_flushes_name_their_operand(tmp_path):
    _require_toolchain()
    _build_traced(tmp_path, "asm", ASM, "-O2", "-mclwb")
    out, events = _record(tmp_path, "asm")
    assert out == "1\n"
    flow = [(k, off) for k, off, _, _ in events if k not in ("store", "load")]
    assert flow == [
        ("clwb", 0x240),
        ("mfence", -1),
        ("clflushopt", 0x400),
        ("mfence", -1),
        ("mfence", -1),
        ("clwb", 0x80),
        ("clwb", 0x400),
        ("clflushopt", 0x240),
        ("clflush", 0x80),
        ("sfence", -1),
        ("mfence", -1),
    ]


# asm that writes PM in ways the tracer cannot model: each site is reported once at compile
# time (never an error, even with -Werror); recognised and register-only asm are not.
UNTRACED_ASM = (
    PRELUDE
    + r"""
static void copy(char *d, const char *s, unsigned long n) {
  asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) :: "memory");
}
__attribute__((noinline)) void stream(uint64_t *p, uint64_t v) {
  asm volatile("movnti %1, %0" : "=m"(*p) : "r"(v));
}
int main(int argc, char **argv) {
  char *pm = pm_map();
  char src[64] = "hello";
  copy(pm, src, sizeof src);
  stream((uint64_t *)(pm + 64), 42);
  asm volatile("" ::: "memory");
  asm volatile("pause" ::: "memory");
  asm volatile("clwb %0" : "+m"(*pm));
  asm volatile("lock; addl $0,(%%rsp)" ::: "memory", "cc");
  printf("%s %lu\n", pm, (unsigned long)*(uint64_t *)(pm + 64));
  return 0;
}
"""
)


def test_untraced_memory_writing_asm_is_reported_at_compile_time(tmp_path):
    _require_toolchain()
    src = tmp_path / "untraced.c"
    src.write_text(UNTRACED_ASM)
    r = pmsim_cli("trace", "cc", "-O2", "-mclwb", "-Werror", "-o", tmp_path / "untraced", src)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("pmsim trace cc: warning:")]
    assert len(warnings) == 2, r.stderr
    assert 'inline asm not traced in main: "rep movsb"' in warnings[0] + warnings[1]
    assert 'inline asm not traced in stream: "movnti %1, %0"' in warnings[0] + warnings[1]
    assert r.stderr.strip() == "\n".join(warnings)
    # with debug info the warning names the source line
    r = pmsim_cli("trace", "cc", "-O2", "-g", "-mclwb", "-c", "-o", tmp_path / "untraced.o", src)
    assert r.returncode == 0, r.stderr
    line = (
        UNTRACED_ASM.splitlines().index(
            '  asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) :: "memory");'
        )
        + 1
    )
    assert f"untraced.c:{line}:" in r.stderr, r.stderr
    # the program still runs and is traced as before: the recognised clwb and the fence
    out, events = _record(tmp_path, "untraced")
    assert out == "hello 42\n"
    assert [(k, off) for k, off, _, _ in events if k not in ("store", "load")] == [
        ("clwb", 0),
        ("mfence", -1),
    ]
