//! Crash injection: run a trace under a design, crash it at chosen instants, build each crash
//! image from what the design's persistence domain holds, and check it — against the persistency
//! model the design promises (with the independent checker of `pmsim-check`) and, for built-in
//! workloads, against the application's own recovery.
//!
//! Instants: given ones (`--at`), seeded random ones over the run (`--random N --seed S`), or every
//! instant at which the persistent state changes (`--every`). One simulation serves all the
//! instants of a request: it stops at each, the image is followed incrementally
//! ([`pmsim_engine::crash::ImageTracker`]) and checked incrementally ([`pmsim_check::Incremental`]).
//! A violation comes with one command line that replays exactly that crash.

use pmsim_check::{Checker, FenceReading, Model, RegionOrder, Verdict};
use pmsim_engine::crash::{ImageTracker, WordChange};
use pmsim_engine::{design, Config, Promise, Simulator};
use pmsim_trace::{Dialect, MemImage, Trace, VecSource};
use pmsim_workloads::Recovery;
use serde::Serialize;
use std::sync::Arc;

mod memo;

/// Which instants to crash at.
#[derive(Clone, Debug)]
pub enum Instants {
    /// These instants, in ps.
    At(Vec<u64>),
    /// `n` instants drawn uniformly over the run with `seed`.
    Random { n: usize, seed: u64 },
    /// Every instant at which the persistent state changes, or what must be durable grows
    /// (a dfence completes, a remote region is acknowledged).
    Every,
}

/// What to crash.
pub struct Request<'a> {
    pub trace: Arc<Trace>,
    pub design: String,
    pub allow_broken: bool,
    pub config: Config,
    pub instants: Instants,
    /// The model to check against; `None` = the one the design promises.
    pub model: Option<Model>,
    /// The workload's recovery, to run on every image.
    pub recovery: Option<&'a dyn Recovery>,
    /// How to name the input in replay command lines (e.g. `--workload array -p ops=100`).
    pub replay_input: String,
    /// Stop after this many failing images.
    pub max_failures: usize,
}

/// One failing crash image.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    pub at_ps: u64,
    pub verdict: Option<Verdict>,
    pub recovery_error: Option<String>,
    /// Remote persistence (docs/design.md §9): a client's regions not durable in posting order.
    pub region_error: Option<String>,
    /// Replays exactly this crash.
    pub replay: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub design: String,
    pub model: &'static str,
    pub images: u64,
    pub consistent: u64,
    pub durable: u64,
    pub recovered: u64,
    /// Whether the workload's own recovery ran on the images (false for a trace, with
    /// `--no-recovery`, and for workloads whose recovery runs where pmsim does not crash).
    pub recovery_checked: bool,
    pub failures: Vec<Failure>,
    /// Simulated end of the run (ps).
    pub run_end_ps: u64,
    /// Host seconds of the whole check. Not in the report's JSON, which must be byte-identical
    /// for the same inputs on any host; `pmsim bench --crash` reports it.
    #[serde(skip)]
    pub host_seconds: f64,
    /// Of `host_seconds`, those before the first instant (the reference run, the checker's
    /// graph); for `pmsim bench --crash`, never in the report.
    #[serde(skip)]
    pub setup_seconds: f64,
    /// Runs of the application's recovery; the other images reused a verdict (`memo`).
    #[serde(skip)]
    pub recovery_runs: u64,
    /// Runs of the recovery's pieces (`pmsim_workloads::piece`), the whole recovery's included.
    #[serde(skip)]
    pub piece_runs: u64,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The model a design's crash images must satisfy.
pub fn model_for(p: Promise) -> Model {
    match p {
        Promise::Ep => Model::Ep,
        Promise::Rp => Model::Rp,
        Promise::X86 => Model::X86,
        // Every performed store survives: the strictest model must hold.
        Promise::All | Promise::Strict => Model::Strict,
    }
}

fn simulator(req: &Request, dialect: Dialect, record: bool) -> Result<Simulator, String> {
    let cfg = req.config.for_threads(req.trace.num_threads());
    let d = design::for_trace(&req.design, &cfg, req.allow_broken, dialect)?;
    Simulator::new(&cfg, d, req.trace.pm.clone(), VecSource::all(&req.trace), req.trace.labels.clone(), record)
        .map_err(|e| e.to_string())
}

/// A seeded generator (SplitMix64) for instants.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs the request.
pub fn run(req: &Request) -> Result<Report, String> {
    run_with_progress(req, None)
}

