"""The Python API over the Rust core: one call per thing a researcher does.

Keyword arguments name configuration parameters with an underscore for the dot
(``pm_write_ns=120`` is ``pm.write_ns``) and workload parameters by their own names
(``threads``, ``ops``, ``seed``, ...). ``pmsim config show`` lists every parameter.
"""

from __future__ import annotations

import json
from typing import Any

from pmsim import _core


def _strs(d: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (d or {}).items()}


def run(
    design: str,
    *,
    workload: str | None = None,
    trace: str | None = None,
    config: str | None = None,
    allow_broken: bool = False,
    **params: Any,
) -> dict:
    """Simulates a workload (or a trace file) under ``design``; returns the stats as a dict.

    ``params`` mixes configuration overrides (``pm_write_ns=120``) and workload parameters
    (``threads=4, ops=2000``); they are told apart by name.
    """
    cfg, wl = _core.split_kwargs(_strs(params))
    if trace is not None and wl:
        raise _core.PmsimError(f"unknown parameter(s) for a trace run: {', '.join(sorted(wl))}")
    out = _core.run(
        design,
        trace=trace,
        workload=workload,
        params=wl,
        config=config,
        overrides=cfg,
        allow_broken=allow_broken,
    )
    return json.loads(out)


def flatten(stats: dict) -> dict:
    """One flat row of the headline numbers of a run (for DataFrames)."""
    row = {k: v for k, v in stats.items() if not isinstance(v, (dict, list))}
    for k, v in stats.get("stall_cycles", {}).items():
        row[f"stall_{k}"] = v
    for k, v in stats.get("design_stats", {}).items():
        row[f"ds_{k}"] = v
    for k in ("pm_reads", "pm_writes"):
        row[k] = stats.get(k, 0)
    mcs = stats.get("mcs", [])
    if mcs:
        row["wpq_occupancy_avg"] = sum(m["wpq_occupancy_avg"] for m in mcs) / len(mcs)
        row["write_bandwidth_gbps"] = sum(m["write_bandwidth_gbps"] for m in mcs)
    return row


def designs() -> list[tuple[str, str]]:
    """Available designs as (name, description)."""
    return _core.designs()


def workloads() -> list[dict]:
    """Built-in workloads with their parameters."""
    return json.loads(_core.workloads())


def config_show(config: str | None = None, **overrides: Any) -> str:
    """The effective configuration, one documented line per parameter."""
    return _core.config_show(config, _strs(overrides))


def config_params() -> list[tuple[str, str, str]]:
    """Every parameter as (name, unit, help)."""
    return _core.config_params()


def trace_convert(src: str, dst: str, *, to: str = "binary", compress: bool = True) -> None:
    """Converts a trace between the text and binary formats, losslessly."""
    if to not in ("binary", "text"):
        raise _core.PmsimError(f"--to must be 'binary' or 'text', not '{to}'")
    _core.trace_convert(src, dst, to == "binary", compress)


def trace_stats(trace: str | None = None, *, workload: str | None = None, **params: Any) -> dict:
    """Events by kind and thread, PM stores, epochs and bytes of a trace or workload."""
    return json.loads(_core.trace_stats(trace=trace, workload=workload, params=_strs(params)))


def trace_generate(workload: str, dst: str, *, compress: bool = True, **params: Any) -> int:
    """Writes a workload's trace to ``dst`` (binary if it ends in .bin); returns the event count."""
    return _core.trace_generate(workload, _strs(params), dst, compress)
