//! What the analysis is asked: the model and the three parameters of docs/design.md §8.

use serde::Serialize;

/// A persistency model (docs/design.md §8). Racing epochs is [`Model::Epoch`] on a workload variant
/// that leaves lock operations outside persist barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Strict,
    Epoch,
    Strand,
}

impl Model {
    pub const ALL: [Model; 3] = [Model::Strict, Model::Epoch, Model::Strand];

    pub fn name(self) -> &'static str {
        match self {
            Model::Strict => "strict",
            Model::Epoch => "epoch",
            Model::Strand => "strand",
        }
    }

    /// Parses one model name or `all`.
    pub fn parse_list(s: &str) -> Result<Vec<Model>, AnalysisError> {
        let mut out = Vec::new();
        for part in s.split(',') {
            match part.trim() {
                "strict" => out.push(Model::Strict),
                "epoch" => out.push(Model::Epoch),
                "strand" => out.push(Model::Strand),
                "all" => out.extend(Model::ALL),
                other => return Err(AnalysisError::UnknownModel(other.to_string())),
            }
        }
        // Each model once, in the order first named.
        let mut seen = Vec::new();
        out.retain(|m| {
            !seen.contains(m) && {
                seen.push(*m);
                true
            }
        });
        Ok(out)
    }
}

/// Parameters of one analysis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Atomic-persist granularity A in bytes (power of two, 8..=256; default 8).
    pub atomic_bytes: u64,
    /// Tracking granularity G in bytes (power of two, 8..=256; default 8).
    pub track_bytes: u64,
    /// Persist latency L in ns (default 500).
    pub persist_ns: f64,
    /// Coalescing on (always, except in the property tests: with it off, the constraint sets of
    /// the models nest, so their critical paths must too).
    pub coalesce: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config { atomic_bytes: 8, track_bytes: 8, persist_ns: 500.0, coalesce: true }
    }
}

impl Config {
    pub fn validate(&self) -> Result<(), AnalysisError> {
        for (what, v) in [
            ("atomic persist size (--atomic-bytes)", self.atomic_bytes),
            ("tracking granularity (--track-bytes)", self.track_bytes),
        ] {
            if !v.is_power_of_two() || !(8..=256).contains(&v) {
                return Err(AnalysisError::Granularity(what, v));
            }
        }
        if !(self.persist_ns.is_finite() && self.persist_ns > 0.0) {
            return Err(AnalysisError::Latency(self.persist_ns));
        }
        Ok(())
    }
}

fn instr_part(r: &Option<f64>) -> String {
    r.map(|r| format!(" and an instruction rate of {r:e} operations per second")).unwrap_or_default()
}

fn instr_hint(r: &Option<f64>) -> &'static str {
    if r.is_some() {
        " or --instr-ops-per-s"
    } else {
        ""
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error("unknown persistency model '{0}' (expected strict, epoch, strand or all; racing epochs is the epoch model on a workload's variant=racing)")]
    UnknownModel(String),
    #[error("{0} must be a power of two from 8 to 256 bytes, got {1}")]
    Granularity(&'static str, u64),
    #[error("persist latency must be a positive number of ns, got {0}")]
    Latency(f64),
    #[error("instruction rate must be a positive number of operations per second, got {0}")]
    InstrRate(f64),
    #[error("the rates overflow with a persist latency of {0:e} ns{part}: give a larger --persist-ns{hint}", part = instr_part(.1), hint = instr_hint(.1))]
    Overflow(f64, Option<f64>),
    #[error(transparent)]
    Trace(#[from] pmsim_trace::TraceError),
}
