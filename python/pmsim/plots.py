"""Plots as PNG files (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


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
) -> Path:
    """One group of bars per `index` value, one bar per `columns` value; writes `path`."""
    table = df.pivot_table(index=index, columns=columns, values=values, aggfunc="mean", sort=False)
    if order:
        table = table[[c for c in order if c in table.columns]]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(table) + 2), 3.6))
    table.plot.bar(ax=ax, width=0.8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("")
    if hline is not None:
        ax.axhline(hline, color="black", linewidth=0.8)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8, ncol=min(4, len(table.columns)))
    ax.grid(axis="y", alpha=0.3)
    plt.xticks(rotation=30, ha="right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
