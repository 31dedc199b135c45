"""Where outputs go: ``-o /dev/stdout`` carries the data alone (messages go to stderr), a reader
that closes the pipe early ends pmsim quietly, an output that is an input is refused, and
``pmsim.trace_convert`` picks the format from the destination's extension, as the CLI does."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import PMSIM

import pmsim

MAGIC = b"PMSIMTRB"
TEXT_HEADER = b"# pmsim trace v1\n"

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="/dev/stdout")


def _to_pipe(*args: str | Path) -> subprocess.CompletedProcess:
    """Runs ``pmsim ARGS`` with stdout a pipe (what ``| next-command`` gives); bytes."""
    return subprocess.run(
        [*PMSIM, *map(str, args)], capture_output=True, stdin=subprocess.DEVNULL, timeout=300
    )


@pytest.fixture(scope="module")
def small_bin(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("traces") / "a.bin"
    pmsim.trace_generate("array", p, ops=20, threads=2)
    return p


# --- H9: data on stdout, messages on stderr ---------------------------------------------------


@posix_only
def test_trace_convert_to_stdout_writes_only_the_trace(small_bin, tmp_path):
    p = _to_pipe("trace", "convert", small_bin, "/dev/stdout", "--to", "text")
    assert p.returncode == 0, p.stderr
    pmsim.trace_convert(small_bin, tmp_path / "ref.trace")
    assert p.stdout == (tmp_path / "ref.trace").read_bytes()
    assert b"wrote /dev/stdout (text)" in p.stderr


@posix_only
@pytest.mark.parametrize("to", ["text", "binary"])
def test_trace_convert_into_a_pipe_carries_the_metadata(tmp_path, to):
    # Tester U's U25: through a pipe a recorded program's trace lost its META, so it ran as a
    # design-neutral trace (promise rp, not x86) and an incomplete one lost its mark.
    src = tmp_path / "rec.trace"
    src.write_text(
        "# pmsim trace v1\nthreads 1\n# meta tool=pmsim trace record (test)\n"
        "# meta incomplete=killed by signal 9\n"
        "T0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 store 0x100000040 8 2\n"
    )
    p = _to_pipe("trace", "convert", src, "/dev/stdout", "--to", to)
    assert p.returncode == 0, p.stderr
    piped = tmp_path / ("piped.trace" if to == "text" else "piped.bin")
    piped.write_bytes(p.stdout)
    assert dict(pmsim._core.trace_meta(str(piped))) == {
        "tool": "pmsim trace record (test)",
        "incomplete": "killed by signal 9",
    }
    as_file = pmsim.run("baseline", trace=str(piped), allow_incomplete=True)
    assert as_file["promise"] == "x86"
    with pytest.raises(pmsim.PmsimError, match="incomplete"):
        pmsim.run("baseline", trace=str(piped))


@posix_only
@pytest.mark.parametrize("source", ["text", "binary"])
@pytest.mark.parametrize("to", ["text", "binary"])
def test_trace_convert_from_a_pipe_carries_the_metadata(tmp_path, source, to):
    # Reviewer V's V6: a trace read from a pipe lost its META, so converting it to a file (what
    # the docs advise for a piped trace that was not checked for `incomplete`) laundered the
    # mark, and a recorded program's trace became design-neutral.
    text = tmp_path / "rec.trace"
    text.write_text(
        "# pmsim trace v1\nthreads 1\n# meta tool=pmsim trace record (test)\n"
        "# meta incomplete=killed by signal 9\n"
        "T0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 store 0x100000040 8 2\n"
    )
    src = text if source == "text" else tmp_path / "rec.bin"
    if source == "binary":
        pmsim.trace_convert(text, src)
    out = tmp_path / ("out.trace" if to == "text" else "out.bin")
    # A real pipe: a redirected file would be a regular file behind /dev/stdin.
    p = subprocess.run(
        [*PMSIM, "trace", "convert", "/dev/stdin", str(out), "--to", to],
        input=src.read_bytes(),
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert dict(pmsim._core.trace_meta(str(out))) == {
        "tool": "pmsim trace record (test)",
        "incomplete": "killed by signal 9",
    }
    with pytest.raises(pmsim.PmsimError, match="incomplete"):
        pmsim.run("baseline", trace=str(out))
    assert pmsim.run("baseline", trace=str(out), allow_incomplete=True)["promise"] == "x86"


@posix_only
def test_trace_gen_to_stdout_writes_only_the_trace(tmp_path):
    p = _to_pipe("trace", "gen", "--workload", "array", "-p", "ops=2", "-p", "threads=1", "-o", "/dev/stdout")
    assert p.returncode == 0, p.stderr
    pmsim.trace_generate("array", tmp_path / "ref.bin", ops=2, threads=1)
    assert p.stdout == (tmp_path / "ref.bin").read_bytes()
    assert b"wrote /dev/stdout: 15 events" in p.stderr


@posix_only
def test_piped_trace_runs(tmp_path):
    # The README's pipe: trace gen -o /dev/stdout | run --trace /dev/stdin.
    trace = (tmp_path / "t.bin").as_posix()
    pmsim.trace_generate("array", trace, ops=5, threads=2)
    gen = subprocess.Popen(
        [
            *PMSIM,
            "trace",
            "gen",
            "--workload",
            "array",
            "-p",
            "ops=5",
            "-p",
            "threads=2",
            "-o",
            "/dev/stdout",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    run = subprocess.run(
        [*PMSIM, "run", "--trace", "/dev/stdin", "--design", "eadr", "--json", "-q"],
        stdin=gen.stdout,
        capture_output=True,
        timeout=300,
    )
    gen.stdout.close()
    assert gen.wait(timeout=60) == 0
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == pmsim.run("eadr", trace=trace)


@posix_only
@pytest.mark.parametrize("as_json", [False, True], ids=["summary", "json"])
def test_run_to_stdout_writes_only_the_json(small_bin, as_json):
    p = _to_pipe(
        "run",
        "--trace",
        small_bin,
        "--design",
        "eadr",
        "-q",
        "-o",
        "/dev/stdout",
        *(["--json"] if as_json else []),
    )
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)  # one JSON document: no summary, not the JSON twice
    assert stats["design"] == "eadr"
    if not as_json:
        assert b"design eadr (promises" in p.stderr


@posix_only
def test_sweep_and_compare_to_stdout_write_only_the_table():
    p = _to_pipe(
        "sweep",
        "--designs",
        "eadr",
        "--workloads",
        "array",
        "-p",
        "ops=5",
        "-j",
        "1",
        "-q",
        "-o",
        "/dev/stdout",
    )
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(io.BytesIO(p.stdout))
    assert list(df.design) == ["eadr"]
    assert b"wrote 1 rows to /dev/stdout" in p.stderr
    p = _to_pipe("compare", "--designs", "baseline,eadr", "-p", "ops=5", "-j", "1", "-q", "-o", "/dev/stdout")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(io.BytesIO(p.stdout))
    assert list(df.design) == ["baseline", "eadr"]
    assert b"speedup_vs_baseline" in p.stderr  # the table to read, on stderr


def test_messages_stay_on_stdout_for_a_file(small_bin, tmp_path, cli):
    p = cli("trace", "convert", small_bin, tmp_path / "x.trace", check=True)
    assert p.stdout == f"wrote {tmp_path / 'x.trace'} (text)\n" and not p.stderr


@posix_only
@pytest.mark.parametrize(
    "cmd",
    [
        ["trace", "convert", "{big}", "/dev/stdout", "--to", "text"],
        ["trace", "convert", "{big}", "/dev/stdout", "--to", "binary", "--no-compress"],
        ["trace", "gen", "--workload", "array", "-p", "ops=3000", "-o", "/dev/stdout"],
        ["run", "--trace", "{big}", "--design", "eadr", "-q", "-o", "/dev/stdout"],
    ],
    ids=["convert-text", "convert-binary", "gen", "run"],
)
def test_a_reader_that_stops_early_ends_pmsim_quietly(tmp_path, cmd):
    # `pmsim ... -o /dev/stdout | head -c 10`: before, "pmsim: error: big.bin: Broken pipe (os
    # error 32)", exit 2, naming the input as if it were bad.
    big = tmp_path / "big.bin"
    pmsim.trace_generate("array", big, ops=3000)  # about 2 MB as text: well past a pipe's buffer
    p = subprocess.Popen(
        [*PMSIM, *(a.format(big=big) for a in cmd)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0, err
    assert err == b"" or (cmd[0] == "run" and b"Broken" not in err and b"Traceback" not in err), err


# --- H14: trace_convert's format from the destination's extension ------------------------------


def test_trace_convert_picks_the_format_by_extension(small_bin, tmp_path):
    for name in ("conv.trace", "conv.TXT"):
        pmsim.trace_convert(small_bin, tmp_path / name)
        assert (tmp_path / name).read_bytes().startswith(TEXT_HEADER), name
    pmsim.trace_convert(tmp_path / "conv.trace", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes()[:8] == MAGIC
    pmsim.trace_convert(tmp_path / "conv.trace", tmp_path / "noext")
    assert (tmp_path / "noext").read_bytes()[:8] == MAGIC
    # An explicit `to` still wins over the extension.
    pmsim.trace_convert(small_bin, tmp_path / "forced.trace", to="binary")
    assert (tmp_path / "forced.trace").read_bytes()[:8] == MAGIC
    pmsim.trace_convert(small_bin, tmp_path / "forced.bin", to="text")
    assert (tmp_path / "forced.bin").read_bytes().startswith(TEXT_HEADER)
    with pytest.raises(pmsim.PmsimError, match="to must be 'binary' or 'text'"):
        pmsim.trace_convert(small_bin, tmp_path / "x.bin", to="TEXT")


# --- H15: an output that is an input -----------------------------------------------------------


def test_run_refuses_to_overwrite_its_trace(small_bin, tmp_path, cli):
    victim = tmp_path / "victim.bin"
    victim.write_bytes(small_bin.read_bytes())
    (tmp_path / "link.json").symlink_to(victim)
    for out in (victim, tmp_path / "link.json", tmp_path / "." / "victim.bin"):
        p = cli("run", "--trace", victim, "--design", "eadr", "-q", "-o", out)
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith(f"pmsim: error: -o {out} is the input --trace {victim}"), p.stderr
        assert not p.stdout
        assert victim.read_bytes() == small_bin.read_bytes()


def test_outputs_that_are_inputs_are_refused(small_bin, tmp_path, cli):
    trace = tmp_path / "t.bin"
    trace.write_bytes(small_bin.read_bytes())
    (tmp_path / "t.csv").symlink_to(trace)
    p = cli("compare", "--trace", trace, "--designs", "eadr", "-q", "-o", tmp_path / "t.csv")
    assert p.returncode == 2 and "is the input --trace" in p.stderr, p.stderr
    cfg = tmp_path / "m.toml"
    cfg.write_text("[pm]\nwrite_ns = 100\n")
    p = cli("run", "--workload", "array", "-p", "ops=5", "--design", "eadr", "--config", cfg, "-o", cfg)
    assert p.returncode == 2 and "is the input --config" in p.stderr, p.stderr
    (tmp_path / "m.csv").symlink_to(cfg)
    for cmd in (["sweep", "--designs", "eadr", "--workloads", "array"], ["compare", "--designs", "eadr"]):
        p = cli(*cmd, "-p", "ops=5", "--config", cfg, "-q", "-o", tmp_path / "m.csv")
        assert p.returncode == 2 and "is the input --config" in p.stderr, (cmd, p.stderr)
    assert trace.read_bytes() == small_bin.read_bytes()
    assert cfg.read_text() == "[pm]\nwrite_ns = 100\n"


def test_trace_convert_in_place_still_normalises(small_bin, tmp_path, cli):
    t = tmp_path / "t.trace"
    pmsim.trace_convert(small_bin, t)
    want = t.read_bytes()
    t.write_bytes(want.replace(b"\n", b"\r\n"))  # CRLF: normalised back to LF
    cli("trace", "convert", t, t, check=True)
    assert t.read_bytes() == want
