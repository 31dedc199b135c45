"""The critical-path bound beside the timing designs: `pmsim profile` columns and the table
`reproduce asap` writes (through its function, on a small set of runs)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import pmsim_cli

import pmsim
from pmsim import api
from pmsim.experiments.persist_bound import asap_table


def test_profile_shows_the_critical_path_per_op():
    r = pmsim_cli("profile", "--workloads", "cwl,array", "--threads", "1", "--ops", "30", "-q")
    assert r.returncode == 0, r.stderr
    assert "path/op strict" in r.stdout and "path/op strand" in r.stdout
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("cwl"))
    # CWL, one thread, strict: 7 copy stores of 16 B (108 B entry) and the head, one after
    # another: 8 per insert; epoch: the entry, then the head: 2.
    assert line.split()[-3:-1] == ["8.0", "2.0"]


def test_asap_table_sets_the_bound_beside_each_design(tmp_path):
    runs = []
    for d in ("eadr", "asap-ep"):
        for w in ("cwl", "array"):
            run = pmsim.run(d, workload=w, threads=2, ops=40)
            runs.append({"experiment": "fig8", "design": d, "workload": w, "ops_per_sec": run["ops_per_sec"]})
    t = asap_table(pd.DataFrame(runs), tmp_path, threads=2, ops=40, progress=False)
    assert (tmp_path / "persist_bound.csv").exists() and (tmp_path / "persist_bound.md").exists()
    lat = api.config()["pm"]["write_ns"]
    for w in ("cwl", "array"):
        rep = pmsim.analyze(workload=w, model="epoch", threads=2, ops=40, instr_ops_per_s=1)
        assert t.loc[w, "path_per_op_epoch"] == pytest.approx(rep["critical_path_per_op"])
        p = t.loc[w]
        assert p["path_per_op_strict"] >= p["path_per_op_epoch"] >= p["path_per_op_strand"]
        bound = 1e9 / (rep["critical_path_per_op"] * lat)
        rate = next(r["ops_per_sec"] for r in runs if r["design"] == "asap-ep" and r["workload"] == w)
        assert t.loc[w, "asap-ep_pct_of_epoch_bound"] == pytest.approx(100 * rate / bound)
    assert "cwl" in (tmp_path / "persist_bound.md").read_text()
