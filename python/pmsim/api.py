"""The Python API over the Rust core: one call per thing a researcher does.

Keyword arguments name configuration parameters with an underscore for the dot
(``pm_write_ns=120`` is ``pm.write_ns``) and workload parameters by their own names
(``threads``, ``ops``, ``seed``, ...). ``pmsim config show`` lists every parameter.
"""

from __future__ import annotations

import functools
import json
import numbers
import os
import stat
import tomllib
from typing import Any

from pmsim import _core


def _strs(d: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (d or {}).items()}


U64_MAX = 2**64 - 1


def path_arg(name: str, v: Any) -> str | None:
    """A path argument (``str`` or ``os.PathLike``) as the ``str`` the core takes; None passes.
    A ``config`` is checked to be a configuration file (:func:`check_config_file`)."""
    if v is None:
        return None
    if isinstance(v, (str, os.PathLike)):
        p = os.fspath(v)
        p = os.fsdecode(p) if isinstance(p, bytes) else p
        if p:
            check_utf8_path(name, p)
            if name == "config":
                check_config_file(p)
            return p
    raise _core.PmsimError(f"{name} must be a file path (str or os.PathLike), got {v!r}")


def shown_path(p: str) -> str:
    """A path as a message shows it: bytes that are not UTF-8 (decoded by Python as lone
    surrogates) as ``\\xNN`` escapes, the rest as it is."""
    return os.fsencode(p).decode("utf-8", "backslashreplace")


def utf8_path_problem(p: str) -> str | None:
    """Why the core cannot take path ``p`` (its file names are UTF-8 strings), or None."""
    try:
        p.encode("utf-8")
    except UnicodeEncodeError:
        return (
            f"{shown_path(p)}: the path is not valid UTF-8 "
            "(pmsim takes UTF-8 file and folder names only: rename it)"
        )
    return None


def check_utf8_path(name: str, p: str) -> None:
    why = utf8_path_problem(p)
    if why is not None:
        raise _core.PmsimError(f"{name} {why}")


# A machine configuration is a few KiB of TOML; more is not one (and /dev/zero never ends).
MAX_CONFIG_BYTES = 16 << 20


def check_config_file(path: str) -> None:
    """Refuses, with one message naming it, a ``config`` that is not a TOML file to read: missing,
    a folder, a FIFO or device (read without end: ``/dev/zero``; a sweep reads it once per run),
    or larger than :data:`MAX_CONFIG_BYTES`. ``/dev/null`` is an empty file (the defaults), as an
    empty regular file is."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _core.PmsimError(f"config {path}: no such file") from None
    except OSError as e:
        raise _core.PmsimError(f"config {path}: cannot read: {e.strerror or e}") from None
    if stat.S_ISREG(st.st_mode):
        if st.st_size > MAX_CONFIG_BYTES:
            raise _core.PmsimError(
                f"config {path}: {st.st_size} bytes is too large for a configuration file "
                f"(at most {MAX_CONFIG_BYTES >> 20} MiB)"
            )
        return
    try:
        null = os.stat(os.devnull)
    except OSError:
        null = None
    if null is not None and (st.st_dev, st.st_ino) == (null.st_dev, null.st_ino):
        return
    kind = (
        "a folder"
        if stat.S_ISDIR(st.st_mode)
        else "a FIFO"
        if stat.S_ISFIFO(st.st_mode)
        else "a device or socket"
    )
    raise _core.PmsimError(f"config {path}: not a regular file ({kind}); give a TOML file")


def required_path(name: str, v: Any) -> str:
    """A path argument that must be given (:func:`path_arg` without ``None``)."""
    p = path_arg(name, v)
    if p is None:
        raise _core.PmsimError(f"{name} must be a file path (str or os.PathLike), got None")
    return p


def int_arg(name: str, v: Any, lo: int, hi: int | None = U64_MAX) -> int:
    """An integer argument in lo..=hi (no bound: ``hi=None``), or a PmsimError naming it and the range."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool) and lo <= v and (hi is None or v <= hi):
        return int(v)
    want = f"at least {lo}" + (f" and at most {hi}" if hi is not None else "")
    raise _core.PmsimError(f"{name} must be an integer {want}, got {v!r}")


