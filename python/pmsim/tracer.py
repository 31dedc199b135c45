"""Tracing real C/C++ programs: ``pmsim trace cc`` / ``c++`` / ``record``.

Why it exists: researchers want to simulate *their* persistent-memory code. The tracer
(``python/pmsim/tracer_src/``: an LLVM pass plugin for clang and a C runtime; docs in
``tools/tracer/README.md``) instruments a program at
compile time; this module builds it on first use (cached per source hash and clang version),
wraps clang with gcc-style flags so ``CC="pmsim trace cc" make`` works, and runs an
instrumented program to record a pmsim trace with its provenance.

Guarantees: the compiler wrappers exec clang (its exit status and messages are the compiler's);
``record`` passes the program's stdout/stderr through, writes the trace atomically (a crash of
the program, or a Ctrl-C / SIGTERM that record passes on to it, leaves a trace marked
``incomplete``, never a half-written file without END; a symlink given as ``-o`` is written
through, a FIFO or device written into, never replaced), and
every bad input is a ``PmsimError`` (one line, exit 2). A trace is one process's: when the
program runs more instrumented processes (a shell script, exec), the first to start is traced
and ``record`` warns which others ran untraced (they say so themselves too, and the trace's
META names them). A trace whose program flushed lines but none of PM (or stored nothing to PM)
gets a hint naming the ``--pm`` that likely fits.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from pmsim import PmsimError

# Debian 12 packages that provide what the tracer needs (scripts/setup-tracer.sh installs them).
PACKAGES = {"clang": "clang", "llvm-config": "llvm-dev"}
SETUP_HINT = "run scripts/setup-tracer.sh (or: apt-get install clang llvm-dev)"


def source_dir() -> Path:
    """The tracer's sources: $PMSIM_TRACER_SRC, else the copy shipped inside the package
    (``pmsim/tracer_src/``: the pass and the runtime, built on first use)."""
    env = os.environ.get("PMSIM_TRACER_SRC")
    if env:
        # A modified tracer asked for by name: falling back to the packaged one would hide a typo.
        c = Path(env)
        if (c / "pass" / "PmTracePass.cpp").is_file() and (c / "runtime" / "pmtrace_rt.c").is_file():
            return c
        raise PmsimError(
            f"PMSIM_TRACER_SRC={env}: not a folder holding pass/PmTracePass.cpp and "
            "runtime/pmtrace_rt.c; fix it, or unset it to use the tracer shipped with pmsim"
        )
    c = Path(__file__).resolve().parent / "tracer_src"
    if (c / "pass" / "PmTracePass.cpp").is_file() and (c / "runtime" / "pmtrace_rt.c").is_file():
        return c
    raise PmsimError(
        "tracer sources not found (pmsim/tracer_src in the installed package); reinstall pmsim "
        "or set PMSIM_TRACER_SRC to a folder holding pass/ and runtime/"
    )


def _tool(name: str) -> str:
    for cand in (name, f"{name}-14", f"{name}-15", f"{name}-16"):
        p = shutil.which(cand)
        if p:
            return p
    return ""


def check_toolchain() -> tuple[str, str, str]:
    """(clang, clang++, llvm-config), or a PmsimError naming the missing Debian packages."""
    clang, clangxx, llvm_config = _tool("clang"), _tool("clang++"), _tool("llvm-config")
    missing = []
    if not clang or not clangxx:
        missing.append(PACKAGES["clang"])
    if (
        not llvm_config
        or not Path(_run_out([llvm_config, "--includedir"]) or "/nonexistent")
        .joinpath("llvm", "Passes", "PassPlugin.h")
        .is_file()
    ):
        missing.append(PACKAGES["llvm-config"])
    if missing:
        raise PmsimError(f"the tracer needs the Debian package(s) {', '.join(missing)}: {SETUP_HINT}")
    return clang, clangxx, llvm_config


def _run_out(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def cache_dir() -> Path:
    base = os.environ.get("PMSIM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pmsim"
    )
    return Path(base) / "tracer"


def build() -> tuple[Path, Path]:
    """Builds (once; cached by source hash and clang version) the pass plugin and the runtime."""
    clang, clangxx, llvm_config = check_toolchain()
    src = source_dir()
    h = hashlib.sha256()
    for f in ("pass/PmTracePass.cpp", "runtime/pmtrace_rt.c"):
        h.update((src / f).read_bytes())
    h.update(_run_out([clang, "--version"]).encode())
    h.update(_run_out([llvm_config, "--version"]).encode())
    d = cache_dir() / h.hexdigest()[:16]
    plugin, runtime = d / "pmtrace-pass.so", d / "pmtrace_rt.o"
    if plugin.is_file() and runtime.is_file():
        return plugin, runtime
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel `make -j` builds it once
        if plugin.is_file() and runtime.is_file():
            return plugin, runtime
        cxxflags = _run_out([llvm_config, "--cxxflags"]).split()
        ldflags = _run_out([llvm_config, "--ldflags"]).split()
        steps = [
            [clangxx, "-shared", "-fPIC", "-O2", *cxxflags, str(src / "pass" / "PmTracePass.cpp"), *ldflags,
             "-o", str(plugin) + ".tmp"],
            [clang, "-O2", "-fPIC", "-c", str(src / "runtime" / "pmtrace_rt.c"), "-o", str(runtime) + ".tmp"],
        ]  # fmt: skip
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                first = (r.stderr.strip().splitlines() or ["(no output)"])[0]
                raise PmsimError(f"building the tracer failed: {shlex.join(cmd[:2])} ...: {first}")
        os.replace(str(plugin) + ".tmp", plugin)
        os.replace(str(runtime) + ".tmp", runtime)
    return plugin, runtime


# Flags after which clang does not link (so the runtime is not added).
# A shared library gets no runtime either: the executable that loads it carries one.
_NO_LINK = {
    "-c",
    "-S",
    "-E",
    "-M",
    "-MM",
    "-fsyntax-only",
    "--version",
    "-dumpversion",
    "-dumpmachine",
    "-shared",
}


# Flags that link statically: the runtime stands in front of libc's malloc, pthread and exec
# functions (and finds them with dlsym), which needs the dynamic linker.
_STATIC = {"-static", "--static", "-static-pie"}


# Under --pm heap the PM is what these functions (and C++ new) return, so the compiler must not
# treat them as builtins: at -O1 and above GlobalOpt turns `static T *p = malloc(..)` whose
# pointer never escapes into a global in .bss, and DSE drops the stores to an allocation that is
# never read. Both hit exactly the object a program forgot to flush (a flush makes the pointer
# escape), so the trace would miss the bug it is recorded to find. The pass also marks the
# calls, new-expressions included, `nobuiltin` before any optimisation (PmTracePass.cpp).
_HEAP_FUNCS = (
    "malloc calloc realloc reallocarray free aligned_alloc memalign posix_memalign valloc pvalloc "
    "strdup strndup"
)
_KEEP_HEAP = [f"-fno-builtin-{n}" for n in _HEAP_FUNCS.split()] + ["-fno-assume-sane-operator-new"]


def compile_cmd(lang: str, args: list[str]) -> list[str]:
    """The clang command line for `pmsim trace cc|c++ ARGS`."""
    links = not any(a in _NO_LINK for a in args) and any(not a.startswith("-") for a in args)
    static = next((a for a in args if a in _STATIC), None)
    if static and links:
        raise PmsimError(
            f"trace {lang}: {static} is not supported: the tracer's runtime interposes libc "
            "(malloc, pthread, mmap), which needs dynamic linking; link without it"
        )
    clang, clangxx, _ = check_toolchain()
    plugin, runtime = build()
    cc = clangxx if lang == "c++" else clang
    # pmsim.h (operation markers, ofence/dfence/strand) on the include path, its hooks enabled.
    include = source_dir() / "include"
    cmd = [
        cc,
        f"-fpass-plugin={plugin}",
        "-Wno-unknown-warning-option",
        f"-I{include}",
        "-DPMSIM_TRACE=1",
        *_KEEP_HEAP,
        *args,
    ]
    if links:
        # `-x none`: a `-x c` among the program's arguments would still apply to the runtime's
        # object file, and clang would compile it as C source.
        dynlist = f"-Wl,--dynamic-list={_dynamic_list(runtime)}"
        cmd += ["-x", "none", str(runtime), dynlist, "-pthread", "-ldl"]
    return cmd


# The runtime's entry points (the pass's `__pmt_*` hooks and counter, pmsim.h's `pmsim_*`) must
# be in the executable's dynamic symbol table: an instrumented shared library the program loads
# with dlopen (a plugin, not a link-time dependency) refers to them, and ld exports an
# executable's symbols only for the libraries it saw at link time.
_DYNAMIC_LIST = "{\n  __pmt_*;\n  pmsim_*;\n};\n"


def _dynamic_list(runtime: Path) -> Path:
    """The linker dynamic list (beside the built runtime) that exports the runtime's symbols."""
    path = runtime.parent / "pmtrace_rt.dynlist"
    if not path.is_file() or path.read_text() != _DYNAMIC_LIST:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(_DYNAMIC_LIST)
        os.replace(tmp, path)
    return path


