"""Plots as PNG files (matplotlib, headless): one helper per figure kind a reproduction draws.

- :func:`grouped_bars`: one group of bars per row (a workload, a benchmark), one bar per design
  or variant; speedups and normalised values draw their reference line with ``hline=1.0``.
- :func:`stacked_bars`: the same groups with the bars stacked: a breakdown of a total into its
  parts (where the cycles or the latency of each design go).
- :func:`lines`: one line per design or benchmark over a swept parameter (threads, latency).

The bar helpers write the plotted numbers beside the PNG as ``.csv`` and ``.md`` (unless the
caller writes its own table), so every figure comes with its table. Every reproduction, present
and coming, draws through these, so figures look alike and a style change is made once.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path


def _import_matplotlib_agg():
    """matplotlib with the Agg backend, whatever ``$MPLBACKEND`` says: pmsim only writes PNGs,
    and matplotlib validates the variable when imported, so a stale invalid value in the user's
    environment failed every reproduction. The variable is set to Agg for the import only (a
    caller's own matplotlib, imported already, is left as it is)."""
    if "matplotlib" in sys.modules:
        import matplotlib
    else:
        saved = os.environ.get("MPLBACKEND")
        os.environ["MPLBACKEND"] = "Agg"
        try:
            import matplotlib
        finally:
            if saved is None:
                del os.environ["MPLBACKEND"]
            else:
                os.environ["MPLBACKEND"] = saved
    matplotlib.use("Agg")
    return matplotlib


matplotlib = _import_matplotlib_agg()
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pmsim.output import markdown, write_atomic, write_bytes  # noqa: E402

__all__ = ["grouped_bars", "stacked_bars", "lines", "plotted", "markdown"]


def grouped_bars(
    df: pd.DataFrame,
    *,
    index: str,
    columns: str,
    values: str,
    title: str,
    ylabel: str,
    path: Path,
    order: list[str] | None = None,
    hline: float | None = None,
    log: bool = False,
    table: bool = True,
    stacked: bool = False,
) -> Path:
    """One group of bars per `index` value, one bar per `columns` value (the mean of `values`,
    in ``order`` when given; stacked into one bar with ``stacked=True``); writes `path` and,
    unless ``table=False`` (the caller writes its own), the plotted numbers beside it as
    ``.csv`` and ``.md``."""
    data = plotted(df, index, columns, values, order)
    if table:
        write_atomic(path.with_suffix(".csv"), data.round(4).to_csv())
        write_atomic(path.with_suffix(".md"), markdown(data))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(data) + 2), 3.6))
    data.plot.bar(ax=ax, width=0.8, stacked=stacked)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("")
    if hline is not None:
        ax.axhline(hline, color="black", linewidth=0.8)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8, ncol=min(4, len(data.columns)))
    ax.grid(axis="y", alpha=0.3)
    plt.xticks(rotation=30, ha="right")
    return _save(fig, path)


def stacked_bars(df: pd.DataFrame, *, index: str, columns: str, values: str, **options) -> Path:
    """A breakdown: one bar per `index` value made of one segment per `columns` value (the
    parts, bottom first, in ``order`` when given), each the mean of `values`. ``options`` are
    those of :func:`grouped_bars` (title, ylabel, path, order, table, ...)."""
    return grouped_bars(df, index=index, columns=columns, values=values, stacked=True, **options)


def lines(
    df: pd.DataFrame,
    *,
    x: str,
    y: str,
    hue: str,
    title: str,
    ylabel: str,
    path: Path,
    logx: bool = False,
    logy: bool = False,
    xlabel: str | None = None,
) -> Path:
    """One line per `hue` value (in order of first appearance) of `y` over `x`."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    for key, g in df.groupby(hue, sort=False):
        g = g.sort_values(x)
        ax.plot(g[x], g[y], marker="o", label=str(key))
    ax.set_title(title)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plotted(
    df: pd.DataFrame, index: str, columns: str, values: str, order: list[str] | None = None
) -> pd.DataFrame:
    """The table a bar figure shows: the mean of `values` per `index` (rows, in order of first
    appearance) and `columns` value (in ``order`` when given; others left out)."""
    data = df.pivot_table(index=index, columns=columns, values=values, aggfunc="mean", sort=False)
    if order:
        data = data[[c for c in order if c in data.columns]]
    return data


def _save(fig: plt.Figure, path: Path) -> Path:
    """Writes the figure like every other result file: atomically, folders created."""
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, dpi=120, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    write_bytes(path, png.getvalue())
    return path