def positive_arg(name: str, v: Any, unit: str = "") -> float:
    """A finite number > 0, or a PmsimError naming the argument."""
    if isinstance(v, numbers.Real) and not isinstance(v, bool) and 0 < float(v) < float("inf"):
        return float(v)
    raise _core.PmsimError(f"{name} must be a positive finite number{unit}, got {v!r}")


def bool_arg(name: str, v: Any) -> bool:
    """A flag argument: ``True`` or ``False`` (not a truthy string such as ``'no'``)."""
    if isinstance(v, bool):
        return v
    raise _core.PmsimError(f"{name} must be True or False, got {v!r}")


def name_arg(name: str, v: Any, what: str, optional: bool = False) -> str | None:
    """A name argument (a design, a workload, a model) as a ``str``; ``None`` passes if ``optional``."""
    if v is None and optional:
        return None
    if isinstance(v, str):
        return v
    raise _core.PmsimError(f"{name} must be {what}, got {v!r}")


A_DESIGN = "a str naming a design (see pmsim.designs())"
A_WORKLOAD = "a str naming a workload (see pmsim.workloads())"


def names_arg(name: str, v: Any, allow_empty: bool = False) -> list[str]:
    """A list of names (designs, workloads): one ``str`` is one name; an empty list is refused
    unless ``allow_empty``."""
    items = [v] if isinstance(v, str) else v
    try:
        items = list(items)
    except TypeError:
        raise _core.PmsimError(f"{name} must be a name or a list of names, got {v!r}") from None
    if not items and not allow_empty:
        raise _core.PmsimError(f"{name}: the list is empty (give at least one name)")
    for x in items:
        if not isinstance(x, str) or not x:
            raise _core.PmsimError(f"{name} must be a name or a list of names, got {x!r} in {v!r}")
    return items


@functools.cache
def _param_aliases() -> dict[str, str]:
    out = {}
    for name, _, _ in _core.config_params():
        out[name] = out[name.replace(".", "_", 1)] = name
    return out


def param_name(name: str) -> str:
    """The one name of a parameter however it is spelled: a machine parameter's dotted name for
    its underscore alias (``pm_write_ns`` is ``pm.write_ns``); any other name as given."""
    return _param_aliases().get(name, name)


def close_machine_params(key: str) -> list[str]:
    """Machine parameters spelled like ``key`` (either spelling, ``pm.write_ns`` or
    ``pm_write_ns``), as dotted names, closest first: at most five."""
    import difflib

    aliases = _param_aliases()
    close = difflib.get_close_matches(key, list(aliases), n=10, cutoff=0.6)
    return list(dict.fromkeys(aliases[c] for c in close))[:5]


def unknown_param_message(key: str, workload: str, valid: list[str]) -> str:
    """The message for a keyword that is neither a machine parameter nor a parameter of
    ``workload`` (whose parameters are ``valid``): the CLI's "did you mean one of" for the machine
    parameters, and the workload's parameters."""
    close = close_machine_params(key)
    hint = f"did you mean one of: {', '.join(close)}" if close else "see 'pmsim config show'"
    return (
        f"parameter '{key}': unknown parameter, neither a machine parameter ({hint}) "
        f"nor a parameter of workload '{workload}' (valid: {', '.join(valid)})"
    )


def check_workload_keywords(workload: str | None, wl: dict[str, Any]) -> None:
    """Refuses a keyword that ``_core.split_kwargs`` left to the workload (not a machine
    parameter) but that is not a parameter of ``workload`` either: a misspelt machine parameter
    (``pm_write_nss``) is named with the machine parameters it is close to, not as a workload
    parameter only. An unknown workload is left to the core to name."""
    if workload is None or not wl:
        return
    params = {w["name"]: [p["name"] for p in w["params"]] for w in workloads()}
    valid = params.get(workload)
    if valid is None:
        return
    bad = sorted(k for k in wl if k not in valid)
    if bad:
        raise _core.PmsimError(unknown_param_message(bad[0], workload, valid))


