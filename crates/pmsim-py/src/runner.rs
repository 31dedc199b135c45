//! What the `pmsim` command and the Python API ask of the Rust core, as plain functions over
//! strings and maps, so errors come back as one clear message.

use pmsim_engine::design;
use pmsim_engine::{Config, RunStats, Simulator};
use pmsim_trace::{binary, text, BinarySource, EventSource, Trace, TraceStats, VecSource};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Where the events come from.
pub enum Input {
    /// A trace file, read as the run goes (binary) or parsed whole (text).
    File(String),
    /// A trace from a pipe or device (`/dev/stdin`), named by its path: read once, whole, by
    /// [`Input::trace`], which checks it complete the way the front end checks a file.
    Piped(String, Arc<Trace>),
    Workload(String, BTreeMap<String, String>),
}

impl Input {
    /// The input named by a trace path: a pipe or device is read here, whole, and refused if
    /// its metadata marks it incomplete (a recording of a program that crashed) unless
    /// `allow_incomplete` (a regular file is checked before the call, by the front end).
    pub fn trace(path: String, allow_incomplete: bool) -> Result<Input, String> {
        let p = Path::new(&path);
        if !p.exists() || is_regular(p) {
            return Ok(Input::File(path));
        }
        let t = load_trace(&path)?;
        if let (false, Some((_, why))) =
            (allow_incomplete, t.meta.iter().find(|(k, _)| k == pmsim_trace::meta::INCOMPLETE))
        {
            return Err(format!(
                "{path}: the trace is incomplete ({why}); pass --allow-incomplete \
                 (allow_incomplete=True in Python) to use it anyway"
            ));
        }
        Ok(Input::Piped(path, Arc::new(t)))
    }
}

/// Builds the configuration from an optional TOML file and `key=value` overrides.
pub fn config(file: Option<&str>, overrides: &BTreeMap<String, String>) -> Result<Config, String> {
    let mut c = match file {
        Some(f) => Config::from_toml_file(Path::new(f)).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    c.set_all(overrides.iter().map(|(k, v)| (k.as_str(), v.as_str()))).map_err(|e| e.to_string())?;
    Ok(c)
}

/// Splits keyword arguments into configuration overrides and workload parameters.
pub fn split_kwargs(kw: &BTreeMap<String, String>) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let probe = Config::default();
    let mut cfg = BTreeMap::new();
    let mut wl = BTreeMap::new();
    for (k, v) in kw {
        if probe.canonical(k).is_ok() {
            cfg.insert(k.clone(), v.clone());
        } else {
            wl.insert(k.clone(), v.clone());
        }
    }
    (cfg, wl)
}

/// A trace opened for replay: one source per thread, its PM ranges and its labels.
pub struct Opened {
    pub sources: Vec<Box<dyn EventSource>>,
    pub pm: Vec<pmsim_trace::PmRange>,
    pub labels: Vec<String>,
    /// Legacy x86 or design-neutral (decides how the baseline runs it).
    pub dialect: pmsim_trace::Dialect,
    /// Events in the trace (for a progress display).
    pub events: u64,
}

impl Opened {
    fn of(t: &Arc<Trace>) -> Opened {
        Opened {
            sources: VecSource::all(t),
            pm: t.pm.clone(),
            labels: t.labels.clone(),
            dialect: t.dialect(),
            events: t.num_events() as u64,
        }
    }
}

/// Opens a trace for replay: binary files stream, text files are parsed.
/// The engine's limit on a trace's threads, checked where the file is known so the message
/// names it.
fn simulable_threads(path: &str, n: usize) -> Result<(), String> {
    match n {
        1..=64 => Ok(()),
        _ => Err(format!(
            "{path}: the trace has {n} threads; pmsim simulates 1 to 64 (one core per thread, core.count at most 64)"
        )),
    }
}

pub fn sources(input: &Input) -> Result<Opened, String> {
    let opened = open_sources(input)?;
    if let Input::File(path) | Input::Piped(path, _) = input {
        simulable_threads(path, opened.sources.len())?;
    }
    Ok(opened)
}

