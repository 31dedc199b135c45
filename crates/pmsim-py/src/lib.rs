//! The `pmsim._core` extension module: the Rust core as the Python package sees it.
//!
//! Functions take and return plain strings, maps and JSON so the Python side stays thin; every
//! failure is a `pmsim.PmsimError` carrying one clear message (never a Rust panic).

pub mod analysis;
pub mod benchmark;
pub mod output;
pub mod runner;

use pyo3::create_exception;
use pyo3::prelude::*;
use runner::Input;
use std::collections::BTreeMap;

create_exception!(_core, PmsimError, pyo3::exceptions::PyValueError);

fn err(msg: String) -> PyErr {
    PmsimError::new_err(msg)
}

/// The input of a call; a trace from a pipe is read here, whole, and refused if incomplete unless
/// `allow_incomplete` (`Input::trace`).
fn input(
    trace: Option<String>,
    workload: Option<String>,
    params: BTreeMap<String, String>,
    allow_incomplete: bool,
) -> PyResult<Input> {
    match (trace, workload) {
        (Some(t), None) => Input::trace(t, allow_incomplete).map_err(err),
        (None, Some(w)) => Ok(Input::Workload(w, params)),
        _ => Err(err("give exactly one of a trace file or a workload".into())),
    }
}

/// Runs one simulation; returns the stats as JSON.
/// `progress(events_done, events_total)`, if given, is called as the run advances (about ten
/// times a second); what it raises is ignored.
#[pyfunction]
#[pyo3(signature = (design, trace=None, workload=None, params=None, config=None, overrides=None, allow_broken=false, allow_incomplete=false, progress=None))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    design: String,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<BTreeMap<String, String>>,
    config: Option<String>,
    overrides: Option<BTreeMap<String, String>>,
    allow_broken: bool,
    allow_incomplete: bool,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let inp = input(trace, workload, params.unwrap_or_default(), allow_incomplete)?;
    let cfg = runner::config(config.as_deref(), &overrides.unwrap_or_default()).map_err(err)?;
    let interrupt = std::sync::Mutex::new(None);
    let report = python_progress(&progress, &interrupt);
    let out = py.allow_threads(|| runner::run(&inp, &design, &cfg, allow_broken, Some(&report)));
    out.map(|s| s.to_json()).map_err(|e| interrupted(&interrupt).unwrap_or_else(|| err(e)))
}

/// A `(done, total)` report, about ten times a second, that calls the Python callable `cb` (if
/// any) under the GIL, what it raises ignored (a display must not fail a run), and looks for a
/// signal Python should handle (Ctrl-C): then it keeps the exception in `interrupt` and answers
/// stop, so a long run ends at once instead of when it is done.
fn python_progress<'a>(
    cb: &'a Option<PyObject>,
    interrupt: &'a std::sync::Mutex<Option<PyErr>>,
) -> impl Fn(u64, u64) -> bool + Sync + 'a {
    move |done: u64, total: u64| {
        Python::with_gil(|py| {
            // Python runs a pending signal's handler at the next Python code, which may be the
            // display's: its KeyboardInterrupt counts like one raised here.
            let mut signalled = py.check_signals().err();
            if let (None, Some(cb)) = (&signalled, cb) {
                if let Err(e) = cb.call1(py, (done, total)) {
                    if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                        signalled = Some(e);
                    }
                }
            }
            match signalled {
                None => true,
                Some(e) => {
                    *interrupt.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    false
                }
            }
        })
    }
}

