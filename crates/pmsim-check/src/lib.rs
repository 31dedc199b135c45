//! Crash-consistency checker for pmsim (docs/design.md §6).
//!
//! Why it exists: a persistence design is only "done" when every crash image it produces is
//! allowed by the persistency model it promises. This crate decides that *without trusting any
//! design*: it rebuilds the persist order (PMO) from the trace and the engine's [`RunRecord`]
//! (the order in which word accesses and sync events were performed) using the model's
//! definition only, and checks images against it by store identity (never by data).
//!
//! What it guarantees:
//! - [`Checker::check`] is exact: an image is reported consistent iff every store that precedes
//!   (in PMO at the crash instant) a visible store is durable in the image, no visible id is a
//!   store that was not performed by then, and (for `durable`) every store before a completed
//!   `dfence` of its thread is durable and (x86) every store a completed fence made persistent
//!   is.
//! - [`Incremental`] gives the same verdicts as [`Checker::check`] for a sequence of word
//!   changes and non-decreasing crash instants, at a cost per change that does not depend on the
//!   size of the image (see `docs/litmus.md` and the module docs of `incremental`).
//! - Violations name the visible store, the missing one, what the image shows instead and a
//!   persist-order path between them, deterministically (at most [`MAX_VIOLATIONS`]).
//!
//! [`RunRecord`]: pmsim_trace::RunRecord

mod closure;
mod error;
mod explain;
mod graph;
mod incremental;
pub mod litmus;
mod model;
pub mod remote;
mod req;
#[cfg(test)]
mod req_tests;
mod verdict;
mod x86;

pub use error::CheckError;
pub use incremental::Incremental;
pub use litmus::{parse_litmus, Expectation, Litmus, LitmusError, Outcome};
pub use model::{FenceReading, Model};
pub use remote::{RegionFollower, RegionOrder};
pub use verdict::{EdgeRule, MissingStore, PathStep, StoreRef, Verdict, Violation, ViolationKind, MAX_VIOLATIONS};

use pmsim_trace::{MemImage, RunRecord, Trace};
use std::sync::Arc;

/// The checker for one run: the persist-order graph of a trace and its run record under one
/// model, built once and shared by every crash instant checked.
#[derive(Clone)]
pub struct Checker {
    graph: Arc<graph::Graph>,
    /// Per-node closures when they do not depend on the crash instant (no persist-order edge
    /// ever points from a later-performed access to an earlier-performed one); `None` otherwise,
    /// in which case each [`Incremental`] recomputes them as time advances.
    static_reqs: Option<Arc<Vec<req::Req>>>,
    /// See [`Checker::durability_instants`].
    late: Vec<u64>,
}

impl Checker {
    /// Builds the persist-order graph. Fails with a typed error naming the offending record entry
    /// when the record does not match the trace.
    pub fn new(trace: &Trace, record: &RunRecord, model: Model) -> Result<Checker, CheckError> {
        Checker::with_fences(trace, record, model, FenceReading::ByDialect)
    }

    /// [`Checker::new`] with the trace's `sfence`/`mfence` read as `fences` says.
    pub fn with_fences(
        trace: &Trace,
        record: &RunRecord,
        model: Model,
        fences: FenceReading,
    ) -> Result<Checker, CheckError> {
        Checker::with_options(trace, record, model, fences, false)
    }

    /// [`Checker::with_fences`]; with `performed_durable`, every PM store performed by the crash
    /// instant must also be durable (with every store before it in its thread's program order):
    /// the promise of eADR and BBB, which no persistency model's order expresses, as any prefix
    /// of the order may be missing at a crash (docs/design.md §6).
    pub fn with_options(
        trace: &Trace,
        record: &RunRecord,
        model: Model,
        fences: FenceReading,
        performed_durable: bool,
    ) -> Result<Checker, CheckError> {
        let mut graph = graph::Graph::build(trace, record, model, fences)?;
        if performed_durable {
            graph.require_performed_durable();
        }
        let graph = Arc::new(graph);
        let mut cl = closure::Closure::new(graph.clone());
        let mut changed = Vec::new();
        for &n in &graph.order {
            cl.process(n, &mut changed);
        }
        let mut late = std::mem::take(&mut cl.late);
        // A PM store that performs after a node whose prefix covers it (a node of a later epoch
        // of its thread; under RP also a later release of its epoch): what a visible store
        // requires grows when it performs, with no set changing (a load that performs before
        // its thread's earlier store, under strict persistency).
        for list in &graph.thread_nodes {
            // The earliest perform time of the later nodes of later epochs, of the current
            // epoch, and of the current epoch's releases.
            let (mut later, mut epoch, mut here, mut rel) = (u64::MAX, u32::MAX, u64::MAX, u64::MAX);
            for &n in list.iter().rev() {
                let node = &graph.nodes[n as usize];
                if node.epoch != epoch {
                    (later, epoch, here, rel) = (later.min(here), node.epoch, u64::MAX, u64::MAX);
                }
                let covered_from = if model == Model::Rp { later.min(rel) } else { later };
                if node.pm && node.is_store && node.time != u64::MAX && covered_from < node.time {
                    late.push(node.time);
                }
                here = here.min(node.time);
                if node.rel {
                    rel = rel.min(node.time);
                }
            }
        }
        let static_reqs = if cl.propagated { None } else { Some(Arc::new(cl.into_reqs())) };
        Ok(Checker { graph, static_reqs, late })
    }

    pub fn model(&self) -> Model {
        self.graph.model
    }

    /// Whether per-store requirements are independent of the crash instant (fast path).
    pub fn is_static(&self) -> bool {
        self.static_reqs.is_some()
    }

    /// The instants (ps, sorted, distinct) at which what must be durable grows: each completed
    /// dfence's, under x86 each completed fence point's, and each perform instant of a node
    /// that performed after a node it precedes and so added to what that node requires (a store
    /// performing after a later-epoch load of its thread; an edge into a node performed
    /// earlier). Between two of them, and between changes of the image, no verdict changes, so
    /// an exhaustive sweep must crash there too.
    pub fn durability_instants(&self) -> Vec<u64> {
        let g = &self.graph;
        let mut at: Vec<u64> = g
            .dfences
            .iter()
            .map(|d| d.time)
            .chain(g.fences_done.iter().map(|f| f.0))
            .chain(self.late.iter().copied())
            .collect();
        at.sort_unstable();
        at.dedup();
        at
    }

    /// Checks one image at crash instant `t` (picoseconds) from scratch.
    pub fn check(&self, image: &MemImage, t: u64) -> Verdict {
        let mut inc = self.incremental();
        for (w, v) in image.sorted() {
            inc.set_word(w, v.id);
        }
        inc.check(t)
    }

    /// A checker for a sequence of images (starting from the all-initial image) at
    /// non-decreasing crash instants.
    pub fn incremental(&self) -> Incremental {
        Incremental::new(self.graph.clone(), self.static_reqs.clone())
    }
}