def check_once(groups: list[tuple[str, Any]]) -> None:
    """Refuses a parameter given twice, under one spelling or two (``pm.write_ns`` and
    ``pm_write_ns``), within or across ``groups``: (what, names) pairs such as
    ``("grid", grid)`` and ``("fixed", fixed)``. The message names both spellings."""
    seen: dict[str, str] = {}
    for what, names in groups:
        for k in names:
            c = param_name(str(k))
            here = f"{what} '{k}'"
            if c in seen:
                raise _core.PmsimError(
                    f"parameter {c} is given twice: {seen[c]} and {here} (give each parameter once)"
                )
            seen[c] = here


def check_complete(trace: str | None, allow_incomplete: bool) -> None:
    """Refuses a trace marked incomplete (a recording of a program that crashed) unless
    ``allow_incomplete``, with the message of the CLI."""
    from pmsim import tracer

    tracer.check_complete(trace, allow_incomplete)


def run(
    design: str,
    *,
    workload: str | None = None,
    trace: str | os.PathLike | None = None,
    config: str | os.PathLike | None = None,
    allow_broken: bool = False,
    allow_incomplete: bool = False,
    progress: bool = False,
    **params: Any,
) -> dict:
    """Simulates a workload (or a trace file) under ``design``; returns the stats as a dict.

    ``params`` mixes configuration overrides (``pm_write_ns=120``) and workload parameters
    (``threads=4, ops=2000``); they are told apart by name. ``progress=True`` shows a bar over
    the trace's events while it runs. A trace marked incomplete (recorded from a program that
    crashed) is refused unless ``allow_incomplete=True``.
    """
    design = name_arg("design", design, A_DESIGN)
    allow_broken = bool_arg("allow_broken", allow_broken)
    progress = bool_arg("progress", progress)
    inputs = _core_inputs(trace, workload, config, params, allow_incomplete)
    with run_bar(disable=not progress) as bar:
        out = _core.run(design, **inputs, allow_broken=allow_broken, progress=bar if progress else None)
    return json.loads(out)


def _core_inputs(trace: Any, workload: str | None, config: Any, params: dict, allow_incomplete: bool) -> dict:
    """The input and machine arguments of a core call: ``params`` split into machine overrides
    and workload parameters (the latter refused for a trace); the trace checked complete."""
    trace, config = path_arg("trace", trace), path_arg("config", config)
    workload = name_arg("workload", workload, A_WORKLOAD, optional=True)
    allow_incomplete = bool_arg("allow_incomplete", allow_incomplete)
    check_once([("keyword", params)])
    cfg, wl = _core.split_kwargs(_strs(params))
    if trace is not None and wl:
        raise _core.PmsimError(f"unknown parameter(s) for a trace run: {', '.join(sorted(wl))}")
    check_workload_keywords(workload, wl)
    check_complete(trace, allow_incomplete)
    return {
        "trace": trace,
        "workload": workload,
        "params": wl,
        "config": config,
        "overrides": cfg,
        "allow_incomplete": allow_incomplete,
    }


