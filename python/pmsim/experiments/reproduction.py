"""What every paper reproduction does around its own figures, done once.

Why: ``pmsim reproduce PAPER`` (ASAP, Memory Persistency, BROI and its remote half, and the ones
to come) each resolve a scale to run parameters, write into one folder per paper, label their
runs by the figure they feed, run them through the cached parallel runner, keep every run as a
table, and write ``NOTES.txt`` and ``PAPER.md`` beside the figures. :class:`Reproduction` does
those the same way for all of them, so a reproduction module is its jobs, its figures and its
comparison with the paper, nothing else. It guarantees: an unknown scale is one clear error
before anything runs or is written; every file goes through :func:`pmsim.output.write_atomic`
(never half-written), into a fresh folder that replaces the paper's folder only when the
reproduction is done (:meth:`Reproduction.staged`: never a mix of an earlier run's files and
this one's); runs come back in job order whatever the parallelism, so tables are
byte-identical from run to run.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pandas as pd
from tqdm.auto import tqdm

from pmsim import PmsimError, plots
from pmsim.output import folder, markdown, replaced_folder, write_atomic
from pmsim.sweep import _stop_signals_raise, run_jobs, write_table


def _check_scale(name: str, scales: dict[str, dict[str, Any]], scale: str) -> None:
    if scale not in scales:
        raise PmsimError(f"reproduce {name}: unknown scale '{scale}' (valid: {', '.join(scales)})")


class RunOptions(TypedDict, total=False):
    """How a reproduction runs its simulations (the keyword arguments every ``reproduce`` takes)."""

    workers: int | None  # parallel runs (None: one per CPU of the affinity: sweep.default_workers)
    progress: bool  # show the progress bar (default True)
    cache: bool  # reuse cached runs (default True; False reruns and refreshes them)


@dataclass
class Reproduction:
    """One paper's reproduction in progress: its folder, its scale and how its runs are run."""

    outdir: Path
    scale: str
    params: dict[str, Any]  # the scale's run parameters (operations per thread, ...)
    figures: dict[str, tuple[str, str]]  # file stem -> (title, y label)
    workers: int | None = None
    progress: bool = True
    cache: bool = True
    # Where the results end up: ``outdir`` itself, or, while a staged reproduction (:meth:`staged`)
    # writes into a fresh folder, the folder that one replaces at the end.
    final: Path | None = None
    # The staged reproduction's messages, printed once its folder is in place (None: print now).
    said: list[str] | None = None

    @classmethod
    def start(
        cls,
        out: str | Path,
        name: str,
        scales: dict[str, dict[str, Any]],
        scale: str,
        figures: dict[str, tuple[str, str]],
        **run: Unpack[RunOptions],
    ) -> Reproduction:
        """Checks ``scale`` against ``scales`` and creates ``OUT/NAME/``. ``figures`` names
        every figure the reproduction draws: file stem -> (title, y label); a title may name
        the scale's parameters as ``{name}`` (``"({threads} threads)"``)."""
        _check_scale(name, scales, scale)
        return cls(folder(out, name), scale, scales[scale], figures, **run)

    @classmethod
    @contextlib.contextmanager
    def staged(
        cls,
        out: str | Path,
        name: str,
        scales: dict[str, dict[str, Any]],
        scale: str,
        figures: dict[str, tuple[str, str]],
        **run: Unpack[RunOptions],
    ) -> Iterator[Reproduction]:
        """:meth:`start`, written whole or not at all (:func:`pmsim.output.replaced_folder`):
        files go to a fresh folder beside ``OUT/NAME/`` that replaces it when the block ends,
        and the reproduction's messages (:meth:`say`) are printed then. An interrupted or failed
        reproduction leaves an earlier ``OUT/NAME/`` as it was, not a mix of old and new files
        that reads as complete."""
        _check_scale(name, scales, scale)
        # SIGTERM/SIGHUP (`kill`, a batch system's cancel) then stop it as Ctrl-C does, removing
        # the fresh folder, instead of killing the process with it left behind.
        with _stop_signals_raise(), replaced_folder(out, name) as d:
            rep = cls(d, scale, scales[scale], figures, **run, final=Path(out) / name, said=[])
            yield rep
        for text in rep.said:
            print(text)

    def part(self, scales: dict[str, dict[str, Any]], figures: dict[str, tuple[str, str]]) -> Reproduction:
        """Another reproduction writing into this one's folder (BROI's remote half), with its
        own scales and figures; its messages are this one's."""
        return Reproduction(
            self.outdir,
            self.scale,
            scales[self.scale],
            figures,
            workers=self.workers,
            progress=self.progress,
            cache=self.cache,
            final=self.final,
            said=self.said,
        )

    @property
    def where(self) -> Path:
        """The folder the results are in once the reproduction is done (messages name it)."""
        return self.final if self.final is not None else self.outdir

    def say(self, text: object = "") -> None:
        """A message for the user; a staged reproduction's wait until its folder is in place
        (printing can fail, ``| head``, and must not cost the results)."""
        if self.said is None:
            print(text)
        else:
            self.said.append(str(text))

    def run(self, jobs: list[dict], desc: str) -> pd.DataFrame:
        """Runs ``jobs`` (cached, in parallel, with the progress bar); one row per job, in order."""
        return run_jobs(jobs, workers=self.workers, progress=self.progress, desc=desc, cache=self.cache)

    def keep_runs(self, df: pd.DataFrame, name: str = "runs.csv") -> pd.DataFrame:
        """Writes every run (one row each, every statistic) as CSV ``name`` and as Parquet beside it
        (typed columns for pandas: ``pd.read_parquet``)."""
        self.write(name, df.to_csv(index=False))
        write_table(df, str((self.outdir / name).with_suffix(".parquet")))
        return df

    def bar(self, total: int, desc: str) -> tqdm:
        """The progress bar of work that is not a list of runs (analyses in this process)."""
        # No stderr (``2>&-``) to draw it on: no bar.
        return tqdm(total=total, desc=desc, disable=not self.progress or sys.stderr is None, unit="run")

    def path(self, name: str) -> Path:
        """Where result file ``name`` of this reproduction goes."""
        return self.outdir / name

    def bars(self, name: str, df: pd.DataFrame, index: str, columns: str, values: str, **options) -> Path:
        """Figure ``name`` as grouped bars (:func:`pmsim.plots.grouped_bars`; ``options``: order,
        hline, log, table)."""
        return plots.grouped_bars(
            df, index=index, columns=columns, values=values, **self._labels(name), **options
        )

    def stacked(self, name: str, df: pd.DataFrame, index: str, columns: str, values: str, **options) -> Path:
        """Figure ``name`` as a stacked breakdown (:func:`pmsim.plots.stacked_bars`)."""
        return plots.stacked_bars(
            df, index=index, columns=columns, values=values, **self._labels(name), **options
        )

    def lines(self, name: str, df: pd.DataFrame, x: str, y: str, hue: str, **options) -> Path:
        """Figure ``name`` as lines over a parameter (:func:`pmsim.plots.lines`; ``options``:
        logx, logy, xlabel)."""
        return plots.lines(df, x=x, y=y, hue=hue, **self._labels(name), **options)

    def _labels(self, name: str) -> dict[str, Any]:
        title, ylabel = self.figures[name]
        return {"title": title.format(**self.params), "ylabel": ylabel, "path": self.path(f"{name}.png")}

    def pivot_md(
        self, name: str, df: pd.DataFrame, index: str, columns: str, values: str, fmt: str = "{:.4g}"
    ) -> Path:
        """Figure ``name``'s data as ``name.md``: ``values`` with one row per ``index`` and one
        column per ``columns`` (what the plot shows), so every PNG has a table beside it."""
        return self.write(
            f"{name}.md",
            markdown(df.pivot_table(index=index, columns=columns, values=values, sort=False), fmt),
        )

    def write(self, name: str, text: str) -> Path:
        """Writes one result file of this reproduction (a table, ``PAPER.md``, ``NOTES.txt``)."""
        write_atomic(self.outdir / name, text)
        return self.outdir / name

    def write_lines(self, name: str, lines: list[str]) -> Path:
        """Writes ``lines`` as a text file, one a line, ending in a newline."""
        return self.write(name, "\n".join(lines) + "\n")


def label(jobs: list[dict], **labels: Any) -> list[dict]:
    """Adds columns to the rows ``jobs`` will give (which experiment, variant, ...), in order."""
    for j in jobs:
        j["label"] = {**j["label"], **labels}
    return jobs


def geomean(s: pd.Series) -> float:
    """The geometric mean of positive values (speedups, ratios)."""
    return float(s.prod() ** (1.0 / len(s)))