/// The exception a progress report kept when it stopped a run (Ctrl-C), if one did.
fn interrupted(interrupt: &std::sync::Mutex<Option<PyErr>>) -> Option<PyErr> {
    interrupt.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Benchmarks the timing engine: generates the workload's trace once, then runs each design
/// `repeat` times; returns a JSON list of results, one per design (see `benchmark::BenchResult`).
#[pyfunction]
#[pyo3(name = "bench", signature = (designs, workload, params, config=None, overrides=None, repeat=3))]
fn bench_designs(
    py: Python<'_>,
    designs: Vec<String>,
    workload: String,
    params: BTreeMap<String, String>,
    config: Option<String>,
    overrides: Option<BTreeMap<String, String>>,
    repeat: usize,
) -> PyResult<String> {
    let cfg = runner::config(config.as_deref(), &overrides.unwrap_or_default()).map_err(err)?;
    let interrupt = std::sync::Mutex::new(None);
    let signals = python_progress(&None, &interrupt);
    let go_on = || signals(0, 0);
    py.allow_threads(|| {
        let p = benchmark::prepare(&workload, &params, repeat, &go_on)?;
        let out =
            designs.iter().map(|d| benchmark::run(&p, d, &cfg, repeat, &go_on)).collect::<Result<Vec<_>, String>>()?;
        serde_json::to_string(&out).map_err(|e| e.to_string())
    })
    .map_err(|e| interrupted(&interrupt).unwrap_or_else(|| err(e)))
}

/// Splits keyword arguments into (config overrides, workload params).
#[pyfunction]
fn split_kwargs(kw: BTreeMap<String, String>) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    runner::split_kwargs(&kw)
}

/// The effective configuration, one documented line per parameter.
#[pyfunction]
#[pyo3(signature = (config=None, overrides=None))]
fn config_show(config: Option<String>, overrides: Option<BTreeMap<String, String>>) -> PyResult<String> {
    let c = runner::config(config.as_deref(), &overrides.unwrap_or_default()).map_err(err)?;
    Ok(c.show())
}

/// Every parameter as (name, unit, help).
#[pyfunction]
fn config_params() -> Vec<(String, String, String)> {
    pmsim_engine::config::PARAMS.iter().map(|p| (p.name.to_string(), p.unit.to_string(), p.help.to_string())).collect()
}

/// Designs as (name, description).
#[pyfunction]
fn designs() -> Vec<(String, String)> {
    pmsim_engine::DESIGNS.iter().map(|d| (d.name.to_string(), d.about.to_string())).collect()
}

/// Workloads as JSON: name, description, parameters (common and own).
#[pyfunction]
fn workloads() -> String {
    let list: Vec<serde_json::Value> = pmsim_workloads::list()
        .iter()
        .map(|w| {
            let params: Vec<&pmsim_workloads::ParamSpec> =
                pmsim_workloads::params::common_for(w.name()).chain(w.params()).collect();
            serde_json::json!({"name": w.name(), "description": w.description(), "params": params})
        })
        .collect();
    serde_json::to_string(&list).unwrap_or_default()
}

#[pyfunction]
#[pyo3(signature = (src, dst, to_binary, compress=true))]
fn trace_convert(py: Python<'_>, src: String, dst: String, to_binary: bool, compress: bool) -> PyResult<()> {
    py.allow_threads(|| runner::convert(&src, &dst, to_binary, compress)).map_err(err)
}

#[pyfunction]
#[pyo3(signature = (trace=None, workload=None, params=None))]
fn trace_stats(
    trace: Option<String>,
    workload: Option<String>,
    params: Option<BTreeMap<String, String>>,
) -> PyResult<String> {
    // Counting is no use of the trace: an incomplete one is counted too.
    let inp = input(trace, workload, params.unwrap_or_default(), true)?;
    let s = runner::trace_stats(&inp).map_err(err)?;
    serde_json::to_string(&s).map_err(|e| err(e.to_string()))
}

/// `pmsim trace lint`: the PM stores a legacy x86 trace never made persistent, redundant flushes,
/// empty fences (`pmsim_trace::lint`), as JSON naming at most `max` stores.
#[pyfunction]
#[pyo3(signature = (path, max=10))]
fn trace_lint(py: Python<'_>, path: String, max: usize) -> PyResult<String> {
    let p = std::path::Path::new(&path);
    if !p.exists() {
        return Err(err(format!("{path}: no such file")));
    }
    let r = py.allow_threads(|| pmsim_trace::lint::lint_file(p, max)).map_err(|e| err(e.to_string()))?;
    serde_json::to_string(&r).map_err(|e| err(e.to_string()))
}

/// Checks a workload's parameters (strings) as a run would, without generating its trace.
#[pyfunction]
fn workload_params_check(workload: String, params: BTreeMap<String, String>) -> PyResult<()> {
    pmsim_workloads::check_params(&workload, &params).map_err(|e| err(e.to_string()))
}