def flatten(stats: dict) -> dict:
    """One flat row of the headline numbers of a run (for DataFrames)."""
    if not isinstance(stats, dict):
        raise _core.PmsimError(f"stats must be the dict of a run (from pmsim.run), got {stats!r}")
    row = {k: v for k, v in stats.items() if not isinstance(v, (dict, list))}
    for k, v in stats.get("stall_cycles", {}).items():
        row[f"stall_{k}"] = v
    for k, v in stats.get("design_stats", {}).items():
        row[f"ds_{k}"] = v
    for k, v in stats.get("net", {}).items():
        row[f"net_{k}"] = v
    for k in ("pm_reads", "pm_writes"):
        row[k] = stats.get(k, 0)
    mcs = stats.get("mcs", [])
    if mcs:
        row["wpq_occupancy_avg"] = sum(m["wpq_occupancy_avg"] for m in mcs) / len(mcs)
        row["write_bandwidth_gbps"] = sum(m["write_bandwidth_gbps"] for m in mcs)
        banks = [m["banks"] for m in mcs if "banks" in m]
        if banks:
            # Banked NVM model: BLP and row statistics averaged over MCs, throughput summed.
            row["memory_throughput_gbps"] = sum(b["memory_throughput_gbps"] for b in banks)
            for k in ("blp", "row_hit_rate", "bank_conflict_stall_pct"):
                row[k] = sum(b[k] for b in banks) / len(banks)
    return row


def param_choices(spec: dict) -> list[str] | None:
    """The names a workload parameter takes when it takes names (``variant``: its unit lists them,
    ``strict|epoch|racing|strand``, as the core reads them), else None (it takes integers)."""
    unit = spec.get("unit") or ""
    return unit.split("|") if "|" in unit else None


def describe_range(spec: dict) -> str:
    """A workload parameter's valid values in the words of the core's messages: ``1 to 64``,
    ``multiples of 64 from 64 to 1048576``, ``at least 0``, or its names."""
    choices = param_choices(spec)
    if choices:
        return ", ".join(choices)
    r = spec.get("range")
    if not r:
        return "any"
    # The words of the core's ParamRange::describe.
    if r.get("pow2"):
        return f"powers of two from {r['min']} to {r['max']}"
    if r["max"] == U64_MAX:
        span = f"at least {r['min']}"
        return f"multiples of {r['step']} {span}" if r["step"] > 1 else span
    span = f"{r['min']} to {r['max']}"
    return f"multiples of {r['step']} from {span}" if r["step"] > 1 else span


def check_workload_params(workload: str, given: dict[str, Any]) -> None:
    """Checks a workload's parameter values as a run will (the core's own check, without
    generating the trace), so a sweep refuses a bad value before its first run."""
    _core.workload_params_check(workload, _strs(given))


def designs() -> list[tuple[str, str]]:
    """Available designs as (name, description)."""
    return _core.designs()


def workloads() -> list[dict]:
    """Built-in workloads with their parameters."""
    return json.loads(_core.workloads())


def config_show(config: str | os.PathLike | None = None, **overrides: Any) -> str:
    """The effective configuration, one documented line per parameter."""
    config = path_arg("config", config)
    check_once([("keyword", overrides)])
    return _core.config_show(config, _strs(overrides))


def config(config: str | os.PathLike | None = None, **overrides: Any) -> dict:
    """The effective configuration as nested dicts (``config()["pm"]["write_gbps"]``)."""
    return tomllib.loads(config_show(config, **overrides))


def config_params() -> list[tuple[str, str, str]]:
    """Every parameter as (name, unit, help)."""
    return _core.config_params()


def trace_convert(
    src: str | os.PathLike, dst: str | os.PathLike, *, to: str | None = None, compress: bool = True
) -> None:
    """Converts a trace between the text and binary formats, losslessly (metadata included).

    ``to`` is ``'text'`` or ``'binary'``; by default (None) ``dst``'s extension chooses, as for
    ``pmsim trace convert`` and :func:`trace_generate`: text for ``.trace`` and ``.txt`` (any
    case), binary otherwise (:func:`trace_format`)."""
    if to is not None and (not isinstance(to, str) or to not in ("binary", "text")):
        raise _core.PmsimError(f"to must be 'binary' or 'text' (or None: by dst's extension), got {to!r}")
    src, dst = required_path("src", src), required_path("dst", dst)
    if to is None:
        to = trace_format(dst)
    compress = bool_arg("compress", compress)
    # The metadata (how the trace was made, and an `incomplete` mark) goes along, into a pipe
    # too: a converted trace of a crashed program is refused like the original.
    _core.trace_convert(src, dst, to == "binary", compress)