fn open_sources(input: &Input) -> Result<Opened, String> {
    match input {
        Input::File(path) => {
            let p = Path::new(path);
            if !p.exists() {
                return Err(format!("{path}: no such file"));
            }
            if binary::is_binary(p) {
                let dialect = pmsim_trace::validate_binary_dialect(p).map_err(|e| e.to_string())?;
                let first = BinarySource::open(p, 0).map_err(|e| e.to_string())?;
                let h = first.header().clone();
                let mut srcs: Vec<Box<dyn EventSource>> = vec![Box::new(first)];
                for t in 1..h.threads {
                    srcs.push(Box::new(BinarySource::open(p, t).map_err(|e| e.to_string())?));
                }
                let labels = BinarySource::labels(p).map_err(|e| e.to_string())?;
                Ok(Opened { sources: srcs, pm: h.pm, labels, dialect, events: binary_event_count(p) })
            } else {
                let t = Arc::new(text::read_path(p).map_err(|e| e.to_string())?);
                Ok(Opened::of(&t))
            }
        }
        Input::Piped(_, t) => Ok(Opened::of(t)),
        Input::Workload(name, params) => {
            let g = pmsim_workloads::generate(name, params).map_err(|e| e.to_string())?;
            let t = Arc::new(g.trace);
            Ok(Opened::of(&t))
        }
    }
}

/// The event count of a validated binary trace: its END record, the file's last 13 bytes
/// (`0x00`, `total_events u64`, `total_labels u32`; docs/binary-trace.md). 0 if unreadable: it
/// only sizes a progress display.
fn binary_event_count(p: &Path) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let mut end = [0u8; 13];
    std::fs::File::open(p)
        .and_then(|mut f| f.seek(SeekFrom::End(-13)).and_then(|_| f.read_exact(&mut end)))
        .map_or(0, |_| if end[0] == 0 { u64::from_le_bytes(end[1..9].try_into().unwrap_or_default()) } else { 0 })
}

/// A progress display of a run: `(trace events executed, events in the trace)`; it answers
/// whether to go on (`false` stops the run with `pmsim_crash::INTERRUPTED`).
pub type RunProgress<'p> = &'p (dyn Fn(u64, u64) -> bool + Sync);

/// Runs one simulation and returns its stats; `progress`, if given, hears about it about ten
/// times a second (the run advances in slices of simulated time, which changes nothing: it is
/// the same sequence of events as one uninterrupted run).
pub fn run(
    input: &Input,
    design_name: &str,
    cfg: &Config,
    allow_broken: bool,
    progress: Option<RunProgress<'_>>,
) -> Result<RunStats, String> {
    let o = sources(input)?;
    let total = o.events;
    let cfg = &cfg.for_threads(o.sources.len());
    let d = design::for_trace(design_name, cfg, allow_broken, o.dialect)?;
    let mut sim = Simulator::new(cfg, d, o.pm, o.sources, o.labels, false).map_err(|e| e.to_string())?;
    if let Some(p) = progress {
        // Slices of 10 us of simulated time: far shorter than a report interval at any speed.
        const SLICE_PS: u64 = 10_000_000;
        let mut shown = std::time::Instant::now();
        let stopped = || Err(pmsim_crash::INTERRUPTED.to_string());
        if !p(0, total) {
            return stopped();
        }
        let mut until = 0u64;
        while sim.run_until(until).map_err(|e| e.to_string())? {
            // Skip idle stretches (a long `compute`) in one step.
            until = until.saturating_add(SLICE_PS).max(sim.next_time().unwrap_or(until));
            if shown.elapsed() >= std::time::Duration::from_millis(100) {
                shown = std::time::Instant::now();
                if !p(sim.events_done(), total) {
                    return stopped();
                }
            }
        }
    }
    sim.run().map_err(|e| e.to_string())?;
    if let Some(p) = progress {
        let _ = p(sim.events_done(), total.max(sim.events_done())); // done: nothing left to stop
    }
    Ok(RunStats::collect(&sim))
}

/// Loads a whole trace (text or binary) into memory.
pub fn load_trace(path: &str) -> Result<Trace, String> {
    binary::read_any(Path::new(path)).map_err(|e| e.to_string())
}