/// Where a check has got to, for a progress display: `(instant reached, end of the run)`, both in
/// simulated ps. Called after the reference run (with 0), then at most about ten times a second,
/// and at the end.
/// It answers whether to go on: `false` stops the check, which then fails with
/// [`INTERRUPTED`] (a user's Ctrl-C, seen by the display's caller).
pub type Progress<'p> = &'p (dyn Fn(u64, u64) -> bool + Sync);

/// The error of a run or check its progress display stopped.
pub const INTERRUPTED: &str = "interrupted";

/// [`run`], reporting its progress to `progress`.
pub fn run_with_progress(req: &Request, progress: Option<Progress<'_>>) -> Result<Report, String> {
    let start = std::time::Instant::now();
    // First pass: the full run, for its record (the checker's input) and its length.
    let dialect = req.trace.dialect();
    let mut full = simulator(req, dialect, true)?;
    full.run().map_err(|e| e.to_string())?;
    let end = full.m.now;
    let record = full.m.record.take().unwrap_or_default();
    let region_acks: std::collections::HashMap<u64, u64> = full.net.acked_regions().into_iter().collect();
    let regions = RegionOrder::new(&req.trace);
    let model = req.model.unwrap_or_else(|| model_for(full.design.promise()));
    let fences = if full.design.maps_x86_fences() { FenceReading::Mapped } else { FenceReading::ByDialect };
    // eADR and BBB promise more than any model's order: every performed store survives.
    let performed_durable = req.model.is_none() && full.design.promise() == Promise::All;
    let checker =
        Checker::with_options(&req.trace, &record, model, fences, performed_durable).map_err(|e| e.to_string())?;
    // Where what must be durable grows while the image may stand still: a dfence (or, under
    // x86, a fence) completing, a remote region acknowledged. `Every` crashes there too (an
    // early-returning fence shows only in the window before its stores persist).
    let mut durability_points = checker.durability_instants();
    durability_points.extend(region_acks.values().copied());
    durability_points.sort_unstable();
    durability_points.dedup();
    drop(full);

    let mut instants: Vec<u64> = match &req.instants {
        Instants::At(v) => v.clone(),
        Instants::Random { n, seed } => {
            let mut s = *seed;
            (0..*n).map(|_| splitmix(&mut s) % (end + 1)).collect()
        }
        Instants::Every => Vec::new(),
    };
    instants.sort_unstable();

    // A recovery that checks nothing (a remote workload's: it runs at the clients) is not run,
    // so no image counts as recovered by it.
    let recovery = req.recovery.filter(|r| r.checks_images());
    let mut rep = Report {
        design: req.design.clone(),
        // eADR's and BBB's own promise is more than the order `model` checks (below).
        model: if performed_durable { "all" } else { model.name() },
        images: 0,
        consistent: 0,
        durable: 0,
        recovered: 0,
        recovery_checked: recovery.is_some(),
        failures: Vec::new(),
        run_end_ps: end,
        host_seconds: 0.0,
        setup_seconds: 0.0,
        recovery_runs: 0,
        piece_runs: 0,
    };
    let mut sim = simulator(req, dialect, true)?;
    // The sweep tracks data for the images; its record would repeat the reference run's.
    sim.m.record = None;
    rep.setup_seconds = start.elapsed().as_secs_f64();
    let mut tracker = ImageTracker::new();
    let mut inc = checker.incremental();
    let mut changes: Vec<WordChange> = Vec::new();
    // The application's verdict is reused while nothing it read changed (see `memo`).
    let mut memo = memo::RecoveryMemo::new(&record.dfences);
    // The crash image as the application's recovery reads it, kept in step with the tracker.
    let mut img = MemImage::new();
    img.keep_dense();

    let mut followed = regions.follower(&|gid| region_acks.get(&gid).copied());
    let mut check_at = |sim: &mut Simulator, t: u64, rep: &mut Report| -> bool {
        tracker.update(sim, &mut changes);
        for c in &changes {
            memo.changed(c.word);
            if !regions.is_empty() {
                followed.changed(&regions, c.word, img.get(c.word).map(|v| v.id), c.value.map(|v| v.id));
            }
            match c.value {
                // Words of remote regions are checked by the region rule, not by PMO's; to PMO
                // such a word overwrote whatever server stores of it had persisted.
                Some(v) if regions.is_region(v.id) => {
                    inc.set_word_outside(c.word);
                    img.set(c.word, v);
                }
                Some(v) => {
                    inc.set_word(c.word, v.id);
                    img.set(c.word, v);
                }
                None => {
                    inc.clear_word(c.word);
                    img.remove(c.word);
                }
            }
        }
        rep.images += 1;
        let (cons, dur) = inc.status(t);
        let region_error = if regions.is_empty() { None } else { followed.check(&regions, t).err() };
        let mut failure: Option<Failure> = None;
        if cons && dur && region_error.is_none() {
            rep.consistent += 1;
            rep.durable += 1;
        } else {
            let v = if cons && dur { None } else { Some(inc.check(t)) };
            let (vc, vd) = v.as_ref().map_or((true, true), |v| (v.consistent, v.durable));
            rep.consistent += (vc && region_error.is_none()) as u64;
            rep.durable += vd as u64;
            failure = Some(Failure { at_ps: t, verdict: v, recovery_error: None, region_error, replay: String::new() });
        }
        if let Some(r) = recovery {
            let result = memo.verdict(r, &mut img, t);
            if let Err(e) = result {
                let f = failure.get_or_insert(Failure {
                    at_ps: t,
                    verdict: None,
                    recovery_error: None,
                    region_error: None,
                    replay: String::new(),
                });
                f.recovery_error = Some(e);
            } else {
                rep.recovered += 1;
            }
        }
        if let Some(mut f) = failure {
            f.replay = replay_command(req, t);
            rep.failures.push(f);
        }
        rep.failures.len() >= req.max_failures.max(1)
    };

    // Progress: a look at the clock every 64 instants, a report at most every 100 ms.
    let mut shown = (0u64, std::time::Instant::now());
    let mut tick = |t: u64| -> Result<(), String> {
        if let Some(p) = progress {
            shown.0 += 1;
            if shown.0.is_multiple_of(64) && shown.1.elapsed() >= std::time::Duration::from_millis(100) {
                shown.1 = std::time::Instant::now();
                if !p(t, end) {
                    return Err(INTERRUPTED.to_string());
                }
            }
        }
        Ok(())
    };
    if let Some(p) = progress {
        if !p(0, end) {
            return Err(INTERRUPTED.to_string());
        }
    }
    match &req.instants {
        Instants::Every => {
            let mut seen = sim.m.persist_version;
            // The persistent state changed at this instant and its image is not checked yet:
            // the change may come from any event at the instant, not only the last one.
            let mut changed = false;
            let mut points = durability_points.iter().copied().peekable();
            loop {
                let more = sim.step().map_err(|e| e.to_string())?;
                if sim.m.persist_version != seen {
                    seen = sim.m.persist_version;
                    changed = true;
                }
                // Crash after every event at this instant has happened.
                let t = sim.m.now;
                while points.next_if(|&p| p <= t).is_some() {
                    changed = true;
                }
                if changed && sim.next_time() != Some(t) {
                    changed = false;
                    if check_at(&mut sim, t, &mut rep) {
                        break;
                    }
                    tick(t)?;
                }
                if !more {
                    break;
                }
            }
        }
        _ => {
            for &t in &instants {
                sim.run_until(t).map_err(|e| e.to_string())?;
                if check_at(&mut sim, t, &mut rep) {
                    break;
                }
                tick(t)?;
            }
        }
    }
    if let Some(p) = progress {
        let _ = p(end, end); // done: nothing left to stop
    }
    rep.recovery_runs = memo.runs;
    rep.piece_runs = memo.piece_runs();
    rep.host_seconds = start.elapsed().as_secs_f64();
    Ok(rep)
}

fn replay_command(req: &Request, t: u64) -> String {
    let mut s = format!("pmsim crash {} --design {} --at {t}", req.replay_input, req.design);
    if req.allow_broken {
        s.push_str(" --allow-broken-designs");
    }
    if let Some(m) = req.model {
        s.push_str(&format!(" --model {}", m.name()));
    }
    for (k, v) in config_overrides(&req.config) {
        s.push_str(&format!(" --set {k}={v}"));
    }
    s
}

/// The parameters where `cfg` differs from the defaults, as `section.field` = value.
pub fn config_overrides(cfg: &Config) -> Vec<(String, String)> {
    let (a, b) =
        (serde_json::to_value(cfg).unwrap_or_default(), serde_json::to_value(Config::default()).unwrap_or_default());
    let mut out = Vec::new();
    for p in pmsim_engine::config::PARAMS {
        let (sec, field) = p.name.split_once('.').unwrap_or(("", ""));
        let (x, y) = (&a[sec][field], &b[sec][field]);
        if x != y {
            out.push((p.name.to_string(), x.to_string().trim_matches('"').to_string()));
        }
    }
    out
}
