//! Atlas workloads (ASAP Table III): lock-based persistent data structures made failure-atomic by
//! Atlas's undo logging of every store inside a lock-delimited section ([`undo_log`]).
use crate::Workload;

pub mod heap;
pub mod queue;
pub mod skiplist;
pub mod undo_log;

pub static WORKLOADS: &[&dyn Workload] = &[&heap::ATLAS_HEAP, &queue::ATLAS_QUEUE, &skiplist::ATLAS_SKIPLIST];
