"""The Python front's shared helpers: result files (pmsim.output), figure kinds (pmsim.plots) and
the reproduction scaffolding (pmsim.experiments.reproduction), and who imports whom."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pmsim import PmsimError, plots
from pmsim.experiments.reproduction import Reproduction, geomean, label
from pmsim.output import folder, markdown, pipe_table, write_atomic

PNG = b"\x89PNG\r\n\x1a\n"
EXPERIMENTS = [
    "asap",
    "asap_paper",
    "broi",
    "persist_bound",
    "persistency",
    "profile",
    "remote",
    "reproduction",
]


def test_pipe_table_aligns_text_left_and_numbers_right():
    lines = pipe_table(["name", "n", "x"], [["a", 1, "2.50"], ["b c", 10, ""]], "lrr")
    assert lines == ["| name | n | x |", "|---|---:|---:|", "| a | 1 | 2.50 |", "| b c | 10 |  |"]


def test_pipe_table_rejects_an_alignment_that_does_not_fit_the_header():
    with pytest.raises(ValueError, match="one l or r per column"):
        pipe_table(["a", "b"], [], "l")
    with pytest.raises(ValueError):
        pipe_table(["a"], [], "c")


def test_markdown_formats_numbers_and_keeps_text():
    t = pd.DataFrame({"speedup": [1.23456, 2.0], "kind": ["alone", "cumulative"]}, index=["x", "y"])
    t.index.name = "variant"
    assert markdown(t, "{:.2f}") == (
        "| variant | speedup | kind |\n|---|---:|---:|\n| x | 1.23 | alone |\n| y | 2.00 | cumulative |\n"
    )
    # the default: four significant digits; an index without a name gives an empty header cell
    assert markdown(pd.DataFrame({"v": [123456.0]}, index=["r"])).splitlines()[::2] == [
        "|  | v |",
        "| r | 1.235e+05 |",
    ]


def test_write_atomic_and_folder_create_what_is_missing(tmp_path: Path):
    d = folder(tmp_path, "a", "b")
    assert d == tmp_path / "a" / "b" and d.is_dir()
    assert folder(tmp_path, "a", "b") == d  # an existing folder is fine
    write_atomic(tmp_path / "new" / "deep" / "t.csv", "x,y\n")
    assert (tmp_path / "new" / "deep" / "t.csv").read_text() == "x,y\n"
    assert not list(tmp_path.rglob("*.partial"))


def _long() -> pd.DataFrame:
    # two workloads x three parts; "w1"/"flush" appears twice (the figure shows the mean)
    rows = [
        ("w1", "compute", 1.0),
        ("w1", "flush", 2.0),
        ("w1", "flush", 4.0),
        ("w1", "fence", 3.0),
        ("w2", "compute", 5.0),
        ("w2", "flush", 1.0),
        ("w2", "fence", 0.5),
    ]
    return pd.DataFrame(rows, columns=["workload", "part", "ns"])


def _drawn(monkeypatch) -> list:
    """Catches each figure as it is saved (the real PNG is still written)."""
    figures = []
    save = plots._save

    def keep(fig, path):
        figures.append([(p.get_x(), p.get_y(), p.get_height()) for p in fig.axes[0].patches])
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def test_stacked_bars_stack_the_parts_and_write_the_table(tmp_path: Path, monkeypatch):
    drawn = _drawn(monkeypatch)
    png = tmp_path / "breakdown.png"
    order = ["compute", "flush", "fence"]
    plots.stacked_bars(
        _long(), index="workload", columns="part", values="ns", order=order, title="t", ylabel="ns", path=png
    )
    assert png.read_bytes()[:8] == PNG
    table = pd.read_csv(png.with_suffix(".csv"), index_col=0)
    assert list(table.columns) == order and list(table.index) == ["w1", "w2"]
    assert table.loc["w1"].tolist() == [1.0, 3.0, 3.0]
    assert png.with_suffix(".md").read_text().splitlines()[2] == "| w1 | 1 | 3 | 3 |"
    # segments of one workload share an x and sit on top of each other: w1 is 1, then 3, then 3
    bars = sorted(drawn[0])
    w1 = [b for b in bars if abs(b[0] - bars[0][0]) < 1e-9]
    assert [(y, h) for _, y, h in sorted(w1, key=lambda b: b[1])] == [(0.0, 1.0), (1.0, 3.0), (4.0, 3.0)]


def test_grouped_bars_put_bars_side_by_side_from_zero(tmp_path: Path, monkeypatch):
    drawn = _drawn(monkeypatch)
    png = tmp_path / "grouped.png"
    plots.grouped_bars(
        _long(), index="workload", columns="part", values="ns", title="t", ylabel="ns", path=png, table=False
    )
    assert png.read_bytes()[:8] == PNG and not png.with_suffix(".csv").exists()
    assert len(drawn[0]) == 6 and all(y == 0.0 for _, y, _ in drawn[0])
    assert len({x for x, _, _ in drawn[0]}) == 6  # every bar its own place


def test_a_reproduction_rejects_an_unknown_scale_before_writing_anything(tmp_path: Path):
    scales = {"quick": {"ops": 10}, "full": {"ops": 100}}
    with pytest.raises(PmsimError, match="unknown scale 'huge' .*quick, full"):
        Reproduction.start(tmp_path / "out", "paper", scales, "huge", {})
    assert not (tmp_path / "out").exists()


def test_a_reproduction_names_its_figures_once(tmp_path: Path):
    figures = {"fig1_lat": ("Fig 1: latency ({threads} threads)", "ns")}
    rep = Reproduction.start(tmp_path, "paper", {"quick": {"threads": 4}}, "quick", figures, progress=False)
    assert rep.outdir == tmp_path / "paper" and rep.outdir.is_dir()
    df = pd.DataFrame({"t": [1, 2, 1, 2], "ns": [5.0, 4.0, 6.0, 3.0], "design": ["a", "a", "b", "b"]})
    path = rep.lines("fig1_lat", df, "t", "ns", "design")
    assert path == tmp_path / "paper" / "fig1_lat.png" and path.read_bytes()[:8] == PNG
    assert rep._labels("fig1_lat")["title"] == "Fig 1: latency (4 threads)"
    with pytest.raises(KeyError):
        rep.bars("undeclared", df, "t", "design", "ns")
    rep.write_lines("NOTES.txt", ["one", "two"])
    assert (rep.outdir / "NOTES.txt").read_text() == "one\ntwo\n"


def test_label_adds_columns_in_order_and_geomean():
    jobs = label([{"label": {"threads": 1}}, {"label": {}}], experiment="fig9", scenario="local")
    assert [list(j["label"]) for j in jobs] == [
        ["threads", "experiment", "scenario"],
        ["experiment", "scenario"],
    ]
    assert geomean(pd.Series([2.0, 8.0])) == pytest.approx(4.0)


def test_the_experiments_do_not_import_the_cli():
    """cli.py dispatches to the experiments; the experiments (and what they import) never
    import cli.py back: shared helpers live in pmsim.output, pmsim.plots and the scaffolding."""
    mods = ", ".join(f"pmsim.experiments.{m}" for m in EXPERIMENTS)
    code = f"import sys, {mods}; print('pmsim.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    root = Path(__file__).resolve().parents[2] / "python" / "pmsim"
    for m in EXPERIMENTS:
        assert "pmsim.cli" not in (root / "experiments" / f"{m}.py").read_text(), m
    assert "def write_atomic" not in (root / "cli.py").read_text()
