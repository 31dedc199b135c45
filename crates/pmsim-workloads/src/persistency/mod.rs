//! The persistent queues of *Memory Persistency* (Pelley et al., ISCA 2014, Algorithm 1 and §6):
//! `cwl` (Copy While Locked) and `2lc` (Two-Lock Concurrent), each in one variant per
//! persistency model (`variant=strict|epoch|racing|strand`), for the persist critical-path
//! analysis (docs/design.md §8, crate `pmsim-analysis`) and, like every built-in workload, for the
//! timing engine and the crash checker.
//!
//! Both queues are circular buffers in PM: a persistent `head` (bytes of the data segment holding
//! valid entries) and a data segment of slots, each an 8-byte length plus the entry, padded to a
//! multiple of 64 B (the seed's padding against false sharing). An entry is valid once `head`
//! covers it; recovery reads `head` and checks every slot below it. Locks are MCS queue locks in
//! volatile memory, emitted as the real loads, stores and rmws on the lock word and queue nodes.
//! Inserts only, as in the seed's evaluation; the data segment holds every insert of the run, so
//! it never wraps.

mod mcs;
mod queue;

use crate::Workload;

pub use queue::{CWL, TWO_LOCK};

pub static WORKLOADS: &[&dyn Workload] = &[&queue::CWL, &queue::TWO_LOCK];