def trace_stats(
    trace: str | os.PathLike | None = None, *, workload: str | None = None, **params: Any
) -> dict:
    """Events by kind and thread, PM stores, epochs and bytes of a trace or workload."""
    trace = path_arg("trace", trace)
    workload = name_arg("workload", workload, A_WORKLOAD, optional=True)
    check_once([("keyword", params)])
    return json.loads(_core.trace_stats(trace=trace, workload=workload, params=_strs(params)))


def trace_lint(trace: str | os.PathLike, *, max_stores: int = 10, allow_incomplete: bool = False) -> dict:
    """The PM stores a legacy x86 trace (a program's, from the tracer) never made persistent
    by its end, its redundant flushes and empty fences; names at most ``max_stores`` of the
    stores (``unpersisted``), as many late ones (``late``) and as many stores of lock words left
    unpersisted (``unpersisted_sync``: not counted as unpersisted). A design-neutral trace
    reports ``dialect`` ``neutral`` and nothing else: its persistence is the design's."""
    path = required_path("trace", trace)
    n = int_arg("max_stores", max_stores, 0, 1_000_000)
    allow_incomplete = bool_arg("allow_incomplete", allow_incomplete)
    # A recording cut short ends before the program did: its "unpersisted" stores may not be.
    check_complete(path, allow_incomplete)
    return json.loads(_core.trace_lint(path, n))


TEXT_SUFFIXES = (".trace", ".txt")


def trace_format(path: str | os.PathLike) -> str:
    """The format a trace written to ``path`` gets: ``text`` iff its suffix is ``.trace`` or
    ``.txt`` (any case), ``binary`` otherwise (``.bin``, ``.dat``, no suffix, ``/dev/stdout``).
    One rule for ``trace gen`` and ``trace convert``."""
    return "text" if os.fspath(path).lower().endswith(TEXT_SUFFIXES) else "binary"


def trace_generate(workload: str, dst: str | os.PathLike, *, compress: bool = True, **params: Any) -> int:
    """Writes a workload's trace to ``dst`` (text if it ends in .trace or .txt, any case; binary
    otherwise: :func:`trace_format`); returns the event count."""
    workload = name_arg("workload", workload, A_WORKLOAD)
    dst = required_path("dst", dst)
    compress = bool_arg("compress", compress)
    check_once([("keyword", params)])
    return _core.trace_generate(workload, _strs(params), dst, trace_format(dst) == "binary", compress)


# The engine stops a run before simulated time passes half of u64 picoseconds (sim.rs MAX_SIM_PS).
MAX_INSTANT_PS = (2**64 - 1) // 2


def parse_instant(text: str | int) -> int:
    """A crash instant in picoseconds; accepts a plain number (ps) or a unit: ps, ns, us, ms."""
    if isinstance(text, int) and not isinstance(text, bool):
        if not 0 <= text <= MAX_INSTANT_PS:
            raise _core.PmsimError(f"crash instant {text} is not from 0 to {MAX_INSTANT_PS} ps")
        return text
    t = str(text).strip().lower()
    for unit, scale in (("ps", 1), ("ns", 1_000), ("us", 1_000_000), ("ms", 1_000_000_000)):
        if t.endswith(unit):
            t, mult = t[: -len(unit)], scale
            break
    else:
        mult = 1
    try:
        value = float(int(t, 16)) if t.startswith("0x") else float(t)
    except ValueError:
        raise _core.PmsimError(
            f"crash instant '{text}' is not a number (ps, or with a unit: 120ns, 3.5us)"
        ) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise _core.PmsimError(f"crash instant '{text}' is not a finite number")
    if value < 0:
        raise _core.PmsimError(f"crash instant '{text}' is negative")
    ps = int(round(value * mult))
    if ps > MAX_INSTANT_PS:
        raise _core.PmsimError(
            f"crash instant '{text}' is beyond the longest simulated time "
            f"({MAX_INSTANT_PS} ps, about 106 days)"
        )
    return ps