/// `pmsim trace convert`: text <-> binary, streaming in both directions. The metadata (how the
/// trace was made, an `incomplete` mark) goes along, into a pipe too and from a pipe too: a
/// converted trace of a crashed or recorded program means what the original does.
pub fn convert(src: &str, dst: &str, to_binary: bool, compress: bool) -> Result<(), String> {
    let sp = Path::new(src);
    if !sp.exists() {
        return Err(format!("{src}: no such file"));
    }
    // A pipe or device is read once, whole, before anything is written (is_binary would
    // consume its first bytes); the trace read keeps its metadata.
    let whole = if is_regular(sp) { None } else { Some(load_trace(src)?) };
    let meta = match &whole {
        Some(t) => t.meta.clone(),
        None => pmsim_trace::meta::read_meta(sp).map_err(|e| e.to_string())?,
    };
    crate::output::write_with(dst, |out| {
        let loaded;
        let in_memory = match &whole {
            Some(t) => Some(t),
            None if binary::is_binary(sp) && to_binary => {
                loaded = load_trace(src)?;
                Some(&loaded)
            }
            None => None,
        };
        if to_binary {
            let lines: Vec<String> = meta.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let meta = lines.join("\n");
            if let Some(t) = in_memory {
                binary::write_with_meta(out, t, compress, &meta).map_err(|e| format!("{dst}: {e}"))?;
                return Ok(());
            }
            let mut w = binary::Writer::new(out, compress);
            let f = std::fs::File::open(sp).map_err(|e| format!("{src}: {e}"))?;
            text::read_into(src, std::io::BufReader::new(f), &mut w).map_err(|e| e.to_string())?;
            w.meta(&meta).map_err(|e| format!("{dst}: {e}"))?;
            w.finish().map_err(|e| format!("{dst}: {e}"))?;
        } else {
            let mut out = out;
            match in_memory {
                Some(t) => text::write_with_meta(&mut out, t, &meta).map_err(|e| format!("{dst}: {e}"))?,
                None if binary::is_binary(sp) => write_text_streaming(sp, &meta, &mut out)?,
                None => {
                    let t = load_trace(src)?;
                    text::write_with_meta(&mut out, &t, &meta).map_err(|e| format!("{dst}: {e}"))?;
                }
            }
            std::io::Write::flush(&mut out).map_err(|e| format!("{dst}: {e}"))?;
        }
        Ok(())
    })
}

/// Is `p` a regular file (streamable, seekable), rather than a pipe or device like /dev/stdin?
fn is_regular(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.is_file()).unwrap_or(false)
}

