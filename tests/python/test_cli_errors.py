"""Bad input: exit status 2, one line `pmsim: error: ...` on stderr, no traceback, no output file."""

from __future__ import annotations

from pathlib import Path

import pytest

RUN = ["run", "--workload", "array", "-p", "ops=20", "--design", "baseline"]


def assert_clean_error(p, *, mentions: list[str]) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("pmsim: error: "), p.stderr
    for m in mentions:
        assert m in lines[0], (m, lines[0])
    return lines[0]


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("out"))


@pytest.mark.parametrize(
    "args, mentions",
    [
        (["run", "--workload", "array", "--design", "no-such-design"], ["no-such-design", "baseline"]),
        (["run", "--workload", "no-such-workload", "--design", "baseline"], ["no-such-workload", "array"]),
        ([*RUN, "-p", "frob=1"], ["frob"]),
        ([*RUN, "-p", "ops=many"], ["ops", "many"]),
        ([*RUN, "-p", "ops"], ["ops", "name=value"]),
        ([*RUN, "--set", "pm.write_ns"], ["pm.write_ns", "name=value"]),
        ([*RUN, "--set", "pm.write_ns=fast"], ["pm.write_ns", "fast"]),
        ([*RUN, "--set", "pm.frob=1"], ["pm.frob"]),
        (["run", "--trace", "no-such-file.trace", "--design", "baseline"], ["no-such-file.trace"]),
        ([*RUN, "--config", "no-such-config.toml"], ["no-such-config.toml"]),
    ],
    ids=[
        "unknown-design",
        "unknown-workload",
        "unknown-param",
        "bad-param-value",
        "param-without-value",
        "malformed-set",
        "bad-set-value",
        "unknown-set-name",
        "missing-trace",
        "missing-config",
    ],
)
def test_run_bad_input(cli, tmp_path: Path, args: list[str], mentions: list[str]):
    p = cli(*args, "-o", "out.json", cwd=tmp_path)
    assert_clean_error(p, mentions=mentions)
    assert leftovers(tmp_path) == []


def test_malformed_text_trace_names_file_and_line(cli, tmp_path: Path):
    bad = tmp_path / "bad.trace"
    bad.write_text("# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 2a\nT0 ofence\nT0 frobnicate 3\n")
    for args in (
        ["run", "--trace", bad, "--design", "baseline", "-o", "out.json"],
        ["trace", "stats", bad],
        ["trace", "convert", bad, "out.bin"],
    ):
        p = cli(*args, cwd=tmp_path)
        line = assert_clean_error(p, mentions=["bad.trace:5:", "frobnicate"])
        assert line.startswith(f"pmsim: error: {bad}:5: "), line
        assert leftovers(tmp_path) == [], args


@pytest.mark.parametrize(
    "body, lineno, mentions",
    [
        ("threads 1\nT0 store 0x100000038 16\n", 3, ["crosses a 64 B line"]),
        ("threads 1\nT3 ofence\n", 3, ["T3"]),
        ("T0 ofence\n", 2, ["threads"]),
        ("threads 1\nT0 store 0x100000000 2 12345\n", 3, ["does not fit in 2 bytes"]),
    ],
    ids=["crosses-line", "bad-thread", "event-before-threads", "value-too-big"],
)
def test_text_trace_errors(cli, tmp_path: Path, body: str, lineno: int, mentions: list[str]):
    bad = tmp_path / "t.trace"
    bad.write_text("# pmsim trace v1\n" + body)
    p = cli("run", "--trace", bad, "--design", "baseline", "-o", "out.json", cwd=tmp_path)
    assert_clean_error(p, mentions=[f"t.trace:{lineno}:", *mentions])
    assert leftovers(tmp_path) == []


def test_missing_header_is_reported(cli, tmp_path: Path):
    bad = tmp_path / "h.trace"
    bad.write_text("threads 1\nT0 ofence\n")
    assert_clean_error(cli("trace", "stats", bad), mentions=["h.trace:1:", "# pmsim trace v1"])


@pytest.mark.parametrize(
    "toml, lineno, mentions",
    [
        ("[pm]\nwrite_ns = 90.0\nwrite_nss = 1.0\n", 3, ["write_nss"]),
        ("[core]\ncount = 4\n\n[pm]\nwrite_ns = \n", 5, []),
        ("[frob]\nx = 1\n", 1, ["frob"]),
    ],
    ids=["unknown-key", "syntax-error", "unknown-section"],
)
def test_malformed_toml_names_file_and_line(cli, tmp_path: Path, toml: str, lineno: int, mentions: list[str]):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    p = cli(*RUN, "--config", cfg, "-o", "out.json", cwd=tmp_path)
    assert_clean_error(p, mentions=[f"bad.toml:{lineno}:", *mentions])
    assert leftovers(tmp_path) == []
    assert_clean_error(cli("config", "show", "--config", cfg), mentions=[f"bad.toml:{lineno}:"])


