"""The tracer on libc's string and I/O functions that write memory the program passes them.

libc is not instrumented, so what strcpy, snprintf, read, fgets, strdup (...) write is
invisible unless the pass hooks the call: after it, the runtime computes from the result what
the call wrote and records it as memcpy is recorded (`load`s of the source, `store`s of the
destination, PM only). A program that fills a PM object with strcpy and never flushes it must
then be reported by `pmsim trace lint`; before, the trace had no store to report.

Each program fills one 64-byte-aligned heap object (`--pm heap`), so a byte at offset o of it is
at the object's first store + o. These tests need clang and llvm-dev (scripts/setup-tracer.sh)
and fail, never skip, without.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import PMSIM, pmsim_cli
from test_tracer import _build_traced, _require_toolchain


@pytest.fixture(scope="module", autouse=True)
def _toolchain() -> None:
    _require_toolchain()


def _record(out: Path, *argv: str | Path) -> subprocess.CompletedProcess:
    opts = ["--pm", "heap", "--volatile", "drop", "--compute", "drop", "-o", str(out)]
    cmd = [*PMSIM, "trace", "record", *opts, "--", *map(str, argv)]
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)


def _accesses(trace: Path) -> list[tuple[str, int, int, bytes | None]]:
    """(kind, address, size, bytes stored or None) of the trace's loads and stores, in order."""
    out = []
    for f in (ln.split() for ln in trace.read_text().splitlines() if ln.startswith("T")):
        if f[1] in ("load", "store"):
            size = int(f[3])
            value = int(f[4], 16).to_bytes(size, "little") if len(f) > 4 else None
            out.append((f[1], int(f[2], 16), size, value))
    return out


def _relative(trace: Path, other: int) -> list[tuple[str, int | str, int, bytes | None]]:
    """The PM loads and stores with addresses relative to the first store's (which must be
    64-byte aligned: the object's start); `other` (an offset from it) is shown as "other"."""
    got = [a for a in _accesses(trace) if a[1] >= 0x1_0000_0000]
    assert got and got[0][0] == "store", got
    base = got[0][1]
    assert base % 64 == 0, got
    return [(k, "other" if a - base == other else a - base, n, v) for k, a, n, v in got]


# One object written only by libc: every store the trace shows is one the hook recorded. The
# lengths come from argv so that neither the optimiser (constant folding, strcpy -> memcpy) nor
# _FORTIFY_SOURCE (a size known to fit) turns a call into something else. With "noflush" the
# object is never made persistent.
STRINGS = r"""
#define _GNU_SOURCE
#include <emmintrin.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
struct rec {
  char name[16], copy[32], pad[16], upto[16], fmt[16], spr[16], dup[16];
  char rd[64], line[64], rest[64];
};
/* Not inlined, and visible outside: the optimiser keeps its size argument, so _FORTIFY_SOURCE
 * knows the member arrays' sizes and calls the __*_chk forms. */
__attribute__((noinline, alloc_size(1))) void *pm_alloc(size_t n) { return aligned_alloc(64, n); }
#if _FORTIFY_SOURCE > 0
/* clang 14 with glibc 2.36 does not fortify read and fgets: call their checking forms. */
extern ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
extern char *__fgets_chk(char *s, size_t size, int n, FILE *stream);
#define read(fd, buf, n) __read_chk(fd, buf, n, sizeof(buf))
#define fgets(s, n, f) __fgets_chk(s, sizeof(s), n, f)
#endif
static void persist(const void *p, size_t n) {
  for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < (uintptr_t)p + n; a += 64)
    _mm_clflush((const void *)a);
  _mm_sfence();
}
int main(int argc, char **argv) {
  const char *s = argv[1];                      /* "hello-pm" */
  size_t L = strlen(s);                         /* 8 */
  struct rec *r = pm_alloc(sizeof *r);
  strcpy(r->name, s);                           /* +0: 9 */
  char *e = stpcpy(r->copy, s);                 /* +16: 9 */
  strncpy(r->pad, s, L + 4);                    /* +48: 12, NUL-padded */
  strcat(r->copy, s);                           /* reads +16: 9; +24: 9 */
  strncat(r->name, s, L - 5);                   /* reads +0: 9; +8: "hel" and NUL */
  char *c = memccpy(r->upto, s, '-', L);        /* +64: "hello-" */
  int n1 = snprintf(r->fmt, L, "%s:%d", s, (int)L); /* +80: 7 and NUL (returns 10) */
  int n2 = sprintf(r->spr, "<%s>", s);          /* +96: 11 */
  strcpy(r->dup, r->spr);                       /* reads +96: 11; +112: 11 */
  int fd = open(argv[2], O_RDONLY);
  ssize_t n3 = read(fd, r->rd, L * 8);          /* +128: the file's 20 bytes */
  close(fd);
  FILE *f = fopen(argv[2], "r");
  char *g = fgets(r->line, (int)L * 4, f);      /* +192: "line one\n" and NUL */
  size_t n4 = fread(r->rest, 1, L * 8, f);      /* +256: the other 11 bytes */
  fclose(f);
  char *d = strdup(r->spr);                     /* reads +96: 11; the new object: 11 */
  if (argc < 4) {
    persist(r, sizeof *r);
    persist(d, 11);
  }
  printf("%d %d %d %d %zd %d %zu %ld\n", (int)(e - r->copy), (int)(c - r->upto), n1, n2, n3,
         g == r->line, n4, (long)(d - (char *)r));
  return 0;
}
"""