def cmd_compile(lang: str, args: list[str]) -> int:
    cmd = compile_cmd(lang, args)
    sys.stdout.flush()
    os.execv(cmd[0], cmd)
    return 0  # not reached


# The trace's one PM range (pmtrace_rt.c, PM_WINDOW_SIZE): every PM region maps into it.
PM_WINDOW_SIZE = 16 << 30


def parse_pm(spec: str) -> str:
    """Validates a --pm spec; returns it normalised (dax: with an absolute directory)."""
    if spec in ("heap", "pmdk"):
        return spec
    if spec.startswith("dax:"):
        d = spec[4:]
        if not d or not Path(d).is_dir():
            raise PmsimError(f"--pm {spec}: '{d}' is not a directory")
        return "dax:" + str(Path(d).resolve())
    if spec.startswith("range:"):
        parts = spec.split(":")
        if len(parts) == 3:
            try:
                base, size = int(parts[1], 0), int(parts[2], 0)
            except ValueError:
                base = size = -1
            if base >= 0 and size == 0:
                raise PmsimError(f"--pm {spec}: the size must be > 0")
            if base >= 0 and size > PM_WINDOW_SIZE:
                # Checked here: the runtime would find out only once the program runs.
                raise PmsimError(
                    f"--pm {spec}: the size {size:#x} exceeds the trace's PM range of 16 GiB "
                    f"({PM_WINDOW_SIZE:#x})"
                )
            if base >= 0 and size > 0:
                return f"range:{base:#x}:{size:#x}"
        raise PmsimError(
            f"--pm {spec}: expected range:ADDR:SIZE with numbers (e.g. range:0x7f0000000000:0x100000)"
        )
    raise PmsimError(f"--pm {spec}: expected heap, dax:DIR, pmdk or range:ADDR:SIZE")


