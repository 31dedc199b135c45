//! The outputs of docs/design.md §8 for one model, as plain data with stable JSON names.

use crate::analyzer::Counts;
use crate::config::{Config, Model};
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub model: Model,
    /// Persists on the longest chain of ordering constraints.
    pub critical_path: u64,
    /// Persists after coalescing.
    pub persists: u64,
    /// Operations (`begin`/`end` pairs).
    pub ops: u64,
    /// Events read.
    pub events: u64,
    /// `None` (JSON null) for a trace without operations: the path is still reported, a rate
    /// per operation does not exist.
    pub critical_path_per_op: Option<f64>,
    /// ops / (critical path × L); `None` (JSON null) when nothing persists (unbounded) or the
    /// trace has no operations.
    pub persist_bound_ops_per_s: Option<f64>,
    /// The instruction execution rate the bound is normalised to, when known.
    pub instr_ops_per_s: Option<f64>,
    /// persist_bound_ops_per_s / instr_ops_per_s; `None` when either is unknown or unbounded.
    pub normalized_rate: Option<f64>,
    pub atomic_bytes: u64,
    pub track_bytes: u64,
    pub persist_ns: f64,
}

impl Report {
    pub(crate) fn new(model: Model, c: Counts, cfg: &Config, instr_ops_per_s: Option<f64>) -> Report {
        let has_ops = c.ops > 0;
        let bound =
            // ops × 1e9 / (path × L ns): one rounding fewer than scaling L to seconds first.
            (has_ops && c.critical_path > 0).then(|| c.ops as f64 * 1e9 / (c.critical_path as f64 * cfg.persist_ns));
        Report {
            model,
            critical_path: c.critical_path,
            persists: c.persists,
            ops: c.ops,
            events: c.events,
            critical_path_per_op: has_ops.then(|| c.critical_path as f64 / c.ops as f64),
            persist_bound_ops_per_s: bound,
            instr_ops_per_s,
            normalized_rate: bound.zip(instr_ops_per_s).map(|(b, r)| b / r),
            atomic_bytes: cfg.atomic_bytes,
            track_bytes: cfg.track_bytes,
            persist_ns: cfg.persist_ns,
        }
    }
}