# The most random crash instants one check takes: the core keeps every instant (8 bytes each) in
# memory, so 10^8 instants need 800 MB (and a few seconds); a larger N would exhaust memory. An
# exhaustive check is ``every=True`` (``--every``), whatever the run's length.
MAX_RANDOM_INSTANTS = 100_000_000


def random_arg(name: str, v: Any, every: str = "every=True") -> int:
    """The N of a random crash check: an integer from 1 to :data:`MAX_RANDOM_INSTANTS`."""
    is_int = isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if is_int and 1 <= v <= MAX_RANDOM_INSTANTS:
        return int(v)
    msg = f"{name} must be an integer at least 1 and at most {MAX_RANDOM_INSTANTS}, got {v!r}"
    if is_int and v > MAX_RANDOM_INSTANTS:
        msg += f" (the random crash instants are kept in memory); for an exhaustive check use {every}"
    raise _core.PmsimError(msg)


def crash(
    design: str,
    *,
    workload: str | None = None,
    trace: str | os.PathLike | None = None,
    at: list[int | str] | int | str | None = None,
    random: int | None = None,
    seed: int = 1,
    every: bool = False,
    model: str | None = None,
    config: str | os.PathLike | None = None,
    recovery: bool = True,
    max_failures: int = 10,
    allow_broken: bool = False,
    allow_incomplete: bool = False,
    progress: bool = False,
    workload_seed: int | None = None,
    **params: Any,
) -> dict:
    """Crashes a run at the given instants and checks every crash image against the design's
    persistency model (and the workload's own recovery); returns the report as a dict.
    ``at`` is one instant or a list (ps, or a string with a unit: ``"120ns"``); ``random=N`` checks
    N random instants, 1 to :data:`MAX_RANDOM_INSTANTS` (10^8), drawn with ``seed`` (the CLI's
    ``--seed``); ``every=True`` checks every instant the persistent state changes.
    ``workload_seed`` is the workload's own ``seed`` parameter (the CLI's ``-p seed=N``; here
    ``seed`` names the crash instants' seed).
    ``progress=True`` shows a bar over the run's simulated time while the images are checked.
    A trace marked incomplete is refused unless ``allow_incomplete=True``."""
    design = name_arg("design", design, A_DESIGN)
    if isinstance(at, (str, numbers.Number)):
        at = [at]
    elif at is not None:
        try:
            if isinstance(at, (bytes, bytearray, dict)):
                raise TypeError(at)
            at = list(at)
        except TypeError:
            raise _core.PmsimError(
                "at must be a crash instant or a list of them (ps, or a str with a unit: '120ns'), "
                f"got {at!r}"
            ) from None
    if random is not None:
        random = random_arg("random", random)
    seed = int_arg("seed", seed, 0)
    every = bool_arg("every", every)
    if (at is not None and len(at) > 0) + (random is not None) + every != 1:
        raise _core.PmsimError("give exactly one of at=, random= or every=True")
    model = name_arg(
        "model", model, "a str naming a persistency model (ep, rp, strict or x86)", optional=True
    )
    recovery = bool_arg("recovery", recovery)
    max_failures = int_arg("max_failures", max_failures, 1)
    allow_broken = bool_arg("allow_broken", allow_broken)
    progress = bool_arg("progress", progress)
    if workload_seed is not None:
        params = {**params, "seed": int_arg("workload_seed", workload_seed, 0)}
    inputs = _core_inputs(trace, workload, config, params, allow_incomplete)
    with crash_bar(disable=not progress) as bar:
        out = _core.crash(
            design,
            **inputs,
            at=[parse_instant(x) for x in at] if at else None,
            random=random,
            seed=seed,
            every=every,
            model=model,
            allow_broken=allow_broken,
            recovery=recovery,
            max_failures=max_failures,
            progress=bar if progress else None,
        )
    return json.loads(out)


