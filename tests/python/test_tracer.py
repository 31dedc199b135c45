"""The tracer end to end: build the examples with ``pmsim trace cc``, record their traces, check
the counts against what the programs execute (derived here from their loop structure, not from
the tracer), compare traced and native output, simulate under every design, crash-check under the
x86 model, and the bad-input paths.

These tests need clang and llvm-dev (and PMDK's libpmem, libpmem2, libpmemobj headers). They
fail, never skip, when those are missing: run scripts/setup-tracer.sh.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PMSIM, pmsim_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _require_toolchain() -> None:
    missing = [t for t in ("clang", "llvm-config", "gcc", "make") if not shutil.which(t)]
    headers = {"libpmem-dev": "libpmem.h", "libpmem2-dev": "libpmem2.h", "libpmemobj-dev": "libpmemobj.h"}
    missing += [pkg for pkg, h in headers.items() if not (Path("/usr/include") / h).is_file()]
    if missing:
        pytest.fail(
            f"the tracer tests need clang, llvm-dev, libpmem-dev, libpmem2-dev and libpmemobj-dev "
            f"(missing: {missing}): run scripts/setup-tracer.sh",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The examples built twice: traced (pmsim trace cc, via their Makefile) and native (gcc)."""
    _require_toolchain()
    d = tmp_path_factory.mktemp("examples")
    for f in ("pm_list.c", "pmem_log.c", "Makefile"):
        shutil.copy(EXAMPLES / f, d / f)
    cc = f"{PMSIM[0]} trace cc" if len(PMSIM) == 1 else f"{sys.executable} -m pmsim.cli trace cc"
    r = subprocess.run(["make", "-C", str(d), f"CC={cc}", "all"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    native = d / "native"
    native.mkdir()
    for prog, extra in (("pm_list", ["-mclwb", "-pthread"]), ("pmem_log", ["-lpmem"])):
        subprocess.run(["gcc", "-O2", "-o", str(native / prog), str(d / f"{prog}.c"), *extra], check=True)
    return d


def _build_traced(tmp_path: Path, name: str, program: str, *flags: str) -> Path:
    """Writes `program` to tmp_path/<name>.c and builds tmp_path/<name> with ``pmsim trace cc``
    and `flags` (compiler flags; `-l` libraries go after the source); returns the source."""
    src = tmp_path / f"{name}.c"
    src.write_text(program)
    opts = [f for f in flags if not f.startswith("-l")]
    libs = [f for f in flags if f.startswith("-l")]
    pmsim_cli("trace", "cc", *opts, "-o", tmp_path / name, src, *libs, check=True)
    return src


def _stats(path: Path) -> dict:
    return json.loads(pmsim_cli("trace", "stats", path, "--json", check=True).stdout)


def _record(
    built: Path, out: str, pm: str, *argv: str, volatile: str = "drop"
) -> subprocess.CompletedProcess:
    return pmsim_cli(
        "trace", "record", "--pm", pm, "--volatile", volatile, "-o", built / out, "--", *argv, cwd=built
    )


# pm_list: per thread and node 4 PM stores, 1 clwb, 2 sfences, 1 clflush, 1 mutex lock/unlock,
# 1 rmw; main: an arena of 1024 lines (1 store and 1 clwb each, then 1 sfence), the root (3
# stores, 1 clflushopt, 1 mfence); 2 threads; create and join each add one release/acquire pair
# per thread.
ARENA_LINES = 1024


def pm_list_expected(n: int) -> dict:
    t = 2
    return {
        "store": ARENA_LINES + 3 + 4 * t * n,
        "clwb": ARENA_LINES + t * n,
        "clflush": t * n,
        "clflushopt": 1,
        "sfence": 1 + 2 * t * n,
        "mfence": 1,
        "rmw": t * n,
        "acquire": t * n + 2 * t,
        "release": t * n + 2 * t,
        "ntstore": 0,
    }


# pmem_log: header memset_persist (1 store of 64 B, 1 clwb, 1 sfence); per entry 4 stores +
# persist (1 clwb, 1 sfence) + memcpy_persist of the tail (1 store, 1 clwb, 1 sfence).
def pmem_log_expected(n: int) -> dict:
    return {
        "store": 1 + 5 * n,
        "clwb": 1 + 2 * n,
        "sfence": 1 + 2 * n,
        "clflush": 0,
        "clflushopt": 0,
        "mfence": 0,
        "rmw": 0,
    }


def test_pm_list_counts_and_output(built):
    n = 37
    r = _record(built, "pm_list.bin", "heap", "./pm_list", str(n))
    assert r.returncode == 0, r.stderr
    native = subprocess.run(
        [built / "native" / "pm_list", str(n)], capture_output=True, text=True, check=True
    )
    assert r.stdout == native.stdout
    assert f"nodes={2 * n} count={2 * n}" in r.stdout
    s = _stats(built / "pm_list.bin")
    kinds = s["events_by_kind"]
    for k, v in pm_list_expected(n).items():
        assert kinds[k] == v, (k, kinds[k], v)
    assert s["threads"] == 3
    # every node, the root and the arena on lines of their own
    assert s["pm_footprint_bytes"] == 64 * (2 * n + 1 + ARENA_LINES)
    meta = dict(s["meta"])
    assert meta["pm"] == "heap" and meta["program"] == "./pm_list" and meta["args"] == str(n)
    assert "incomplete" not in meta


def test_pmem_log_counts_and_output(built):
    n = 23
    (built / "log.pmem").unlink(missing_ok=True)
    r = _record(built, "pmem_log.bin", "pmdk", "./pmem_log", "log.pmem", str(n))
    assert r.returncode == 0, r.stderr
    (built / "log2.pmem").unlink(missing_ok=True)
    native = subprocess.run(
        [built / "native" / "pmem_log", built / "log2.pmem", str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout == native.stdout
    kinds = _stats(built / "pmem_log.bin")["events_by_kind"]
    for k, v in pmem_log_expected(n).items():
        assert kinds[k] == v, (k, kinds[k], v)
    # The program takes no lock; libpmem's own rwlock (its registry of mappings) is traced like
    # any rwlock the program calls, each lock paired with its unlock.
    assert kinds.get("acquire", 0) == kinds.get("release", 0)


def test_keep_volatile_adds_only_volatile_accesses(built):
    r = _record(built, "pm_list_keep.bin", "heap", "./pm_list", "5", volatile="keep")
    assert r.returncode == 0, r.stderr
    s = _stats(built / "pm_list_keep.bin")
    e = pm_list_expected(5)
    assert s["pm_stores"] == e["store"] + e["rmw"]  # the mutex is a volatile global
    assert s["volatile_stores"] > 0  # e.g. the global root pointer
    assert s["events_by_kind"]["clwb"] == e["clwb"]


def test_text_output_round_trips(built):
    r = _record(built, "pm_list.trace", "heap", "./pm_list", "4")
    assert r.returncode == 0, r.stderr
    text = (built / "pm_list.trace").read_text()
    assert text.startswith("# pmsim trace v1\n")
    assert "# meta pm=heap" in text
    s = _stats(built / "pm_list.trace")
    assert s["events_by_kind"]["sfence"] == pm_list_expected(4)["sfence"]


def test_every_design_simulates_the_traces(built):
    _record(built, "pm_list_small.bin", "heap", "./pm_list", "20")
    designs = [
        line.split()[0] for line in pmsim_cli("designs", check=True).stdout.splitlines() if line.strip()
    ]
    for trace in ("pm_list_small.bin", "pmem_log.bin"):
        if not (built / trace).exists():
            (built / "log.pmem").unlink(missing_ok=True)
            _record(built, trace, "pmdk", "./pmem_log", "log.pmem", "23")
        out = pmsim_cli("compare", "--trace", built / trace, "-q", check=True).stdout
        for d in designs:
            assert d in out, (d, out)


def test_baseline_satisfies_x86_and_the_broken_baseline_does_not(built):
    _record(built, "pm_list_crash.bin", "heap", "./pm_list", "30")
    ok = pmsim_cli(
        "crash", "--trace", built / "pm_list_crash.bin", "--design", "baseline", "--model", "x86", "--every"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = pmsim_cli(
        "crash",
        "--trace",
        built / "pm_list_crash.bin",
        "--design",
        "broken-baseline-no-sfence-stall",
        "--allow-broken-designs",
        "--model",
        "x86",
        "--every",
    )
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "failing image" in bad.stdout
    # every other design, running the legacy trace with its sfence -> dfence mapping, satisfies
    # x86 persistency too (it orders at least as much as the baseline)
    for d in ("eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp"):
        r = pmsim_cli(
            "crash",
            "--trace",
            built / "pm_list_crash.bin",
            "--design",
            d,
            "--model",
            "x86",
            "--random",
            "100",
        )
        assert r.returncode == 0, (d, r.stdout + r.stderr)


def test_baseline_runs_a_traced_program_as_written(built):
    """A traced program is legacy x86 code: the baseline adds no flush of its own (none at the
    mutex unlocks or the atomic counter), so its write-backs are exactly the program's flushes,
    and crash checking defaults to x86 persistency for it."""
    trace = built / "pm_list_as_written.bin"
    _record(built, trace.name, "heap", "./pm_list", "25")
    kinds = _stats(trace)["events_by_kind"]
    run = json.loads(pmsim_cli("run", "--trace", trace, "--design", "baseline", "--json", check=True).stdout)
    ds = run["design_stats"]
    assert ds["release_flushes"] == 0 and ds["fence_flushes"] == 0, ds
    # Each program flush of a dirty line writes it back once; one of a clean line writes nothing.
    assert 0 < ds["clwbs"] <= kinds["clwb"] + kinds["clflush"] + kinds["clflushopt"], (ds, kinds)
    crash = pmsim_cli("crash", "--trace", trace, "--design", "baseline", "--every", "--json")
    assert crash.returncode == 0, crash.stdout + crash.stderr
    assert json.loads(crash.stdout)["model"] == "x86"


def test_missing_program_is_an_error(built, tmp_path):
    r = pmsim_cli("trace", "record", "-o", tmp_path / "x.bin", "--", "./no-such-program")
    assert r.returncode == 2
    assert r.stderr.startswith("pmsim: error:") and "not found" in r.stderr
    assert not (tmp_path / "x.bin").exists()


def test_bad_pm_spec_is_an_error(built, tmp_path):
    for spec in ("flash", "range:0x1000", "range:abc:10", "dax:/no/such/dir"):
        r = pmsim_cli("trace", "record", "--pm", spec, "-o", tmp_path / "x.bin", "--", built / "pm_list")
        assert r.returncode == 2, spec
        assert r.stderr.startswith("pmsim: error:") and "--pm" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_uninstrumented_program_is_an_error(built, tmp_path):
    r = pmsim_cli("trace", "record", "-o", tmp_path / "x.bin", "--", built / "native" / "pm_list", "2")
    assert r.returncode == 2
    assert "not built with 'pmsim trace cc'" in r.stderr
    assert not (tmp_path / "x.bin").exists()


CRASHER = r"""
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
int main(int argc, char **argv) {
  volatile uint64_t *p = malloc(64 * 8);
  for (int i = 0; i < 8; i++) { p[i * 8] = i; asm volatile("clwb %0" : "+m"(p[i * 8])); }
  asm volatile("sfence" ::: "memory");
  printf("before the crash\n");
  fflush(stdout);
  if (argc > 1 && argv[1][0] == 'k') raise(SIGKILL); /* no handler runs: pmsim repairs the file */
  if (argc > 1) *(volatile int *)0 = 1;
  return 3;
}
"""


def test_crashing_program_leaves_an_incomplete_trace(built, tmp_path):
    _build_traced(tmp_path, "crasher", CRASHER, "-O1")
    # a normal non-zero exit passes through
    r = pmsim_cli("trace", "record", "-o", tmp_path / "ok.bin", "--", tmp_path / "crasher")
    assert r.returncode == 3 and r.stdout == "before the crash\n"
    assert _stats(tmp_path / "ok.bin")["events_by_kind"]["clwb"] == 8
    # a crash: one error line, exit 2, partial trace marked incomplete
    r = pmsim_cli("trace", "record", "-o", tmp_path / "crash.bin", "--", tmp_path / "crasher", "crash")
    assert r.returncode == 2
    assert r.stdout == "before the crash\n"
    err = r.stderr.strip().splitlines()
    assert err[-1].startswith("pmsim: error:") and "SIGSEGV" in err[-1] and "incomplete" in err[-1]
    s = _stats(tmp_path / "crash.bin")
    assert s["events_by_kind"]["store"] == 8 and s["events_by_kind"]["sfence"] == 1
    assert "incomplete" in dict(s["meta"])
    run = pmsim_cli("run", "--trace", tmp_path / "crash.bin", "--design", "baseline")
    assert run.returncode == 2 and "incomplete" in run.stderr and "--allow-incomplete" in run.stderr
    run = pmsim_cli("run", "--trace", tmp_path / "crash.bin", "--design", "baseline", "--allow-incomplete")
    assert run.returncode == 0, run.stderr
    # SIGKILL: the runtime cannot finish the file; pmsim cuts it after its last whole record
    r = pmsim_cli("trace", "record", "-o", tmp_path / "kill.bin", "--", tmp_path / "crasher", "kill")
    assert r.returncode == 2 and "SIGKILL" in r.stderr
    assert "killed by signal 9" in dict(_stats(tmp_path / "kill.bin")["meta"])["incomplete"]
    crash = pmsim_cli("crash", "--trace", tmp_path / "kill.bin", "--design", "baseline", "--random", "5")
    assert crash.returncode == 2 and "incomplete" in crash.stderr


def test_unoptimised_build_traces_the_same_events(built, tmp_path):
    pmsim_cli(
        "trace", "cc", "-O0", "-mclwb", "-pthread", "-o", tmp_path / "l0", EXAMPLES / "pm_list.c", check=True
    )
    r = pmsim_cli(
        "trace", "record", "--volatile", "drop", "-o", tmp_path / "l0.bin", "--", tmp_path / "l0", "9"
    )
    assert r.returncode == 0, r.stderr
    kinds = _stats(tmp_path / "l0.bin")["events_by_kind"]
    for k, v in pm_list_expected(9).items():
        assert kinds[k] == v, (k, kinds[k], v)


def test_compiler_wrapper_passes_flags_and_errors_through(built, tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return undeclared; }\n")
    r = pmsim_cli("trace", "cc", "-c", bad, "-o", tmp_path / "bad.o")
    assert r.returncode != 0 and "undeclared" in r.stderr
    ok = tmp_path / "ok.cpp"
    ok.write_text(
        "#include <cstdio>\n#include <vector>\nstd::vector<long> *volatile keep;\n"
        "int main(int argc, char **) { std::vector<long> v(1000); keep = &v;\n"
        "  for (long i = 0; i < 1000; i++) v[i] = i * argc;\n"
        '  long s = 0; for (long x : *keep) s += x; std::printf("%ld\\n", s); }\n'
    )
    pmsim_cli("trace", "c++", "-O2", "-std=c++17", "-DX=1", "-o", tmp_path / "okcpp", ok, check=True)
    r = pmsim_cli("trace", "record", "-o", tmp_path / "cpp.bin", "--", tmp_path / "okcpp")
    assert r.returncode == 0 and r.stdout == "499500\n", r.stderr
    assert _stats(tmp_path / "cpp.bin")["pm_store_bytes"] >= 8000  # the vector's elements (heap = PM)


MAPPER = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
/* mapper FILE: 8 stores to a mapped file, each line flushed, one sfence;
   mapper -: the same on an anonymous mapping at 0x7e0000000000. */
int main(int argc, char **argv) {
  void *p;
  if (argv[1][0] == '-') {
    p = mmap((void *)0x7e0000000000, 4096, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  } else {
    int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ftruncate(fd, 4096)) return 1;
    p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (p == MAP_FAILED) return 1;
  volatile uint64_t *w = p;
  for (int i = 0; i < 8; i++) {
    w[i * 8] = i + 1;
    asm volatile("clwb %0" : "+m"(w[i * 8]));
  }
  asm volatile("sfence" ::: "memory");
  printf("ok\n");
  return 0;
}
"""


def test_pm_conventions_dax_and_range(built, tmp_path):
    _build_traced(tmp_path, "mapper", MAPPER, "-O2")
    dax = tmp_path / "dax"
    dax.mkdir()
    cases = [
        (f"dax:{dax}", [str(dax / "f")], 8),
        ("heap", [str(tmp_path / "g")], 0),  # a mapped file is not heap
        (f"dax:{dax}", [str(tmp_path / "g")], 0),  # a file outside the DAX directory
        ("range:0x7e0000000000:0x1000", ["-"], 8),
        ("range:0x7e0000001000:0x1000", ["-"], 0),
    ]
    for pm, args, pm_stores in cases:
        out = tmp_path / "m.bin"
        r = pmsim_cli("trace", "record", "--pm", pm, "-o", out, "--", tmp_path / "mapper", *args)
        assert r.returncode == 0 and r.stdout == "ok\n", (pm, r.stderr)
        s = _stats(out)
        assert s["pm_stores"] == pm_stores, (pm, args, s["pm_stores"])
        assert s["events_by_kind"]["clwb"] == 8 and s["events_by_kind"]["sfence"] == 1
        assert s["pm_footprint_bytes"] == 64 * pm_stores


# A file-backed log made durable the POSIX way: mmap + msync(MS_SYNC) per record (no PMDK, no
# flush instructions). Records of 3 lines at line-aligned offsets; every fourth msync is
# MS_ASYNC (which waits for nothing); then one MS_SYNC of the whole 64 KiB file.
MSYNC_LOG = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define SIZE 65536
int main(int argc, char **argv) {
  int n = atoi(argv[2]);
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, SIZE))
    return 1;
  char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return 1;
  for (int i = 0; i < n; i++) {
    char *rec = p + 192 * i;
    memset(rec, 'a' + i % 26, 192);
    char *page = (char *)((unsigned long)rec & ~4095UL);
    if (msync(page, (size_t)(rec + 192 - page), i % 4 == 3 ? MS_ASYNC : MS_SYNC))
      return 2;
  }
  if (msync(p, SIZE, MS_SYNC))
    return 3;
  printf("%d\n", n);
  return 0;
}
"""


def test_msync_of_a_pm_file_mapping_is_a_write_back_and_a_fence(built, tmp_path):
    _build_traced(tmp_path, "msynclog", MSYNC_LOG, "-O2")
    dax = tmp_path / "dax"
    dax.mkdir()
    n = 40
    out = tmp_path / "m.bin"
    r = pmsim_cli(
        "trace", "record", "--pm", f"dax:{dax}", "-o", out, "--", tmp_path / "msynclog", dax / "log", str(n)
    )
    assert r.returncode == 0 and r.stdout == f"{n}\n", r.stderr
    k = _stats(out)["events_by_kind"]
    # Each MS_SYNC covers its record's page from the page start to the record's end.
    synced = [i for i in range(n) if i % 4 != 3]
    lines = sum((192 * i + 192 - (192 * i & ~4095) + 63) // 64 for i in synced)
    assert k["clwb"] == lines + 65536 // 64
    assert k["sfence"] == len(synced) + 1
    # Outside the PM convention the same calls order nothing.
    r = pmsim_cli("trace", "record", "-o", out, "--", tmp_path / "msynclog", tmp_path / "log", str(n))
    assert r.returncode == 0, r.stderr
    k = _stats(out)["events_by_kind"]
    assert k.get("clwb", 0) == 0 and k.get("sfence", 0) == 0
    # The x86 crash check sees the records' order: the traced program passes under baseline.
    r = pmsim_cli(
        "trace", "record", "--pm", f"dax:{dax}", "-o", out, "--", tmp_path / "msynclog", dax / "log", "6"
    )
    c = pmsim_cli("crash", "--trace", out, "--design", "baseline", "--every", "-q")
    assert c.returncode == 0 and "OK" in c.stdout, c.stdout + c.stderr


def test_missing_toolchain_names_the_debian_packages(tmp_path):
    # Only the venv's own directory on PATH: no clang, no llvm-config.
    bindir = Path(PMSIM[0]).parent if len(PMSIM) == 1 else Path(sys.executable).parent
    env = {"PATH": str(bindir), "HOME": str(tmp_path)}
    r = subprocess.run(
        [*PMSIM, "trace", "cc", "-c", "x.c"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert r.returncode == 2
    assert r.stderr.startswith("pmsim: error:")
    assert "clang" in r.stderr and "llvm-dev" in r.stderr and "setup-tracer.sh" in r.stderr


FORKER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  volatile long *p = malloc(64);
  p[0] = 1;
  pid_t c = fork();
  if (c == 0) { p[0] = 2; p[1] = 3; _exit(0); }
  waitpid(c, NULL, 0);
  p[2] = 4;
  printf("done\n");
  return 0;
}
"""


def test_a_forked_child_is_not_traced_into_the_parents_trace(built, tmp_path):
    _build_traced(tmp_path, "forker", FORKER, "-O1")
    r = pmsim_cli(
        "trace", "record", "--volatile", "drop", "-o", tmp_path / "f.bin", "--", tmp_path / "forker"
    )
    assert r.returncode == 0 and r.stdout == "done\n"
    s = _stats(tmp_path / "f.bin")
    assert s["events_by_kind"]["store"] == 2 and s["threads"] == 1


CONDVAR = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long *slot; static int full; static long n = 50;
static void *consumer(void *a) {
  long sum = 0;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&m);
    while (!full) pthread_cond_wait(&cv, &m);
    sum += *slot; full = 0;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
  }
  return (void *)sum;
}
int main(void) {
  slot = malloc(64);
  pthread_t t; pthread_create(&t, NULL, consumer, NULL);
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&m);
    while (full) pthread_cond_wait(&cv, &m);
    *(volatile long *)slot = i; full = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
  }
  void *r; pthread_join(t, &r);
  printf("sum=%ld\n", (long)r);
  return 0;
}
"""


def test_condition_variables_trace_and_replay(built, tmp_path):
    # A producer/consumer hand-off through a mutex and a condition variable: 50 items. Each side
    # locks and unlocks 50 times and signals 50 times; waits add release+acquire pairs. The
    # trace must replay (sync ordinals consistent with the global order) under every design.
    _build_traced(tmp_path, "cv", CONDVAR, "-O2", "-pthread")
    r = pmsim_cli("trace", "record", "-o", tmp_path / "cv.bin", "--", tmp_path / "cv")
    assert r.returncode == 0 and r.stdout == f"sum={sum(range(50))}\n", r.stderr
    k = _stats(tmp_path / "cv.bin")["events_by_kind"]
    waits = (k["acquire"] - 2 * 50 - 2) // 2  # each wait: acquire cond + acquire mutex
    assert waits >= 0 and k["acquire"] == 2 * 50 + 2 + 2 * waits  # + thread start, join
    assert k["release"] == 2 * 50 + 2 * 50 + 2 + waits  # unlocks, signals, create + exit, waits
    out = pmsim_cli("compare", "--trace", tmp_path / "cv.bin", "-q", check=True).stdout
    assert "asap-rp" in out and "baseline" in out


# Three workers start together at a barrier; per round each takes a rwlock for writing and for
# reading and a spinlock, then posts a semaphore that main waits on W times before joining.
LOCKS = r"""
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#define W 3
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static pthread_barrier_t bar;
static sem_t done;
static long rounds;
volatile long *pm; /* not static: clang would turn the one calloc into a global */
static void *run(void *arg) {
  long me = (long)arg;
  pthread_barrier_wait(&bar);
  for (long r = 0; r < rounds; r++) {
    pthread_rwlock_wrlock(&rw);
    pm[0]++;
    pthread_rwlock_unlock(&rw);
    pthread_rwlock_rdlock(&rw);
    pm[8 + me] = pm[0];
    pthread_rwlock_unlock(&rw);
    pthread_spin_lock(&spin);
    pm[16]++;
    pthread_spin_unlock(&spin);
  }
  sem_post(&done);
  return NULL;
}
int main(int argc, char **argv) {
  rounds = atol(argv[1]);
  pm = calloc(32, 8);
  pthread_spin_init(&spin, 0);
  pthread_barrier_init(&bar, NULL, W);
  sem_init(&done, 0, 0);
  pthread_t t[W];
  for (long i = 0; i < W; i++)
    pthread_create(&t[i], NULL, run, (void *)i);
  for (int i = 0; i < W; i++)
    sem_wait(&done);
  for (int i = 0; i < W; i++)
    pthread_join(t[i], NULL);
  printf("%ld %ld %p %p %p %p\n", pm[0], pm[16], (void *)&rw, (void *)&spin, (void *)&bar, (void *)&done);
  return 0;
}
"""


def test_rwlocks_spinlocks_barriers_and_semaphores_order_threads(built, tmp_path):
    # Their code is in libc, so only the runtime's wrappers can put them in the trace: an
    # acquire after each successful lock or wait, a release before each unlock, post or arrival.
    _build_traced(tmp_path, "locks", LOCKS, "-O2", "-pthread")
    w, rounds = 3, 40
    r = pmsim_cli("trace", "record", "-o", tmp_path / "locks.trace", "--", tmp_path / "locks", str(rounds))
    assert r.returncode == 0, r.stderr
    total, spun, *addrs = r.stdout.split()
    assert int(total) == int(spun) == w * rounds  # the locks did their job natively
    rw, spin, bar, done = (int(a, 16) for a in addrs)
    events = [ln.split() for ln in (tmp_path / "locks.trace").read_text().splitlines() if ln.startswith("T")]
    sync = [(f[0], f[1], int(f[2], 16), f[3:]) for f in events if f[1] in ("acquire", "release")]

    def count(kind: str, addr: int) -> int:
        return sum(1 for _, k, a, _ in sync if k == kind and a == addr)

    assert count("acquire", rw) == count("release", rw) == 2 * w * rounds
    assert count("acquire", spin) == count("release", spin) == w * rounds
    assert all(rest[:1] == ["4"] for _, _, a, rest in sync if a == spin)  # a 4-byte lock word
    assert count("release", bar) == count("acquire", bar) == w
    assert count("release", done) == count("acquire", done) == w
    # Order: every worker arrives before any leaves the barrier, and main's k-th wait on the
    # semaphore follows at least k posts.
    on_bar = [k for _, k, a, _ in sync if a == bar]
    assert on_bar == ["release"] * w + ["acquire"] * w
    posts = 0
    for _, k, a, _ in sync:
        if a == done:
            posts += 1 if k == "release" else -1
            assert posts >= 0
    # The trace replays (acquires wait for the releases before them) and crash-checks.
    for design in ("baseline", "asap-rp"):
        c = pmsim_cli("crash", "--trace", tmp_path / "locks.trace", "--design", design, "--every", "-q")
        assert c.returncode == 0 and "OK: every image consistent and durable" in c.stdout, c.stdout + c.stderr


# Two threads; thread `w` runs WORK xorshift steps (a serial chain the compiler cannot fold:
# 3 shifts + 3 xors, plus the loop's own increment, compare and branch) before each of its
# ROUNDS PM stores, the other thread only stores.
COMPUTE_PROG = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
volatile uint64_t *pm; /* not static: clang would turn the one malloc into a global */
static long rounds, work;
static void *run(void *arg) {
  long me = (long)arg;
  uint64_t x = 88172645463325252ULL + (uint64_t)me;
  for (long r = 0; r < rounds; r++) {
    if (me == 1)
      for (long i = 0; i < work; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
      }
    pm[me * 8] = x;
  }
  return (void *)(uintptr_t)(x & 1);
}
int main(int argc, char **argv) {
  rounds = atol(argv[1]);
  work = atol(argv[2]);
  pm = malloc(128);
  pthread_t t[2];
  for (long i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, run, (void *)i);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  printf("%lu\n", (unsigned long)pm[8]);
  return 0;
}
"""


def _total_compute(trace: Path) -> int:
    return sum(
        int(f[2]) for f in (ln.split() for ln in trace.read_text().splitlines()) if f[1:2] == ["compute"]
    )


def _compute_by_worker(trace: Path) -> dict[int, int]:
    """Counted instructions per worker (``me``), told apart by the PM word each one stores to
    (thread ids follow first events, so the two workers may take either id)."""
    compute: dict[str, int] = {}
    me: dict[str, int] = {}
    for line in trace.read_text().splitlines():
        f = line.split()
        if len(f) == 3 and f[1] == "compute":
            compute[f[0]] = compute.get(f[0], 0) + int(f[2])
        elif len(f) >= 3 and f[1] == "store":
            me[f[0]] = (int(f[2], 16) >> 6) & 1
    return {m: compute.get(t, 0) for t, m in me.items()}


def test_computation_between_accesses_is_counted_and_timed(built, tmp_path):
    _build_traced(tmp_path, "work", COMPUTE_PROG, "-O2", "-pthread")
    rounds, work = 50, 400
    traces = {}
    for name, w, mode in (("idle", 0, "count"), ("busy", work, "count"), ("dropped", work, "drop")):
        t = tmp_path / f"{name}.trace"
        r = pmsim_cli(
            "trace", "record", "--volatile", "drop", "--compute", mode, "-o", t, "--",
            tmp_path / "work", str(rounds), str(w),
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        traces[name] = t
    idle, busy = _compute_by_worker(traces["idle"]), _compute_by_worker(traces["busy"])
    assert set(busy) == {0, 1}, busy
    extra = busy[1] - idle[1]
    per_step = extra / (rounds * work)
    assert 5 <= per_step <= 12, per_step  # 6 ALU instructions and the loop's overhead per step
    assert abs(busy[0] - idle[0]) <= 8 * rounds, (busy, idle)  # the storing-only thread
    # Each round's work is its own event, ahead of the store it precedes.
    lines = [ln.split() for ln in traces["busy"].read_text().splitlines()]
    worker = next(f[0] for f in lines if len(f) >= 3 and f[1] == "store" and (int(f[2], 16) >> 6) & 1)
    busy_lines = [f for f in lines if f and f[0] == worker]
    big = [i for i, f in enumerate(busy_lines) if f[1] == "compute" and int(f[2]) >= 5 * work]
    assert len(big) >= rounds - 1
    assert all(busy_lines[i + 1][1] == "store" for i in big if i + 1 < len(busy_lines))
    # --compute drop: no compute events, every other event unchanged.
    dropped = _stats(traces["dropped"])["events_by_kind"]
    counted = _stats(traces["busy"])["events_by_kind"]
    assert dropped.get("compute", 0) == 0 and counted["compute"] > 0
    assert {k: v for k, v in dropped.items() if k != "compute"} == {
        k: v for k, v in counted.items() if k != "compute"
    }
    # The simulation retires the counted work at core.ipc x core.freq_ghz (2 x 2 GHz by default):
    # the busy thread's instructions show up in the stats and lengthen the run accordingly.
    runs = {}
    for name in ("idle", "busy", "dropped"):
        out = pmsim_cli("run", "--trace", traces[name], "--design", "eadr", "--json", check=True).stdout
        runs[name] = json.loads(out)
    added_ns = runs["busy"]["sim_time_ns"] - runs["idle"]["sim_time_ns"]
    counted_busy, counted_idle = _total_compute(traces["busy"]), _total_compute(traces["idle"])
    assert runs["busy"]["instructions"] - runs["idle"]["instructions"] == counted_busy - counted_idle
    assert _stats(traces["busy"])["compute_instructions"] == counted_busy
    assert 0.8 * extra / 4.0 <= added_ns <= 1.2 * extra / 4.0 + 2000, (added_ns, extra)
    # Without the counted work only the accesses themselves retire as instructions.
    assert runs["busy"]["instructions"] - runs["dropped"]["instructions"] == counted_busy
    assert runs["dropped"]["sim_time_ns"] < runs["idle"]["sim_time_ns"] + 1000


# Operations and design-neutral barriers stated in the program (pmsim.h): THREADS threads, each
# ROUNDS "update" operations (a log word, ofence, a data word, dfence) and every tenth round a
# "scan" operation that starts a new strand and reads.
ANNOTATED = r"""
#include <pmsim.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
uint64_t *pm_log, *pm_data; /* not static: clang would turn the mallocs into globals */
static long rounds;
static void *run(void *arg) {
  long me = (long)arg;
  for (long i = 0; i < rounds; i++) {
    pmsim_begin("update");
    pm_log[(me * rounds + i) * 8] = (uint64_t)i;
    pmsim_ofence();
    pm_data[(me * rounds + i) * 8] = (uint64_t)i + 1;
    pmsim_dfence();
    pmsim_end("update");
    if (i % 10 == 0) {
      pmsim_begin("scan");
      pmsim_strand();
      pmsim_end("scan");
    }
  }
  return NULL;
}
int main(int argc, char **argv) {
  long threads = atol(argv[1]);
  rounds = atol(argv[2]);
  pm_log = calloc((size_t)(threads * rounds * 8), 8);
  pm_data = calloc((size_t)(threads * rounds * 8), 8);
  pthread_t t[16];
  for (long i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, run, (void *)i);
  for (long i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  if (argc > 3)
    pmsim_end("update"); /* misuse: no begin on this thread */
  printf("%lu\n", (unsigned long)pm_data[8 * (rounds - 1)]);
  return 0;
}
"""


def test_annotations_mark_operations_and_state_barriers(built, tmp_path):
    threads, rounds = 3, 40
    src = _build_traced(tmp_path, "ann", ANNOTATED, "-O2", "-pthread")
    r = pmsim_cli("trace", "record", "--volatile", "drop", "-o", tmp_path / "ann.bin", "--",
                  tmp_path / "ann", str(threads), str(rounds))  # fmt: skip
    assert r.returncode == 0 and r.stdout == f"{rounds}\n", r.stderr
    stats = _stats(tmp_path / "ann.bin")
    k = stats["events_by_kind"]
    scans = threads * len(range(0, rounds, 10))
    assert stats["operations"] == threads * rounds + scans
    assert (k["begin"], k["end"]) == (threads * rounds + scans,) * 2
    assert (k["ofence"], k["dfence"], k["strand"]) == (threads * rounds, threads * rounds, scans)
    # The labels survive the binary format and the conversion to text.
    pmsim_cli("trace", "convert", tmp_path / "ann.bin", tmp_path / "ann.trace", check=True)
    text = (tmp_path / "ann.trace").read_text()
    assert text.count(" begin update\n") == threads * rounds and text.count(" end scan\n") == scans
    # Every design counts the operations; ASAP's crash images keep the ofence order.
    for design in ("baseline", "eadr", "asap-rp"):
        run = json.loads(pmsim_cli("run", "--trace", tmp_path / "ann.bin", "--design", design, "--json",
                                   check=True).stdout)  # fmt: skip
        assert run["operations"] == threads * rounds + scans and run["ops_per_sec"] > 0, design
    r = pmsim_cli("crash", "--trace", tmp_path / "ann.bin", "--design", "asap-rp", "--every")
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    # Built without the tracer, the annotations are empty inline functions.
    include = REPO / "python" / "pmsim" / "tracer_src" / "include"
    native = tmp_path / "ann_native"
    subprocess.run(["gcc", "-O2", "-pthread", f"-I{include}", "-o", native, src], check=True)
    out = subprocess.run([native, str(threads), str(rounds), "misuse"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == f"{rounds}\n"
    # Traced, a pmsim_end without its pmsim_begin stops the program with one clear message.
    r = pmsim_cli("trace", "record", "-o", tmp_path / "bad.bin", "--", tmp_path / "ann", "1", "1", "misuse")
    assert r.returncode == 2 and r.stdout == ""
    assert 'pmsim_end("update") without a pmsim_begin("update")' in r.stderr


def _pm_accesses(trace: Path, kinds: tuple[str, ...]) -> list[int]:
    """Addresses of the trace's events of these kinds that fall in its (default) PM range."""
    out = []
    for f in (ln.split() for ln in trace.read_text().splitlines()):
        if len(f) >= 3 and f[1] in kinds:
            a = int(f[2], 16)
            if _in_pm(a):
                out.append(a)
    return out


def _in_pm(addr: int) -> bool:
    """In the default PM range of a trace (the one `pmsim trace record` writes)."""
    return 0x1_0000_0000 <= addr < 0x1_0000_0000 + (16 << 30)


# remap FILE: a file mapped twice at once, unmapped, its address reused by anonymous memory, and
# mapped again. 9 PM stores (8 lines of page 0, one word of page 1), each line flushed; page 1
# read through a second mapping of that page alone; the 8 words read through a third mapping.
REMAP = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#define RW (PROT_READ | PROT_WRITE)
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
  if (fd < 0 || ftruncate(fd, 8192)) return 1;
  volatile uint64_t *a = mmap(NULL, 8192, RW, MAP_SHARED, fd, 0);
  if (a == MAP_FAILED) return 1;
  for (int i = 0; i < 8; i++) {
    a[i * 8] = i + 1;
    asm volatile("clwb %0" : "+m"(a[i * 8]));
  }
  a[512] = 99;
  asm volatile("clwb %0" : "+m"(a[512]));
  asm volatile("sfence" ::: "memory");
  volatile uint64_t *b = mmap(NULL, 4096, RW, MAP_SHARED, fd, 4096);
  uint64_t s = b[0];
  munmap((void *)b, 4096);
  munmap((void *)a, 8192);
  volatile uint64_t *v = mmap((void *)a, 8192, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  v[0] = 7;
  volatile uint64_t *c = mmap(NULL, 8192, RW, MAP_SHARED, fd, 0);
  for (int i = 0; i < 8; i++) s += c[i * 8];
  printf("%lu\n", (unsigned long)(s + v[0]));
  return 0;
}
"""


def test_a_file_mapped_again_is_the_same_pm_in_the_trace(built, tmp_path):
    _build_traced(tmp_path, "remap", REMAP, "-O1")
    dax = tmp_path / "dax"
    dax.mkdir()
    out = tmp_path / "remap.trace"
    r = pmsim_cli("trace", "record", "--pm", f"dax:{dax}", "--volatile", "keep", "-o", out, "--",
                  tmp_path / "remap", dax / "f")  # fmt: skip
    assert r.returncode == 0 and r.stdout == f"{36 + 99 + 7}\n", r.stderr
    stores = _pm_accesses(out, ("store",))
    # The anonymous memory now where the file was mapped is not PM.
    assert len(stores) == 9 and len(set(stores)) == 9
    assert len(_pm_accesses(out, ("clwb",))) == 9
    # Every word read back through another mapping of the file is the word written before.
    loads = _pm_accesses(out, ("load",))
    assert len(loads) == 9 and set(loads) == set(stores)


# A libpmemobj program (PMDK, unmodified): a pool created, N transactional inserts of a node
# into a list under the root, the pool closed, opened again and the list walked as one operation.
POOL = r"""
#include <libpmemobj.h>
#include <pmsim.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
POBJ_LAYOUT_BEGIN(list);
POBJ_LAYOUT_ROOT(list, struct root);
POBJ_LAYOUT_TOID(list, struct node);
POBJ_LAYOUT_END(list);
struct node { uint64_t key; TOID(struct node) next; };
struct root { uint64_t count, sum; TOID(struct node) head; };
int main(int argc, char **argv) {
  int n = atoi(argv[2]);
  unlink(argv[1]);
  PMEMobjpool *pop = pmemobj_create(argv[1], POBJ_LAYOUT_NAME(list), PMEMOBJ_MIN_POOL, 0644);
  if (!pop) return 1;
  TOID(struct root) root = POBJ_ROOT(pop, struct root);
  for (int i = 1; i <= n; i++) {
    TX_BEGIN(pop) {
      TX_ADD(root);
      TOID(struct node) nd = TX_NEW(struct node);
      D_RW(nd)->key = (uint64_t)i;
      D_RW(nd)->next = D_RO(root)->head;
      D_RW(root)->head = nd;
      D_RW(root)->count++;
      D_RW(root)->sum += (uint64_t)i;
    } TX_END
  }
  pmemobj_close(pop);
  void *elsewhere = malloc(1 << 24); /* the pool is unlikely to come back at the same address */
  pop = pmemobj_open(argv[1], POBJ_LAYOUT_NAME(list));
  if (!pop) return 1;
  root = POBJ_ROOT(pop, struct root);
  pmsim_begin("walk");
  uint64_t s = 0, c = 0;
  for (TOID(struct node) p = D_RO(root)->head; !TOID_IS_NULL(p); p = D_RO(p)->next) {
    s += D_RO(p)->key;
    c++;
  }
  pmsim_end("walk");
  printf("%lu %lu %lu\n", (unsigned long)c, (unsigned long)s, (unsigned long)D_RO(root)->sum);
  pmemobj_close(pop);
  free(elsewhere);
  return 0;
}
"""


def test_libpmemobj_pool_is_pm_from_its_creation_to_its_reopening(built, tmp_path):
    n = 12
    src = _build_traced(tmp_path, "pool", POOL, "-O2", "-lpmemobj")
    include = REPO / "python" / "pmsim" / "tracer_src" / "include"
    native = tmp_path / "pool_native"
    subprocess.run(["gcc", "-O2", f"-I{include}", "-o", native, src, "-lpmemobj"], check=True)
    expect = f"{n} {n * (n + 1) // 2} {n * (n + 1) // 2}\n"
    assert (
        subprocess.run([native, tmp_path / "n.pool", str(n)], capture_output=True, text=True).stdout == expect
    )
    out = tmp_path / "pool.trace"
    r = pmsim_cli("trace", "record", "--pm", "pmdk", "--volatile", "keep", "-o", out, "--",
                  tmp_path / "pool", tmp_path / "t.pool", str(n))  # fmt: skip
    assert r.returncode == 0 and r.stdout == expect, r.stderr
    # libpmemobj flushes only pool memory, its creation included (it writes and flushes the pool
    # before pmemobj_create returns): every flush of the trace is one of PM.
    lines = [ln.split() for ln in out.read_text().splitlines()]
    flushes = [f for f in lines if len(f) > 2 and f[1] == "clwb"]
    assert len(flushes) > 1000 and len(_pm_accesses(out, ("clwb",))) == len(flushes)
    # The walk after the reopening reads what the transactions wrote before the close.
    begin = next(i for i, f in enumerate(lines) if f[1:3] == ["begin", "walk"])
    end = next(i for i, f in enumerate(lines) if f[1:3] == ["end", "walk"])
    walk = [a for a in (int(f[2], 16) for f in lines[begin:end] if f[1] == "load") if _in_pm(a)]
    written = set()
    for f in lines[:begin]:
        if f[1] in ("store", "ntstore", "rmw"):
            a, size = int(f[2], 16), int(f[3])
            written.update(range(a, a + size))
    # (the list's 3 words per node, the root's head and sum: PM loads; the pool's runtime state,
    # not PM, is left out)
    assert len(walk) >= 3 * n and all(a in written for a in walk), walk
    for design in ("baseline", "asap-rp"):
        r = pmsim_cli("crash", "--trace", out, "--design", design, "--every", "-q")
        assert r.returncode == 0 and "OK" in r.stdout, (design, r.stdout + r.stderr)


# A libpmem2 program (PMDK, unmodified): per round a persisted entry, a copy without flush later
# flushed, a set without drain then drained, a non-temporal copy; then a persisted count.
PMEM2 = r"""
#include <fcntl.h>
#include <libpmem2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDWR), n = atoi(argv[2]);
  struct pmem2_config *cfg;
  struct pmem2_source *src;
  struct pmem2_map *map;
  if (fd < 0 || pmem2_config_new(&cfg) || pmem2_source_from_fd(&src, fd) ||
      pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE) ||
      pmem2_map_new(&map, cfg, src)) {
    pmem2_perror("pmem2");
    return 1;
  }
  volatile uint64_t *base = pmem2_map_get_address(map);
  pmem2_persist_fn persist = pmem2_get_persist_fn(map);
  pmem2_flush_fn flush = pmem2_get_flush_fn(map);
  pmem2_drain_fn drain = pmem2_get_drain_fn(map);
  pmem2_memcpy_fn copy = pmem2_get_memcpy_fn(map);
  pmem2_memset_fn set = pmem2_get_memset_fn(map);
  static char buf[64] = "persistent";
  for (int i = 0; i < n; i++) {
    volatile uint64_t *e = base + 8 * (1 + i);
    e[0] = (uint64_t)i;
    e[1] = (uint64_t)i * i;
    persist((const void *)e, 16);
    copy((void *)(e + 2), buf, 16, PMEM2_F_MEM_NOFLUSH);
    flush((const void *)(e + 2), 16);
    set((void *)(e + 4), 0xab, 32, PMEM2_F_MEM_NODRAIN);
    drain();
    copy((void *)(base + 8 * (1 + n + i)), buf, 64, PMEM2_F_MEM_NONTEMPORAL);
  }
  base[0] = (uint64_t)n;
  persist((const void *)base, 8);
  printf("%lu %lu\n", (unsigned long)base[0], (unsigned long)base[8 * n + 1]);
  pmem2_map_delete(&map);
  return 0;
}
"""


def test_libpmem2_persist_functions_are_traced_with_their_flags(built, tmp_path):
    n = 9
    src = _build_traced(tmp_path, "pm2", PMEM2, "-O2", "-lpmem2")
    subprocess.run(["gcc", "-O2", "-o", tmp_path / "pm2_native", src, "-lpmem2"], check=True)
    expect = f"{n} {(n - 1) ** 2}\n"
    for f in ("a", "b"):
        with open(tmp_path / f, "wb") as fh:
            fh.truncate(1 << 20)
    native = subprocess.run([tmp_path / "pm2_native", tmp_path / "a", str(n)], capture_output=True, text=True)
    assert native.stdout == expect, native.stderr
    out = tmp_path / "pm2.bin"
    r = pmsim_cli(
        "trace", "record", "--pm", "pmdk", "-o", out, "--", tmp_path / "pm2", tmp_path / "b", str(n)
    )
    assert r.returncode == 0 and r.stdout == expect, r.stderr
    s = _stats(out)
    k = s["events_by_kind"]
    # Per round: 2 stores + persist (clwb, sfence); copy NOFLUSH (store, nothing else); flush
    # (clwb); set NODRAIN (store, clwb); drain (sfence); copy NONTEMPORAL (ntstore, sfence).
    # Then 1 store + persist.
    assert (k["store"], k["ntstore"], k["clwb"], k["sfence"]) == (4 * n + 1, n, 3 * n + 1, 3 * n + 1), k
    assert s["pm_stores"] == 5 * n + 1
    for design in ("baseline", "asap-rp"):
        r = pmsim_cli("crash", "--trace", out, "--design", design, "--every", "-q")
        assert r.returncode == 0 and "OK" in r.stdout, (design, r.stdout + r.stderr)
