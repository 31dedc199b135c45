"""`pmsim reproduce asap --scale quick`: tables and real PNG plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PNG = b"\x89PNG\r\n\x1a\n"


def test_reproduce_asap_quick(cli, tmp_path: Path):
    out = tmp_path / "results"
    p = cli("reproduce", "asap", "--scale", "quick", "--out", out, "-q", check=True)
    d = out / "asap"
    assert "geomean" in p.stdout
    for name in (
        "fig8_speedup.csv",
        "fig8_speedup.png",
        "fig13_bandwidth.csv",
        "fig13_bandwidth.png",
        "runs.csv",
    ):
        assert (d / name).is_file(), name
    for png in ("fig8_speedup.png", "fig13_bandwidth.png"):
        data = (d / png).read_bytes()
        assert data[:8] == PNG, png
        assert len(data) > 10_000, (png, len(data))
    fig8 = pd.read_csv(d / "fig8_speedup.csv", index_col=0)
    assert "baseline" in fig8.columns and "geomean" in fig8.index
    assert (fig8["baseline"] == 1.0).all()
    assert len(fig8) >= 2
    if "eadr" in fig8.columns:  # fences are free under eADR: never slower than the baseline
        assert (fig8["eadr"] >= 1.0).all()
    md = (d / "fig8_speedup.md").read_text().splitlines()
    assert md[0].startswith("| workload | baseline |") and md[1].startswith("|---|")
    assert len(md) == len(fig8) + 2
    assert not list(d.glob("*.partial"))
    bw = pd.read_csv(d / "fig13_bandwidth.csv")
    assert sorted(set(bw.threads)) == [1, 4]
    assert sorted(set(bw.media_write_gbps)) == [2.3, 10.0]
    assert (bw[bw.design == "hops-rp"].vs_hops_rp == 1.0).all()
    sens = pd.read_csv(d / "fig8_sensitivity.csv", index_col=0)
    assert list(sens.index) == [
        "default",
        "durable_every=4",
        "durable_every=16",
        "xpbuffer_lines=256",
        "xpbuffer_lines=256, durable_every=16",
    ]
    assert (sens["baseline"] == 1.0).all()
    # the default row is Fig 8's own runs: the same geomeans
    for design in sens.columns:
        assert abs(sens.loc["default", design] - fig8.loc["geomean", design]) < 1e-3, design
    assert (d / "fig8_sensitivity.png").read_bytes()[:8] == PNG
    # every figure comes with its table; every run is kept as Parquet too; NOTES says what it is
    for png in d.glob("*.png"):
        assert png.with_suffix(".csv").is_file() and png.with_suffix(".md").is_file(), png.name
    runs = pd.read_parquet(d / "runs.parquet")
    assert list(runs.columns) == list(pd.read_csv(d / "runs.csv").columns) and len(runs) > 0
    notes = (d / "NOTES.txt").read_text()
    assert notes.startswith("pmsim reproduction of the ASAP paper") and "--scale quick" in notes