FILE_TEXT = "line one\nrest of it\n"

HELLO = b"hello-pm\0"
# (kind, offset in the object, size, bytes stored) in program order; "other" is strdup's object.
EXPECTED = [
    ("store", 0, 9, HELLO),
    ("store", 16, 9, HELLO),
    ("store", 48, 12, b"hello-pm\0\0\0\0"),
    ("load", 16, 9, None),
    ("store", 24, 9, HELLO),
    ("load", 0, 9, None),
    ("store", 8, 4, b"hel\0"),
    ("store", 64, 6, b"hello-"),
    ("store", 80, 8, b"hello-p\0"),
    ("store", 96, 11, b"<hello-pm>\0"),
    ("load", 96, 11, None),
    ("store", 112, 11, b"<hello-pm>\0"),
    ("store", 128, 20, FILE_TEXT.encode()),
    ("store", 192, 10, b"line one\n\0"),
    ("store", 256, 11, b"rest of it\n"),
    ("load", 96, 11, None),
    ("store", "other", 11, b"<hello-pm>\0"),
]

# The _FORTIFY_SOURCE forms the fortified build must call (the member arrays' sizes are known;
# __read_chk and __fgets_chk the program calls itself).
CHK = [
    "__strcpy_chk", "__stpcpy_chk", "__strncpy_chk", "__strcat_chk", "__strncat_chk",
    "__snprintf_chk", "__sprintf_chk", "__read_chk", "__fgets_chk", "__fread_chk",
]  # fmt: skip


def _run(tmp_path: Path, name: str, *extra: str) -> tuple[Path, str]:
    (tmp_path / "in.txt").write_text(FILE_TEXT)
    out = tmp_path / f"{name}{'-' if extra else ''}{'-'.join(extra)}.trace"
    r = _record(out, tmp_path / name, "hello-pm", tmp_path / "in.txt", *extra)
    assert r.returncode == 0, r.stderr
    return out, r.stdout


def _check(trace: Path, stdout: str) -> None:
    fields = stdout.split()
    assert fields[:7] == ["8", "6", "10", "10", "20", "1", "11"], stdout
    assert _relative(trace, int(fields[7])) == EXPECTED


@pytest.mark.parametrize(
    "flags",
    [("-O0",), ("-O2",), ("-O2", "-D_FORTIFY_SOURCE=2")],
    ids=["O0", "O2", "fortify"],
)
def test_libc_string_and_io_writes_are_traced_as_copies(tmp_path, flags):
    src = _build_traced(tmp_path, "s", STRINGS, *flags)
    if "-D_FORTIFY_SOURCE=2" in flags:
        ll = tmp_path / "s.ll"
        pmsim_cli("trace", "cc", *flags, "-S", "-emit-llvm", "-o", ll, src, check=True)
        ir = ll.read_text()
        missing = [f for f in CHK if f"@{f}(" not in ir]
        assert not missing, missing  # else this build would test the plain forms again
        assert ir.count("call void @__pmt_strop(") == 13  # one after each string or I/O call
    trace, stdout = _run(tmp_path, "s")
    _check(trace, stdout)
    lint = pmsim_cli("trace", "lint", trace)
    assert lint.returncode == 0, lint.stdout