/// A trace's metadata (`key=value` provenance and status, e.g. `incomplete`), in file order.
#[pyfunction]
fn trace_meta(path: String) -> PyResult<Vec<(String, String)>> {
    pmsim_trace::meta::read_meta(std::path::Path::new(&path)).map_err(|e| err(e.to_string()))
}

/// The thread count in a binary trace's header.
#[pyfunction]
fn trace_threads(path: String) -> PyResult<usize> {
    let src = pmsim_trace::BinarySource::open(std::path::Path::new(&path), 0).map_err(|e| err(e.to_string()))?;
    Ok(src.header().threads)
}

/// Cuts the binary trace a killed program left at `src` (whole blocks, END appended by the
/// repair) at its first missing event, streaming (`binary::first_gap`): returns how many events
/// after the gap were dropped and how many were kept. Only when events were dropped is the kept
/// prefix written to `dst` (`binary::write_to_first_gap`; META is not carried, the caller adds
/// it); else `src` is a valid trace as it is and `dst` is not written.
#[pyfunction]
fn trace_cut_at_gap(src: String, dst: String) -> PyResult<(u64, u64)> {
    let path = std::path::Path::new(&src);
    let (kept, total) = pmsim_trace::binary::first_gap(path).map_err(|e| err(e.to_string()))?;
    if kept < total {
        output::write_with(&dst, |out| {
            pmsim_trace::binary::write_to_first_gap(path, kept, out, &dst).map_err(|e| e.to_string())?;
            Ok(())
        })
        .map_err(err)?;
    }
    Ok((total - kept, kept))
}

/// Writes a workload's trace to `dst` (`binary`, else text); returns the event count.
#[pyfunction]
#[pyo3(signature = (workload, params, dst, binary, compress=true))]
fn trace_generate(
    py: Python<'_>,
    workload: String,
    params: BTreeMap<String, String>,
    dst: String,
    binary: bool,
    compress: bool,
) -> PyResult<u64> {
    py.allow_threads(|| runner::generate_to(&workload, &params, &dst, binary, compress)).map_err(err)
}

/// Crashes a run at the given instants and checks every image; returns the report as JSON.
/// `progress(instant_ps, end_ps)`, if given, is called as the check advances (see
/// `pmsim_crash::Progress`); what it raises is ignored.
#[pyfunction]
#[pyo3(signature = (design, trace=None, workload=None, params=None, config=None, overrides=None, at=None, random=None, seed=1, every=false, model=None, allow_broken=false, allow_incomplete=false, recovery=true, max_failures=10, progress=None))]
#[allow(clippy::too_many_arguments)]
fn crash(
    py: Python<'_>,
    design: String,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<BTreeMap<String, String>>,
    config: Option<String>,
    overrides: Option<BTreeMap<String, String>>,
    at: Option<Vec<u64>>,
    random: Option<usize>,
    seed: u64,
    every: bool,
    model: Option<String>,
    allow_broken: bool,
    allow_incomplete: bool,
    recovery: bool,
    max_failures: usize,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let inp = input(trace, workload, params.unwrap_or_default(), allow_incomplete)?;
    let cfg = runner::config(config.as_deref(), &overrides.unwrap_or_default()).map_err(err)?;
    let spec = runner::CrashSpec { at: at.unwrap_or_default(), random, seed, every, model, recovery, max_failures };
    let interrupt = std::sync::Mutex::new(None);
    let report = python_progress(&progress, &interrupt);
    let rep = py
        .allow_threads(|| runner::crash(&inp, &design, &cfg, allow_broken, &spec, Some(&report)))
        .map_err(|e| interrupted(&interrupt).unwrap_or_else(|| err(e)))?;
    serde_json::to_string(&rep).map_err(|e| err(e.to_string()))
}