def meta_value(text: str) -> str:
    """`text` as one line of valid UTF-8 (a META record's rule): bytes that are not UTF-8 (an
    argument passed as raw bytes) as ``\\xNN``, line breaks and other controls escaped."""
    raw = os.fsencode(text).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in raw)


def add_meta_binary(path: Path, meta: list[tuple[str, str]]) -> None:
    """Writes `meta` into the binary trace `path` as one META record before its END record (in
    place: a trace may be larger than memory)."""
    if not meta:
        return
    text = "\n".join(f"{k}={v}" for k, v in meta).encode()
    record = b"\x03" + struct.pack("<I", len(text)) + text
    with open(path, "r+b") as f:
        at = max(os.fstat(f.fileno()).st_size - 13, 0)
        f.seek(at)
        end = f.read()
        f.seek(at)
        f.truncate()
        f.write(record + end)


def _repair(path: Path, why: str) -> None:
    """Cuts a binary trace without END after its last whole record and marks it incomplete; with
    or without END, cuts it at the first event id no thread wrote.

    In place and record by record (headers read, payloads skipped): a trace may be larger than
    memory (a program running for minutes writes gigabytes)."""
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(20)
        if len(head) < 20 or head[:8] != b"PMSIMTRB":
            raise PmsimError(f"{path}: the program wrote no usable trace ({why})")
        npm = struct.unpack_from("<I", head, 16)[0]
        pos = good = 20 + 16 * npm
        events = labels = 0
        complete = False
        while pos < size:
            f.seek(pos)
            rec = f.read(17)  # the longest record header: a block's
            tag = rec[0]
            try:
                if tag == 1:
                    count, _, stored = struct.unpack_from("<III", rec, 5)
                    nxt = pos + 17 + stored
                    add = count
                elif tag in (2, 3):
                    off = 5 if tag == 2 else 1
                    (n,) = struct.unpack_from("<I", rec, off)
                    nxt, add = pos + off + 4 + n, 0
                    if tag == 2 and nxt <= size:
                        labels += 1
                elif tag == 0 and pos + 13 <= size:
                    # Complete (the runtime wrote END itself on SIGTERM), but a thread may
                    # still have taken an id it never wrote: the cut below looks.
                    complete = True
                    events = struct.unpack_from("<Q", rec, 1)[0]
                    break
                else:
                    break
            except struct.error:
                break
            if nxt > size:
                break
            pos = good = nxt
            events += add
        if not complete:
            meta = f"incomplete={why}".encode()
            tail = (
                b"\x03" + struct.pack("<I", len(meta)) + meta + b"\x00" + struct.pack("<QI", events, labels)
            )
            f.seek(min(good, size))
            f.truncate()
            f.write(tail)
    # Threads whose buffers died with the program took event ids they never wrote: keep the
    # events before the first missing one (a prefix of the global order reads as a trace). The
    # cut streams; with no id missing the trace stays as it is.
    from pmsim import _core

    cut = path.with_name(path.name + ".cut")
    try:
        dropped, kept = _core.trace_cut_at_gap(str(path), str(cut))
        if dropped:
            add_meta_binary(cut, _core.trace_meta(str(path)))
            os.replace(cut, path)
    finally:
        cut.unlink(missing_ok=True)
    if kept < events:
        print(
            f"pmsim: warning: trace record: the program ended with events still in its threads' "
            f"buffers ({why}); cut at the first event id no thread wrote, the trace keeps "
            f"{kept:,} of the {events:,} events written ({events - kept:,} dropped)",
            file=sys.stderr,
        )


