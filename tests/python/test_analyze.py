"""`pmsim analyze` and `pmsim.analyze` end to end (docs/design.md §8)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import pmsim_cli

import pmsim

# Two ops. T0 persists PA and PB in one epoch, PC after a barrier, then releases a lock with no
# barrier before it; T1 (a new strand) acquires it, barrier, PD. By hand:
# strict: PA -> PB -> PC -> (release, acquire) -> PD: 4.
# epoch:  {PA, PB} -> PC; the release follows only {PA, PB}, so PD is at level 2: 2.
# strand: as epoch (T1's strand starts empty; the lock carries {PA, PB}): 2.
TRACE = """# pmsim trace v1
threads 2
pm 0x100000000 0x40000000
T0 begin op
T0 store 0x100000000 8
T0 store 0x100001000 8
T0 ofence
T0 store 0x100002000 8
T0 release 0x3000
T0 end op
T1 begin op
T1 strand
T1 acquire 0x3000
T1 ofence
T1 store 0x100003000 8
T1 end op
"""


@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "q.trace"
    p.write_text(TRACE)
    return p


def test_cli_json_on_a_hand_written_trace(trace, tmp_path):
    r = pmsim_cli("analyze", "--trace", trace, "--model", "all", "--instr-ops-per-s", "1e6", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [out[m]["critical_path"] for m in ("strict", "epoch", "strand")] == [4, 2, 2]
    s = out["strict"]
    assert s["persists"] == 4 and s["ops"] == 2
    assert s["critical_path_per_op"] == 2.0
    # 2 ops / (4 × 500 ns) = 1e6 ops/s, normalised to 1e6: exactly 1.
    assert s["persist_bound_ops_per_s"] == pytest.approx(1e6)
    assert s["normalized_rate"] == pytest.approx(1.0)
    # The binary form streams and gives the same answer; L scales the rate.
    b = tmp_path / "q.bin"
    assert pmsim_cli("trace", "convert", trace, b, "--to", "binary").returncode == 0
    r = pmsim_cli(
        *("analyze", "--trace", b, "--model", "epoch", "--persist-ns", "250"),
        *("--instr-ops-per-s", "1e6", "--json"),
    )
    one = json.loads(r.stdout)
    assert one["critical_path"] == 2 and one["persist_bound_ops_per_s"] == pytest.approx(4e6)


def test_granularities_change_the_answer(trace):
    # The four persists are 4 KiB apart: no 256 B block holds two, so neither coalescing nor
    # false sharing changes strict's chain.
    r = pmsim_cli(
        "analyze",
        "--trace",
        trace,
        "--model",
        "strict",
        "--atomic-bytes",
        "256",
        "--track-bytes",
        "256",
        "--instr-ops-per-s",
        "1",
        "--json",
    )
    assert json.loads(r.stdout)["critical_path"] == 4


def test_instruction_rate_comes_from_eadr_by_default():
    rep = pmsim.analyze(workload="cwl", model="strict", threads=1, ops=50)
    run = pmsim.run("eadr", workload="cwl", threads=1, ops=50)
    assert rep["instr_ops_per_s"] == pytest.approx(run["ops_per_sec"])
    assert rep["normalized_rate"] == pytest.approx(rep["persist_bound_ops_per_s"] / run["ops_per_sec"])


def test_the_instruction_rate_from_eadr_is_exact_not_the_runs_rounded_rate(tmp_path):
    # Two operations of three instructions each (store, ofence, store; eADR stalls on none) at
    # the default 2 GHz and 2 instructions per cycle: 1.5 ns, so 2 / 1.5 ns. The run's JSON
    # rounds its rate to 3 decimals, which made the normalised rate 0.00100000000000025.
    op = "T0 begin op\nT0 store {a} 8 1\nT0 ofence\nT0 store {b} 8 1\nT0 end op\n"
    body = op.format(a="0x100000000", b="0x100000040") + op.format(a="0x100000080", b="0x1000000c0")
    trace = tmp_path / "ops.trace"
    trace.write_text("# pmsim trace v1\nthreads 1\n" + body)
    rep = pmsim.analyze(str(trace), model="epoch")
    exact = 2 / 1.5e-9
    assert rep["instr_ops_per_s"] == pytest.approx(exact, rel=1e-15, abs=0)
    assert rep["normalized_rate"] == pytest.approx(rep["persist_bound_ops_per_s"] / exact, rel=1e-15, abs=0)


def test_python_api_returns_a_dataframe_for_several_models(trace):
    df = pmsim.analyze(str(trace), model="all", instr_ops_per_s=1e6)
    assert isinstance(df, pd.DataFrame)
    assert list(df.model) == ["strict", "epoch", "strand"]
    assert list(df.critical_path) == [4, 2, 2]


def test_workload_parameters_for_a_trace_are_refused_in_the_callers_words(trace):
    # The API's caller wrote a keyword argument, the CLI's a '-p'; each hears its own word.
    with pytest.raises(pmsim.PmsimError, match=r"^unknown parameter\(s\) for a trace run: ops$"):
        pmsim.analyze(str(trace), ops=10)
    assert pmsim.analyze(str(trace), instr_ops_per_s=1e6, core_freq_ghz=3)["critical_path"] == 4
    r = pmsim_cli("analyze", "--trace", trace, "-p", "ops=10")
    assert r.returncode == 2 and "-p ops: workload parameters do not apply to --trace" in r.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--model", "racing"], "unknown persistency model 'racing'"),
        (["--atomic-bytes", "12"], "power of two from 8 to 256"),
        (["--track-bytes", "512"], "power of two from 8 to 256"),
        (["--atomic-bytes", "4"], "power of two from 8 to 256"),
        (["--atomic-bytes", "-8"], "--atomic-bytes: -8 is not a power of two from 8 to 256"),
        (["--track-bytes", "x"], "--track-bytes: 'x' is not an integer"),
        (["--persist-ns", "0"], "persist latency"),
    ],
)
def test_bad_arguments(trace, args, needle):
    r = pmsim_cli("analyze", "--trace", trace, *args)
    assert r.returncode == 2
    assert r.stderr.startswith("pmsim: error:") and needle in r.stderr and len(r.stderr.splitlines()) == 1
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_a_trace_without_operations_reports_its_critical_path(tmp_path):
    # No begin/end pairs: the path and persists stand, the per-operation fields are null.
    p = tmp_path / "noops.trace"
    p.write_text(
        "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8\nT0 store 0x100000008 8\n"
        "T0 ofence\nT0 store 0x100000010 8\n"
    )
    r = pmsim_cli("analyze", "--trace", p, "--model", "all", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {m: (o["critical_path"], o["persists"], o["ops"]) for m, o in out.items()} == {
        "strict": (3, 3, 0),
        "epoch": (2, 3, 0),
        "strand": (2, 3, 0),
    }
    for o in out.values():
        assert o["critical_path_per_op"] is None and o["persist_bound_ops_per_s"] is None
        assert o["instr_ops_per_s"] is None and o["normalized_rate"] is None
    r = pmsim_cli("analyze", "--trace", p)
    assert r.returncode == 0, r.stderr
    assert "n/a" in r.stdout and "unbounded" not in r.stdout and "no operations" in r.stdout
    r = pmsim_cli("analyze", "--trace", tmp_path / "missing.trace")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_a_legacy_x86_trace_is_ordered_by_its_fences(tmp_path):
    # A traced program orders persists only with clwb + sfence: there sfence (and mfence) is the
    # persist barrier, as HOPS and ASAP map it; three fenced groups are three epochs. The same
    # fences in a design-neutral trace (it has an ofence) order nothing beyond it. Text and
    # binary (streamed) traces agree.
    x86 = tmp_path / "x86.trace"
    x86.write_text(
        "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8\nT0 store 0x100000040 8\nT0 clwb 0x100000000\n"
        "T0 clwb 0x100000040\nT0 sfence\nT0 store 0x100000080 8\nT0 clwb 0x100000080\nT0 mfence\n"
        "T0 store 0x1000000c0 8\n"
    )
    neutral = tmp_path / "neutral.trace"
    neutral.write_text(x86.read_text().replace("T0 mfence", "T0 ofence"))
    expected = {
        x86: {"strict": (4, 4), "epoch": (3, 4), "strand": (3, 4)},
        neutral: {"strict": (4, 4), "epoch": (2, 4), "strand": (2, 4)},
    }
    for text, paths in expected.items():
        binary = text.with_suffix(".bin")
        pmsim_cli("trace", "convert", text, binary, check=True)
        for p in (text, binary):
            r = pmsim_cli("analyze", "--trace", p, "--model", "all", "--json")
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert {m: (o["critical_path"], o["persists"]) for m, o in out.items()} == paths, p


def test_bench_reports_events_per_second(trace):
    r = pmsim_cli("analyze", "--trace", trace, "--bench")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [x.split(":")[0].strip() for x in lines] == ["strict", "epoch", "strand", "all"]
    assert all("13 events" in x and "M events/s" in x for x in lines)
    r = pmsim_cli("analyze", "--trace", trace, "--bench", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out) == ["strict", "epoch", "strand", "all"]
    assert all(o["events"] == 13 and o["events_per_s"] > 0 for o in out.values())


def test_nested_operations_are_counted_as_the_timing_engine_counts_them(tmp_path):
    # An outer "txn" around two inner "put"s: every end is an operation (3), in the analysis as in
    # `pmsim run`, so the normalised rate compares the same operations.
    p = tmp_path / "nested.trace"
    p.write_text(
        "# pmsim trace v1\nthreads 1\nT0 begin txn\nT0 begin put\nT0 store 0x100000000 8 1\n"
        "T0 end put\nT0 begin put\nT0 ofence\nT0 store 0x100001000 8 2\nT0 end put\nT0 end txn\n"
    )
    out = json.loads(pmsim_cli("analyze", "--trace", p, "--model", "strict", "--json", check=True).stdout)
    run = json.loads(pmsim_cli("run", "--trace", p, "--design", "eadr", "--json", check=True).stdout)
    assert out["ops"] == run["operations"] == 3
    assert out["instr_ops_per_s"] == pytest.approx(run["ops_per_sec"])


def test_a_piped_trace_is_analysed_and_compared_like_its_file(tmp_path):
    # A pipe reads once: analyze (analysis + eadr run) and compare (one run per design) read it
    # into memory or a copy instead of opening it again.
    import subprocess

    from conftest import PMSIM

    pmsim_cli(
        "trace",
        "gen",
        "--workload",
        "nstore",
        "-p",
        "ops=40",
        "-p",
        "threads=2",
        "-o",
        tmp_path / "n.bin",
        check=True,
    )
    pmsim_cli("trace", "convert", tmp_path / "n.bin", tmp_path / "n.trace", check=True)
    for name in ("n.bin", "n.trace"):
        for cmd in (
            ["analyze", "--model", "strict,epoch", "--json"],
            ["compare", "--designs", "baseline,eadr", "-q"],
        ):
            direct = pmsim_cli(*cmd, "--trace", tmp_path / name, check=True).stdout
            with open(tmp_path / name, "rb") as f:
                piped = subprocess.run(
                    [*PMSIM, *cmd, "--trace", "/dev/stdin"], stdin=f, capture_output=True, text=True
                )
            assert piped.returncode == 0, piped.stderr
            assert piped.stdout.replace("/dev/stdin", "T") == direct.replace(str(tmp_path / name), "T")


def test_granularities_take_hex_like_other_integers(trace):
    r = pmsim_cli("analyze", "--trace", trace, "--atomic-bytes", "0x10", "--track-bytes", "0x40", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["atomic_bytes"], out["track_bytes"]) == (16, 64)