/// `pmsim bench --crash`: crashes a workload's run like `crash` and returns its report with the
/// host timing `crash` never reports (`host_seconds`, `setup_seconds`, `recovery_runs`), as JSON.
#[pyfunction]
#[pyo3(signature = (design, workload, params, random=None, seed=1, every=false, recovery=true))]
#[allow(clippy::too_many_arguments)]
fn crash_bench(
    py: Python<'_>,
    design: String,
    workload: String,
    params: BTreeMap<String, String>,
    random: Option<usize>,
    seed: u64,
    every: bool,
    recovery: bool,
) -> PyResult<String> {
    let inp = input(None, Some(workload), params, true)?;
    let cfg = runner::config(None, &BTreeMap::new()).map_err(err)?;
    let spec = runner::CrashSpec { at: Vec::new(), random, seed, every, model: None, recovery, max_failures: 10 };
    // No display, but Ctrl-C still ends it where it is (the report looks for signals ~10 times
    // a second, which the timing does not see).
    let interrupt = std::sync::Mutex::new(None);
    let report = python_progress(&None, &interrupt);
    let rep = py
        .allow_threads(|| runner::crash(&inp, &design, &cfg, false, &spec, Some(&report)))
        .map_err(|e| interrupted(&interrupt).unwrap_or_else(|| err(e)))?;
    let mut v = serde_json::to_value(&rep).map_err(|e| err(e.to_string()))?;
    v["host_seconds"] = rep.host_seconds.into();
    v["setup_seconds"] = rep.setup_seconds.into();
    v["recovery_runs"] = rep.recovery_runs.into();
    v["piece_runs"] = rep.piece_runs.into();
    Ok(v.to_string())
}

/// Persist critical-path analysis (docs/design.md §8); returns a JSON list of reports, one per model.
#[pyfunction]
#[pyo3(signature = (trace=None, workload=None, params=None, config=None, overrides=None, models="strict".to_string(), atomic_bytes=8, track_bytes=8, persist_ns=500.0, instr_ops_per_s=None, allow_incomplete=false))]
#[allow(clippy::too_many_arguments)]
fn analyze(
    py: Python<'_>,
    trace: Option<String>,
    workload: Option<String>,
    params: Option<BTreeMap<String, String>>,
    config: Option<String>,
    overrides: Option<BTreeMap<String, String>>,
    models: String,
    atomic_bytes: u64,
    track_bytes: u64,
    persist_ns: f64,
    instr_ops_per_s: Option<f64>,
    allow_incomplete: bool,
) -> PyResult<String> {
    let inp = input(trace, workload, params.unwrap_or_default(), allow_incomplete)?;
    let cfg = runner::config(config.as_deref(), &overrides.unwrap_or_default()).map_err(err)?;
    let req = analysis::Request { models, atomic_bytes, track_bytes, persist_ns, instr_ops_per_s };
    let reps = py.allow_threads(|| analysis::analyze(&inp, &req, &cfg)).map_err(err)?;
    serde_json::to_string(&reps).map_err(|e| err(e.to_string()))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // A panic (a bug) reaches Python as a PanicException carrying its message, which the CLI
    // prints as one line; the default hook would first print its location and, under
    // RUST_BACKTRACE, a whole backtrace: only for whoever debugs (PMSIM_DEBUG set, as
    // `pmsim --debug` does).
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::env::var_os("PMSIM_DEBUG").is_some() {
            default(info);
        }
    }));
    m.add("PmsimError", m.py().get_type::<PmsimError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(bench_designs, m)?)?;
    m.add_function(wrap_pyfunction!(crash_bench, m)?)?;
    m.add_function(wrap_pyfunction!(split_kwargs, m)?)?;
    m.add_function(wrap_pyfunction!(config_show, m)?)?;
    m.add_function(wrap_pyfunction!(config_params, m)?)?;
    m.add_function(wrap_pyfunction!(designs, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(trace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(trace_stats, m)?)?;
    m.add_function(wrap_pyfunction!(trace_lint, m)?)?;
    m.add_function(wrap_pyfunction!(workload_params_check, m)?)?;
    m.add_function(wrap_pyfunction!(trace_generate, m)?)?;
    m.add_function(wrap_pyfunction!(trace_meta, m)?)?;
    m.add_function(wrap_pyfunction!(trace_threads, m)?)?;
    m.add_function(wrap_pyfunction!(trace_cut_at_gap, m)?)?;
    m.add_function(wrap_pyfunction!(crash, m)?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    Ok(())
}