def _has_end(path: Path) -> bool:
    try:
        m = __import__("pmsim._core", fromlist=["trace_meta"])
        m.trace_meta(str(path))
        return True
    except Exception:
        return False


def _output(output: str) -> tuple[Path, bool]:
    """Where `record -o output` puts the finished trace, and whether it writes into an existing
    file that is not a regular one (a FIFO, a terminal, /dev/stdout's pipe) instead of replacing
    it: a symlink is followed (the link stays, its target gets the trace), and a non-regular file
    is never replaced, which would destroy it (as root, /dev/stdout or /dev/null)."""
    try:
        st = os.stat(output)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise PmsimError(f"-o {output}: {e.strerror or e}") from e
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise PmsimError(f"-o {output}: is a directory; give the trace's file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return Path(os.path.abspath(output)), True
    # Absolute, so a program that changes directory early (a constructor) still writes the trace.
    given = Path(output)
    if not given.is_symlink() and not given.parent.is_dir():
        raise PmsimError(f"-o {output}: directory '{given.parent}' does not exist")
    target = Path(os.path.realpath(output))
    if not target.parent.is_dir():
        raise PmsimError(f"-o {output}: directory '{target.parent}' (where the link points) does not exist")
    return target, False


# Signals by which a terminal (Ctrl-C), `timeout` or `kill` end a recording: the program writes
# its buffered events on them (marked incomplete), so record passes them on and keeps the trace.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def record(pm: str, volatile: str, output: str, argv: list[str], compute: str = "count") -> int:
    """Runs an instrumented program and writes its trace; returns the exit status for pmsim.

    ``compute="count"`` records the instructions executed between events as ``compute N`` events
    (LLVM IR instructions of the instrumented code; uninstrumented libraries count nothing).
    """
    if compute not in ("count", "drop"):
        raise PmsimError(f"trace record: compute must be 'count' or 'drop', not '{compute}'")
    from pmsim import _core

    if not argv:
        raise PmsimError("trace record: give the program to run after --")
    pm = parse_pm(pm)
    prog = argv[0]
    exe = prog if os.sep in prog else shutil.which(prog)
    if not exe or not Path(exe).is_file():
        raise PmsimError(f"trace record: program '{prog}' not found")
    if not os.access(exe, os.X_OK):
        raise PmsimError(f"trace record: program '{prog}' is not executable")
    from pmsim.output import check_not_input

    check_not_input(output, "-o", [("program", exe)])
    text = Path(output).suffix.lower() in (".trace", ".txt")
    out, into = _output(output)
    # In a private folder of their own (fixed names there cannot collide with another recording
    # or be planted as symlinks, and stay short whatever the output's name): beside the output
    # (os.replace within one file system), or anywhere when the output is written into rather
    # than replaced.
    where = {"prefix": "pmsim-record-"} if into else {"prefix": ".pmsim-record-", "dir": out.parent}
    scratch = Path(os.path.abspath(tempfile.mkdtemp(**where)))
    base = scratch / "trace"
    tmp = base.with_name(base.name + ".partial.bin")
    report = base.with_name(base.name + ".partial.procs")
    meta_file = base.with_name(base.name + ".partial.meta")
    converted = base.with_name(base.name + ".partial")
    meta = "\n".join(
        [
            "tool=pmsim trace record (clang pass plugin + runtime)",
            f"program={meta_value(prog)}",
            f"args={meta_value(shlex.join(argv[1:]))}",
            f"pm={meta_value(pm)}",
            f"volatile={volatile}",
            f"compute={compute}",
            f"cwd={meta_value(os.getcwd())}",
        ]
    )
    env = dict(os.environ)
    env.pop("PMSIM_TRACE_META", None)
    env.update(
        PMSIM_TRACE_OUT=str(tmp),
        PMSIM_TRACE_PM=pm,
        PMSIM_TRACE_VOLATILE=volatile,
        PMSIM_TRACE_META_FILE=str(meta_file),
        PMSIM_TRACE_COMPUTE=compute,
        PMSIM_TRACE_REPORT=str(report),
    )
    procs: dict = {}
    threads = 0
    with _PassSignals() as signals:
        try:
            tmp.unlink(missing_ok=True)
            report.unlink(missing_ok=True)
            meta_file.write_text(meta)
            r = signals.run(exe, prog, argv, env)
            if not tmp.exists():
                raise PmsimError(
                    f"trace record: '{prog}' wrote no trace: "
                    "it was not built with 'pmsim trace cc' / 'pmsim trace c++'"
                )
            procs = _read_report(report)
            crashed = r < 0
            if crashed:
                _repair(tmp, f"killed by signal {-r}")
            elif not _has_end(tmp):
                _repair(tmp, f"exited with status {r} without finishing the trace")
            if procs["untraced"]:
                add_meta_binary(tmp, _procs_meta(procs))
            threads = _threads(tmp)
            done = tmp
            if text:
                _core.trace_convert(str(tmp), str(converted), False)  # META goes along
                done = converted
            if into:
                _write_into(done, out, output)
            else:
                from pmsim.output import keep_mode

                keep_mode(done, out)
                os.replace(done, out)
        finally:
            for f in (tmp, report, meta_file, converted):
                f.unlink(missing_ok=True)
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
    _warn_processes(procs, output)
    _hint_flushes(procs, pm)
    if threads > MAX_SIM_THREADS:
        print(
            f"pmsim: warning: trace record: {output} has {threads} threads; pmsim lints and analyzes it "
            f"(with --instr-ops-per-s) but simulates at most {MAX_SIM_THREADS} (one core per thread): "
            "run the program with fewer threads to simulate it",
            file=sys.stderr,
        )
    if crashed:
        sig = -r
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        raise PmsimError(
            f"trace record: '{prog}' crashed ({name}, exit status {128 + sig}); "
            f"the partial trace in {output} is marked incomplete"
        )
    return r


class _PassSignals:
    """While record runs the program, a stop signal that reaches record (Ctrl-C reaches the whole
    process group; `kill` and `timeout` send SIGTERM) is passed on to the program instead of
    ending record, so record waits for the program to write its buffered events and keeps the
    trace, marked incomplete. After the program ended, the signal that killed it may still reach
    record (the group's) and is let go once; any other ends record as it would have (a second
    Ctrl-C, say while the trace waits for a FIFO's reader). A signal record inherited as ignored
    (nohup, a background job) stays ignored, for the program too (the runtime leaves those)."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.old: dict = {}
        self.late_seen = False

    def _handle(self, sig: int, frame: object) -> None:
        child = self.child
        if child is not None and child.poll() is None:
            # A signal the program got too (from the terminal, to the group) is still one signal
            # to it: a standard signal pending twice is delivered once.
            try:
                child.send_signal(sig)
            except OSError:
                pass
            return
        if child is not None and child.returncode == -sig and not self.late_seen:
            self.late_seen = True
            return
        self.__exit__()
        signal.raise_signal(sig)

    def __enter__(self) -> _PassSignals:
        if threading.current_thread() is threading.main_thread():  # only it may set handlers
            for s in _STOP_SIGNALS:
                h = signal.getsignal(s)
                if h != signal.SIG_IGN:
                    self.old[s] = h
                    signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self.old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        self.old = {}

    def run(self, exe: str, prog: str, argv: list[str], env: dict) -> int:
        """Runs the program to its end; its exit status (-N: killed by signal N)."""
        try:
            self.child = subprocess.Popen([exe, *argv[1:]], env=env)
        except OSError as e:
            raise PmsimError(f"trace record: cannot run '{prog}': {e.strerror or e}") from e
        return self.child.wait()


def _write_into(src: Path, out: Path, output: str) -> None:
    """Copies the finished trace into the existing non-regular file `out` (opened for writing,
    as a shell's `>` does: a FIFO waits for its reader)."""
    try:
        with open(src, "rb") as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
    except BrokenPipeError:
        raise  # `-o /dev/stdout | head`: the reader is done, pmsim stops quietly (cli.main)
    except OSError as e:
        raise PmsimError(f"-o {output}: cannot write the trace: {e.strerror or e}") from e


def _read_report(path: Path) -> dict:
    """What the instrumented processes wrote to PMSIM_TRACE_REPORT (pmtrace_rt.c, report()):
    the traced process and those that ran untraced, as (pid, argv[0]), and what the traced one
    flushed and stored ({"flush", "pm_flush", "pm_store"}, or None if it never finished)."""
    procs: dict = {"traced": None, "untraced": [], "flushes": None}
    try:
        lines = path.read_bytes().decode("utf-8", "backslashreplace").splitlines()
    except OSError:
        return procs
    for line in lines:
        f = line.split(" ", 2)
        if len(f) == 3 and f[0] in ("traced", "untraced") and f[1].isdigit():
            if f[0] == "traced":
                procs["traced"] = (int(f[1]), f[2])
            else:
                procs["untraced"].append((int(f[1]), f[2]))
        elif len(f) == 3 and f[0] == "flushes":
            bits = f[2].split()
            if len(bits) == 3 and all(b in ("0", "1") for b in bits):
                procs["flushes"] = {
                    k: b == "1" for k, b in zip(("flush", "pm_flush", "pm_store"), bits, strict=True)
                }
    return procs


def _procs_meta(procs: dict) -> list[tuple[str, str]]:
    """META of a run with untraced processes: which one the trace is of, which ran untraced."""
    meta = []
    if procs["traced"]:
        pid, name = procs["traced"]
        meta.append(("traced_process", meta_value(f"{name} (pid {pid})")))
    names = ", ".join(f"{name} (pid {pid})" for pid, name in procs["untraced"])
    return meta + [("untraced_processes", meta_value(names))]


# One simulated core per trace thread (core.count, docs/config.md).
MAX_SIM_THREADS = 64


def _threads(path: Path) -> int:
    """The recorded trace's thread count (0 if its header cannot be read: the warning it feeds
    is not worth failing a recording for)."""
    from pmsim import _core

    try:
        return _core.trace_threads(str(path))
    except Exception:
        return 0


def _warn_processes(procs: dict, output: str) -> None:
    """One warning when more than one instrumented process ran: the trace is the first one's."""
    if not procs["untraced"]:
        return
    n = len(procs["untraced"])
    traced = procs["traced"]
    who = f"{traced[1]} (pid {traced[0]})" if traced else "the first"
    others = ", ".join(f"{name} (pid {pid})" for pid, name in procs["untraced"])
    print(
        f"pmsim: warning: trace record: {n + 1} instrumented processes ran; {output} is the trace of "
        f"{who} only, {n} ran untraced: {others} (record each program with its own 'pmsim trace record')",
        file=sys.stderr,
    )


_PM_HINTS = {
    "heap": "under --pm heap PM is what malloc/new return; a program whose PM is a file needs --pm pmdk "
    "(libpmem, libpmem2, libpmemobj) or --pm dax:DIR (files it mmaps from DIR)",
    "dax": "under --pm dax:DIR PM is the shared mappings of files under DIR: check DIR, or use --pm pmdk "
    "(libpmem, libpmem2, libpmemobj) or --pm heap (PM emulated with malloc/new)",
    "pmdk": "under --pm pmdk PM is what libpmem, libpmem2 and libpmemobj map; use --pm dax:DIR for files "
    "the program mmaps itself, --pm heap for PM emulated with malloc/new",
    "range": "check the range, or use --pm pmdk (libpmem, libpmem2, libpmemobj), --pm dax:DIR (files the "
    "program mmaps from DIR) or --pm heap (malloc/new)",
}


def _hint_flushes(procs: dict, pm: str) -> None:
    """A hint when the traced program flushed cache lines but none of them, or none of its stores,
    was PM: the --pm convention likely does not match the program."""
    f = procs["flushes"]
    if not f or not f["flush"] or (f["pm_flush"] and f["pm_store"]):
        return
    what = "none of them was PM" if not f["pm_flush"] else "it stored nothing to PM"
    print(
        f"pmsim: hint: trace record: the program flushed cache lines (clwb/clflushopt/clflush) but "
        f"{what}: {_PM_HINTS[pm.split(':')[0]]}",
        file=sys.stderr,
    )


def check_complete(path: str | None, allow: bool, shown: str | None = None) -> None:
    """Refuses a trace marked incomplete unless `allow`; the message names it `shown` (default
    `path`)."""
    if not path or allow or not Path(path).is_file():
        return
    from pmsim import _core

    try:
        meta = dict(_core.trace_meta(path))
    except Exception:
        return  # the simulator reports unreadable traces itself
    if "incomplete" in meta:
        raise PmsimError(
            f"{shown or path}: the trace is incomplete ({meta['incomplete']}); "
            "pass --allow-incomplete (allow_incomplete=True in Python) to use it anyway"
        )
