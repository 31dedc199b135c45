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
    table: bool = True,
) -> Path:
    """One group of bars per `index` value, one bar per `columns` value; writes `path` and,
    unless ``table=False`` (the caller writes its own), the plotted numbers beside it as
    ``.csv`` and ``.md`` so every figure comes with its table."""
    data = df.pivot_table(index=index, columns=columns, values=values, aggfunc="mean", sort=False)
    if order:
        data = data[[c for c in order if c in data.columns]]
    if table:
        from pmsim.cli import write_atomic

        write_atomic(path.with_suffix(".csv"), data.round(4).to_csv())
        write_atomic(path.with_suffix(".md"), markdown(data))
    table = data
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


def markdown(table: pd.DataFrame) -> str:
    """A pipe table of numbers (pandas' to_markdown needs the optional tabulate package)."""
    head = [table.index.name or "", *map(str, table.columns)]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|"]
    for idx, row in table.iterrows():
        out.append("| " + " | ".join([str(idx), *(f"{v:.4g}" for v in row)]) + " |")
    return "\n".join(out) + "\n"


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