def test_an_object_written_by_strcpy_and_never_flushed_is_linted(tmp_path):
    _build_traced(tmp_path, "s", STRINGS, "-O2")
    trace, stdout = _run(tmp_path, "s", "noflush")
    _check(trace, stdout)
    lint = pmsim_cli("trace", "lint", trace)
    stores = sum(1 for e in EXPECTED if e[0] == "store")
    assert lint.returncode == 1 and f"{stores} never flushed" in lint.stdout, lint.stdout


# The rest: a wide copy, vsnprintf, strndup, pread, calls that write nothing (snprintf of size 0,
# read and fgets at the end of the file), and writers, which read their source (write, fwrite,
# fputs: `load`s of the bytes they took).
OTHERS = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>
static int fmt(char *s, size_t n, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int r = vsnprintf(s, n, f, ap);
  va_end(ap);
  return r;
}
int main(int argc, char **argv) {
  const char *s = argv[1];                      /* "hello-pm" */
  size_t L = strlen(s);                         /* 8 */
  char *p = aligned_alloc(64, 256);
  wcscpy((wchar_t *)p, L"wide");                /* +0: 5 wide characters */
  int z = snprintf(p + 32, L - 8, "%s", s);     /* size 0: nothing */
  int v = fmt(p + 32, L, "%s!", s);             /* +32: 7 and NUL */
  char *nd = strndup(p + 32, L - 5);            /* reads +32: 3; the new object: "hel" */
  int fd = open(argv[2], O_RDONLY);
  ssize_t r1 = pread(fd, p + 64, L, 9);         /* +64: "rest of " */
  lseek(fd, 0, SEEK_END);
  ssize_t r0 = read(fd, p + 128, L);            /* at the end: nothing */
  FILE *f = fdopen(fd, "r");
  char *g = fgets(p + 128, (int)L, f);          /* at the end: nothing */
  int nul = open("/dev/null", O_WRONLY);
  ssize_t w = write(nul, p + 64, L);            /* reads +64: 8 */
  FILE *n = fdopen(nul, "w");
  size_t w2 = fwrite(p + 64, 2, L / 2, n);      /* reads +64: 8 */
  int w3 = fputs(p + 32, n);                    /* reads +32: 8 */
  printf("%d %d %zd %zd %d %zd %zu %d %ld\n", z, v, r1, r0, g == NULL, w, w2, w3 >= 0,
         (long)(nd - p));
  return 0;
}
"""


def test_wide_copies_vsnprintf_strndup_pread_and_writers(tmp_path):
    _build_traced(tmp_path, "o", OTHERS, "-O1")
    (tmp_path / "in.txt").write_text(FILE_TEXT)
    trace = tmp_path / "o.trace"
    r = _record(trace, tmp_path / "o", "hello-pm", tmp_path / "in.txt")
    assert r.returncode == 0, r.stderr
    fields = r.stdout.split()
    assert fields[:8] == ["8", "9", "8", "0", "1", "8", "4", "1"], r.stdout
    wide = b"".join(c.to_bytes(4, "little") for c in b"wide\0")
    assert _relative(trace, int(fields[8])) == [
        ("store", 0, 20, wide),
        ("store", 32, 8, b"hello-p\0"),
        ("load", 32, 3, None),
        ("store", "other", 4, b"hel\0"),
        ("store", 64, 8, b"rest of "),
        ("load", 64, 8, None),
        ("load", 64, 8, None),
        ("load", 32, 8, None),
    ]


# A program's own declaration of a hooked name with other types is not libc's function: the
# pass leaves the call alone (and does not crash on it).
OWN = r"""
long fgets(long a, long b);
double read(double x);
long f(long a) { return fgets(a, 1) + (long)read(2.0); }
"""


def test_a_function_of_the_same_name_with_other_types_is_not_hooked(tmp_path):
    src = tmp_path / "own.c"
    src.write_text(OWN)
    ll = tmp_path / "own.ll"
    pmsim_cli("trace", "cc", "-O2", "-w", "-S", "-emit-llvm", "-o", ll, src, check=True)
    ir = ll.read_text()
    assert "@fgets(" in ir and "@read(" in ir, ir
    assert "__pmt_strop" not in ir, ir