def test_invalid_config_value_is_named(cli, tmp_path: Path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[mc]\ninterleave = 100\n")
    assert_clean_error(cli(*RUN, "--config", cfg, "-o", "out.json", cwd=tmp_path), mentions=["mc.interleave"])
    assert leftovers(tmp_path) == []


def test_corrupt_binary_trace(cli, tmp_path: Path):
    good = tmp_path / "a.bin"
    cli("trace", "gen", "--workload", "array", "-p", "ops=20", "-o", good, check=True)
    data = good.read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[: len(data) - 7])
    p = cli("run", "--trace", cut, "--design", "baseline", "-o", "out.json", cwd=tmp_path)
    assert_clean_error(p, mentions=["cut.bin", "trunc"])
    assert leftovers(tmp_path) == []


SWEEP1 = ["sweep", "--designs", "baseline", "--workloads", "array", "-p", "ops=5", "-o", "out.csv"]


@pytest.mark.parametrize(
    "args, mentions",
    [
        (["compare", "--workload", "no-such-workload", "-o", "out.csv"], ["no-such-workload"]),
        (["compare", "--workload", "array", "-p", "frob=1", "-o", "out.csv"], ["frob"]),
        (["compare", "--workload", "array", "-p", "ops=many", "-o", "out.csv"], ["ops", "many"]),
        (
            ["compare", "--workload", "array", "--trace", "t.trace", "-o", "out.csv"],
            ["--trace", "--workload"],
        ),
        (["sweep", "--designs", "baseline,nope", "--workloads", "array", "-o", "out.csv"], ["nope"]),
        (
            ["sweep", "--designs", "baseline", "--workloads", "array", "--grid", "ops", "-o", "out.csv"],
            ["--grid"],
        ),
        (SWEEP1 + ["--cluster-jobs", "2"], ["--cluster-jobs", "--cluster"]),
        (SWEEP1 + ["--scheduler", "tcp://127.0.0.1:1", "--cluster", "local"], ["--scheduler", "--cluster"]),
        (SWEEP1 + ["--scheduler", "tcp://127.0.0.1:1", "-j", "2"], ["-j", "--scheduler"]),
        (["trace", "gen", "--workload", "nope", "-o", "out.trace"], ["nope"]),
        (["trace", "gen", "--workload", "array", "-p", "frob=2", "-o", "out.bin"], ["frob"]),
        (["trace", "convert", "no-such-file.trace", "out.bin"], ["no-such-file.trace"]),
        (["config", "show", "--set", "frob=1"], ["frob"]),
        (["reproduce", "nope", "--out", "out"], ["nope"]),
        (["run", "--design", "baseline"], ["--workload"]),
        (["frobnicate"], ["frobnicate"]),
    ],
    ids=[
        "compare-workload",
        "compare-param",
        "compare-value",
        "compare-workload-and-trace",
        "sweep-design",
        "sweep-grid",
        # Tester Y's Y5: options that would be silently ignored are refused.
        "sweep-cluster-jobs-alone",
        "sweep-scheduler-and-cluster",
        "sweep-jobs-on-a-scheduler",
        "gen-workload",
        "gen-param",
        "convert-missing",
        "config-set",
        "reproduce-paper",
        "usage-missing-input",
        "usage-unknown-command",
    ],
)
def test_other_commands_bad_input(cli, tmp_path: Path, args: list[str], mentions: list[str]):
    quiet = ["-q"] if args[0] in ("compare", "sweep") else []
    p = cli(*args, *quiet, cwd=tmp_path)
    assert_clean_error(p, mentions=mentions)
    assert leftovers(tmp_path) == []


def test_workload_parameters_do_not_apply_to_traces(cli, tmp_path: Path, sample_trace: Path):
    p = cli(
        "run", "--trace", sample_trace, "-p", "ops=3", "--design", "baseline", "-o", "out.json", cwd=tmp_path
    )
    assert_clean_error(p, mentions=["ops", "trace"])
    assert leftovers(tmp_path) == []
    assert_clean_error(cli("trace", "stats", sample_trace, "-p", "ops=3"), mentions=["not both"])
    assert_clean_error(cli("trace", "stats"), mentions=["trace"])


def test_sweep_rejects_a_bad_machine_value_before_its_progress_bar(cli, tmp_path: Path):
    # Without -q: a progress bar started before the check would add its own lines to stderr.
    p = cli(
        "sweep",
        "--designs",
        "baseline",
        "--workloads",
        "array",
        "--grid",
        "pm.write_ns=100,fast",
        "-o",
        "out.csv",
        cwd=tmp_path,
    )
    assert_clean_error(p, mentions=["pm.write_ns", "fast"])
    assert leftovers(tmp_path) == []
