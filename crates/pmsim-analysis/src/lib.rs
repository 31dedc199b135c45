//! Persist critical-path analysis (docs/design.md §8; Pelley, Chen and Wenisch, *Memory
//! Persistency*, ISCA 2014, §7).
//!
//! Why it exists: it measures how much persist concurrency a *persistency model* allows,
//! independent of any hardware: infinite bandwidth and banks, every persist takes the persist
//! latency L and happens as soon as its ordering constraints allow. The answer is the
//! **critical path**, the number of persists on the longest chain of ordering constraints;
//! persist-bound time is critical path × L. It needs no timing engine and runs in one pass over
//! a trace in global order (the execution order, taken as SC).
//!
//! Semantics (exactly docs/design.md §8):
//! - A *persist* is the part of a `store`/`ntstore`/`rmw`/`release` that falls in one
//!   atomic-persist block (granularity A) of a PM range. `acquire`/`load` are loads,
//!   `release`/`store`/`ntstore` are stores, `rmw` is both; `acquire`/`release` are 8-byte
//!   accesses. `ofence`/`dfence` are persist barriers, `strand` is the strand barrier;
//!   flushes and `compute` are ignored, and so are `sfence`/`mfence` except in a legacy x86 trace
//!   (no `ofence`/`dfence`/`strand`), where they are the persist barriers.
//! - Two accesses *conflict* when they touch the same tracking block (granularity G) and one of
//!   them is a store, in volatile and persistent memory alike.
//! - The ordering constraints are the transitive closure of *conflict* edges (any threads: strong
//!   persist atomicity, order carried through volatile memory, load-before-store included) and
//!   *program-order* edges by model: **strict** — every earlier event of the thread; **epoch** —
//!   earlier events of the thread with a persist barrier between; **strand** — the same, within
//!   one strand (no `strand` between). Racing epochs is the epoch model on a workload variant
//!   that leaves lock operations outside barriers.
//! - The *level* of a persist is 1 + the highest level among persists that precede it; the
//!   critical path is the highest level.
//! - *Coalescing*: a persist p tries to join the last persist q to its A-block; it may iff every
//!   persist that must precede p, other than q (and q's predecessors), has a level below q's;
//!   then p takes q's level and identity. Otherwise p is a new persist (after q if they
//!   conflict). A store wider than A is one persist per A-block, all with the same predecessors.
//!
//! How: the set of persists that precede an event is summarised by a [`Frontier`]: its highest
//! level and the identity of the one persist at that level, or "many". That is exactly what the
//! coalescing rule asks (q may be joined iff the frontier is below q's level, or at q's level with
//! q as its only persist there), and frontiers merge exactly under set union. Memory holds one
//! frontier pair per tracking block touched (last store, any access), the last persist per
//! atomic block written, and two frontiers per thread: bounded by distinct blocks, not by the
//! trace's length.

mod analyzer;
mod config;
mod frontier;
mod paged;
mod report;
mod run;

pub use analyzer::{Analyzer, Counts};
pub use config::{AnalysisError, Config, Model};
pub use frontier::Frontier;
pub use report::Report;
pub use run::{analyze_file, analyze_trace, summarize};
