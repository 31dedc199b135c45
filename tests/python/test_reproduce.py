"""`pmsim reproduce asap --scale quick`: tables and real PNG plots."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pandas as pd
import pytest

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
        "dep_epoch=current",
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
    # Fig 10: every design at 1/2/4/8 threads, normalised to 1-thread HOPS-RP
    f10 = pd.read_csv(d / "fig10_scaling.csv")
    assert list(f10.columns) == ["design", "threads", "speedup"]
    assert sorted(set(f10.threads)) == [1, 2, 4, 8]
    hops = f10[f10.design == "hops-rp"].set_index("threads").speedup
    asap = f10[f10.design == "asap-rp"].set_index("threads").speedup
    assert hops[1] == 1.0
    assert (asap > hops).all(), (asap, hops)  # the paper's claim, which pmsim reproduces
    assert hops.is_monotonic_increasing and asap.is_monotonic_increasing
    assert (d / "fig10_scaling.png").read_bytes()[:8] == PNG
    assert (d / "fig10_scaling.md").read_text().startswith("| threads |")
    # Under pmsim's defaults, geomean: baseline < hops < asap <= eadr (quick scale 1.19 / 1.25
    # HOPS, 1.20 / 1.28 ASAP for EP / RP; full scale 1.20 / 1.27 and 1.20 / 1.31:
    # docs/asap-results.md). ASAP-EP leads HOPS-EP by under 1% at either scale (the paper: 37%),
    # so EP is held only to "not behind by more than 2%"; ASAP-RP's lead is 3%.
    g = fig8.loc["geomean"]
    for model in ("ep", "rp"):
        assert 1.1 < g[f"hops-{model}"] and 1.1 < g[f"asap-{model}"] <= g["eadr"], g
    assert g["hops-ep"] < 1.02 * g["asap-ep"], g
    assert g["hops-rp"] < g["asap-rp"], g
    # The paper's dependency rule (wait for the source's current epoch) costs HOPS far more than
    # ASAP, whose CDR messages resolve a dependency without polling.
    sens_hops, sens_asap = sens.loc["dep_epoch=current", "hops-rp"], sens.loc["dep_epoch=current", "asap-rp"]
    assert sens_hops < 0.9 * g["hops-rp"] and sens_asap > 0.95 * g["asap-rp"], (sens_hops, sens_asap)
    # ablation: default row, each switch cumulatively and alone, and the dfence frequency
    abl = pd.read_csv(d / "ablation.csv", index_col=0)
    assert abl.index[0] == "default" and (abl["baseline"] == 1.0).all()
    assert set(abl.kind) == {"default", "cumulative", "alone"}
    last = abl[abl.kind == "cumulative"].iloc[-2]  # every artifact switch, before the dfence row
    for _, switches in asap_switches():
        for k in switches:
            assert k in last.switches, (k, last.switches)
    assert abl.loc["+ durable_every=16"].switches.endswith("durable_every=16")
    # a switch that makes the baseline slower raises every other design's speedup
    assert abl.loc["only baseline flushes with clflush", "eadr"] > abl.loc["default", "eadr"]
    paper = (d / "PAPER.md").read_text()
    assert "2.29×" in paper and "| Fig 8: ASAP-RP over baseline (geomean) | 2.29× | " in paper
    row = next(line for line in paper.splitlines() if line.startswith("| Fig 8: ASAP-RP"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert abs(float(cells[2]) - g["asap-rp"]) < 0.006  # the pmsim column is Fig 8's geomean
    assert abs(float(cells[3]) - last["asap-rp"]) < 0.006  # the artifact column is the ablation's


def asap_switches():
    from pmsim.experiments import asap

    return asap.ARTIFACT_SWITCHES


def test_artifact_config_file_sets_exactly_the_ablation_switches(repo_root: Path):
    with open(repo_root / "configs" / "asap-artifact.toml", "rb") as f:
        doc = tomllib.load(f)
    flat = {f"{s}_{k}": v for s, t in doc.items() for k, v in t.items()}
    want = {}
    for _, switches in asap_switches():
        want.update(switches)
    norm = {
        k: str(v).lower() if isinstance(v, bool) else str(float(v)) if isinstance(v, int | float) else v
        for k, v in flat.items()
    }
    want = {k: str(float(v)) if isinstance(v, int | float) else v for k, v in want.items()}
    assert norm == want


def test_reproduce_asap_under_a_config_file(cli, tmp_path: Path):
    cfg = tmp_path / "slow-acks.toml"
    cfg.write_text("[noc]\nack_ns = 40.0\n")
    out = tmp_path / "results"
    cli("reproduce", "asap", "--scale", "quick", "--out", out, "--config", cfg, "-q", check=True)
    d = out / "asap-slow-acks"
    fig8 = pd.read_csv(d / "fig8_speedup.csv", index_col=0)
    assert (fig8["baseline"] == 1.0).all()
    assert "noc_ack_ns=40.0" in (d / "NOTES.txt").read_text()
    assert "configuration `" in (d / "PAPER.md").read_text()
    runs = pd.read_csv(d / "runs.csv")
    assert not runs.empty and "ablation" not in set(runs.experiment)


@pytest.mark.parametrize(
    "body, mentions",
    [
        ("[noc]\nfrob_ns = 1\n", ["frob"]),
        ("[noc\n", ["bad.toml"]),
        ("[noc]\nack_ns = -3.0\n", ["ack_ns"]),
        # Validated as every other command's --config: a quoted number is not a number.
        ('[pm]\nwrite_ns = "300"\n[rt]\nundo_reads_pm = "false"\n', ["bad.toml:2", "pm.write_ns"]),
    ],
    ids=["unknown-key", "syntax", "bad-value", "string-typed"],
)
def test_reproduce_bad_config_is_one_clear_line(cli, tmp_path: Path, body: str, mentions: list[str]):
    (tmp_path / "bad.toml").write_text(body)
    p = cli("reproduce", "asap", "--config", tmp_path / "bad.toml", "--out", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pmsim: error: "), p.stderr
    for m in mentions:
        assert m in lines[0], (m, lines[0])
    assert not (tmp_path / "out").exists()