class ProgressBar:
    """A progress bar (with its ETA) fed by the core's ``progress(done, total)`` reports: a run's
    trace events, or a crash check's simulated time (``scale=1e-3``: ps shown as ns). It appears
    at the first report (for a crash check, when the reference run gave the run's length).
    ``disable``: ``None`` shows it only on a terminal."""

    def __init__(self, desc: str, unit: str, disable: bool | None, scale: float = 1.0) -> None:
        self.desc, self.unit, self.disable, self.scale = desc, unit, disable, scale
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=max(total, 1) * self.scale,
                desc=self.desc,
                unit=self.unit,
                unit_scale=True,
                disable=self.disable,
                leave=False,
            )
        self.bar.update(done * self.scale - self.bar.n)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def crash_bar(disable: bool | None) -> ProgressBar:
    """The bar of a crash check: the run's simulated time, in ns."""
    return ProgressBar("crash images", "ns", disable, scale=1e-3)


def run_bar(disable: bool | None) -> ProgressBar:
    """The bar of one run: the trace's events executed."""
    return ProgressBar("simulating", "ev", disable)


def describe_violation(v: dict) -> str:
    """One violation as a sentence a person can follow: ``v`` is one of a crash report's
    ``failures[i]["verdict"]["violations"]``."""
    try:
        return _describe_violation(v)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError):
        raise _core.PmsimError(
            "v must be a violation of a crash report (a dict from "
            f"pmsim.crash(...)['failures'][i]['verdict']['violations']), got {v!r}"
        ) from None


def _describe_violation(v: dict) -> str:
    if not isinstance(v, dict):
        raise TypeError(v)
    kind = v["kind"]
    vis, miss = v.get("visible"), v.get("missing")
    if miss and vis:
        shows = "the initial value" if miss.get("shows") is None else f"store {miss['shows']}"
        head = (
            f"{kind}: visible store {vis['gid']} (T{vis.get('thread')}, word {vis['word']:#x}) "
            f"requires store {miss['gid']} (T{miss['thread']}), but word {miss['word']:#x} shows {shows}"
        )
    elif miss and v.get("dfence") is None:
        # eADR, BBB: the store had performed, which is its own durability point (no fence).
        shows = "the initial value" if miss.get("shows") is None else f"store {miss['shows']}"
        last = (v.get("path") or [{}])[-1].get("gid", miss["gid"])
        after = f" (as had store {last} after it in program order)" if last != miss["gid"] else ""
        head = (
            f"{kind}: store {miss['gid']} (T{miss['thread']}) had performed{after}, but word "
            f"{miss['word']:#x} shows {shows}: the design promises every performed store survives"
        )
    elif miss:
        shows = "the initial value" if miss.get("shows") is None else f"store {miss['shows']}"
        # The completed fence closes the path: a dfence, or under x86 an sfence, mfence, locked
        # rmw or release.
        fence = (v.get("path") or [{}])[-1].get("kind", "dfence")
        head = (
            f"{kind}: store {miss['gid']} (T{miss['thread']}) precedes completed {fence} {v.get('dfence')} "
            f"but word {miss['word']:#x} shows {shows}"
        )
    elif vis:
        head = f"{kind}: word {vis['word']:#x} shows store {vis['gid']}, which was not performed by then"
    else:
        head = kind
    path = v.get("path") or []
    # A performed store missing from the image is its own durability point: no path to show.
    own_point = bool(miss) and not vis and v.get("dfence") is None and len(path) == 1
    if path and not own_point:
        steps = []
        for s in path:
            steps.append(f"{s['gid']}(T{s['thread']} {s['kind']})")
            if s.get("edge"):
                steps.append(f"-{s['edge']}->")
        head += "; persist-order path: " + " ".join(steps)
    return head
