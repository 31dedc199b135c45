"""What the commands say, as the docs promise it (tester U's and tester S's findings): every
command's help states its defaults and exit statuses, a table without its baseline says why its
speedup column is missing, a run without operations does not speak of a first begin, and a
design's one-line description names the model it promises."""

from __future__ import annotations

import json

from conftest import pmsim_cli

import pmsim


def test_analyze_help_states_the_default_model_and_the_exit_statuses():
    r = pmsim_cli("analyze", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "exit status:" in text and "critical-path" in text
    # Each default once: the formatter adds "(default: X)", the help text must not say it too.
    assert text.count("(default: strict)") == 1 and text.count("(default: 8)") == 2, text
    assert "default strict" not in text and "default 8)" not in text and "default 500)" not in text


def test_lint_help_states_its_default_once():
    r = pmsim_cli("trace", "lint", "--help")
    assert r.returncode == 0 and " ".join(r.stdout.split()).count("default: 10") == 1, r.stdout


def test_compare_without_baseline_says_why_the_speedup_column_is_missing(tmp_path):
    out = tmp_path / "c.csv"
    r = pmsim_cli("compare", "--workload", "array", "-p", "ops=20", "--designs", "eadr,bbb", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "no speedup_vs_baseline column: baseline is not among --designs" in r.stderr
    assert "speedup_vs_baseline" not in out.read_text().splitlines()[0]


def test_a_run_without_operations_does_not_speak_of_a_first_begin(tmp_path):
    t = tmp_path / "t.trace"
    t.write_text("# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 dfence\n")
    r = pmsim_cli("run", "--trace", t, "--design", "baseline")
    assert r.returncode == 0, r.stderr
    assert "no begin/end pair completed" in r.stdout and "first begin" not in r.stdout


def test_each_designs_description_names_the_model_it_promises():
    about = dict(pmsim.designs())
    for d in ("delegated", "broi"):
        promise = json.loads(
            pmsim_cli("run", "--workload", "array", "-p", "ops=5", "--design", d, "--json").stdout
        )["promise"]
        words = {"ep": "epoch", "rp": "release", "strict": "strict"}
        assert words[promise] in about[d], (d, promise, about[d])
        assert not ({"epoch", "strict", "release"} - {words[promise]}) & set(
            about[d].replace(",", " ").split()
        ), about[d]