/// Binary -> text without loading the trace: one cursor per thread, merged by gid.
fn write_text_streaming(p: &Path, meta: &[(String, String)], out: &mut impl std::io::Write) -> Result<(), String> {
    let name = p.display().to_string();
    pmsim_trace::validate_binary(p).map_err(|e| e.to_string())?;
    let first = BinarySource::open(p, 0).map_err(|e| e.to_string())?;
    let h = first.header().clone();
    let labels = BinarySource::labels(p).map_err(|e| e.to_string())?;
    let mut srcs: Vec<BinarySource> = vec![first];
    for t in 1..h.threads {
        srcs.push(BinarySource::open(p, t).map_err(|e| e.to_string())?);
    }
    text::write_header(out, h.threads, &h.pm).map_err(|e| format!("{name}: {e}"))?;
    text::write_meta(out, meta).map_err(|e| format!("{name}: {e}"))?;
    let mut chunks: Vec<pmsim_trace::Chunk> = (0..h.threads).map(|_| pmsim_trace::Chunk::default()).collect();
    let mut pos = vec![0usize; h.threads];
    let mut live = vec![true; h.threads];
    loop {
        let mut best: Option<(u64, usize)> = None;
        for t in 0..h.threads {
            if live[t] && pos[t] >= chunks[t].events.len() {
                pos[t] = 0;
                live[t] = srcs[t].next_chunk(&mut chunks[t]).map_err(|e| e.to_string())?;
            }
            if live[t] {
                let g = chunks[t].events[pos[t]].gid;
                if best.is_none_or(|(bg, _)| g < bg) {
                    best = Some((g, t));
                }
            }
        }
        let Some((_, t)) = best else { break };
        let ev = chunks[t].events[pos[t]];
        pos[t] += 1;
        writeln!(out, "T{t} {}", text::format_event(&ev, &chunks[t].bytes, &labels))
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// `pmsim trace stats`.
pub fn trace_stats(input: &Input) -> Result<TraceStats, String> {
    // Counting simulates nothing: a trace of more threads than the engine's cores is counted too.
    let mut o = open_sources(input)?;
    TraceStats::collect(&o.pm, &mut o.sources).map_err(|e| e.to_string())
}

/// Writes a workload's trace to `dst`, binary or text as the caller decided (the front end's
/// one suffix rule, `api.trace_format`); returns the event count.
pub fn generate_to(
    name: &str,
    params: &BTreeMap<String, String>,
    dst: &str,
    binary: bool,
    compress: bool,
) -> Result<u64, String> {
    let g = pmsim_workloads::generate(name, params).map_err(|e| e.to_string())?;
    crate::output::write_with(dst, |mut out| {
        let r = if binary {
            binary::write(out, &g.trace, compress).map(|_| ())
        } else {
            text::write(&mut out, &g.trace).and_then(|_| std::io::Write::flush(&mut out))
        };
        r.map_err(|e| format!("{dst}: {e}"))?;
        Ok(g.trace.num_events() as u64)
    })
}

/// Which instants `pmsim crash` checks.
pub struct CrashSpec {
    pub at: Vec<u64>,
    pub random: Option<usize>,
    pub seed: u64,
    pub every: bool,
    pub model: Option<String>,
    pub recovery: bool,
    pub max_failures: usize,
}

/// `pmsim crash`: crash a run at the requested instants and check every image.
pub fn crash(
    input: &Input,
    design: &str,
    cfg: &Config,
    allow_broken: bool,
    spec: &CrashSpec,
    progress: Option<pmsim_crash::Progress<'_>>,
) -> Result<pmsim_crash::Report, String> {
    let modes = (!spec.at.is_empty()) as u8 + spec.random.is_some() as u8 + spec.every as u8;
    if modes != 1 {
        return Err("give exactly one of --at, --random or --every".into());
    }
    // Zero would check nothing and still report success.
    if spec.random == Some(0) {
        return Err("--random N: N must be at least 1".into());
    }
    if spec.max_failures == 0 {
        return Err("--max-failures must be at least 1".into());
    }
    let model = match &spec.model {
        Some(m) => Some(
            pmsim_check::Model::from_name(m)
                .ok_or_else(|| format!("unknown model '{m}' (valid: ep, rp, strict, x86)"))?,
        ),
        None => None,
    };
    design::build(design, cfg, allow_broken)?;
    let (trace, recovery, replay) = match input {
        Input::File(path) => {
            let t = load_trace(path)?;
            simulable_threads(path, t.num_threads())?;
            (Arc::new(t), None, format!("--trace {path}"))
        }
        Input::Piped(path, t) => {
            simulable_threads(path, t.num_threads())?;
            (t.clone(), None, format!("--trace {path}"))
        }
        Input::Workload(name, params) => {
            let g = pmsim_workloads::generate(name, params).map_err(|e| e.to_string())?;
            let mut replay = format!("--workload {name}");
            for (k, v) in params {
                replay.push_str(&format!(" -p {k}={v}"));
            }
            (Arc::new(g.trace), Some(g.recovery), replay)
        }
    };
    let instants = if spec.every {
        pmsim_crash::Instants::Every
    } else if let Some(n) = spec.random {
        pmsim_crash::Instants::Random { n, seed: spec.seed }
    } else {
        pmsim_crash::Instants::At(spec.at.clone())
    };
    let req = pmsim_crash::Request {
        trace,
        design: design.to_string(),
        allow_broken,
        config: cfg.clone(),
        instants,
        model,
        recovery: if spec.recovery { recovery.as_deref() } else { None },
        replay_input: replay,
        max_failures: spec.max_failures,
    };
    pmsim_crash::run_with_progress(&req, progress)
}
