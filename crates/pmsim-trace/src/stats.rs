//! `pmsim trace stats`: what a trace contains, without simulating it.

use crate::event::{Kind, LINE_BYTES};
use crate::source::{Chunk, EventSource};
use crate::trace::{is_pm, PmRange};
use crate::TraceError;
use std::collections::BTreeMap;

/// Counts per thread and in total. Epochs are maximal runs of a thread's PM stores between
/// barriers (`ofence`/`dfence`), as the checker defines them (docs/design.md §6).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TraceStats {
    pub threads: usize,
    pub events: u64,
    pub events_by_kind: BTreeMap<String, u64>,
    pub events_by_thread: Vec<u64>,
    pub pm_stores: u64,
    pub pm_store_bytes: u64,
    pub volatile_stores: u64,
    pub loads: u64,
    pub load_bytes: u64,
    /// Sum of the `compute` events' instruction counts: the non-memory work the trace times.
    pub compute_instructions: u64,
    pub epochs: u64,
    /// Epochs whose PM stores touch exactly one 64 B line.
    pub single_line_epochs: u64,
    /// Sum over epochs of the distinct 64 B lines each writes (lines per epoch = this / epochs).
    pub epoch_lines: u64,
    pub operations: u64,
    /// `rdma_pwrite` regions (each one barrier region at the server) and their bytes.
    pub remote_regions: u64,
    pub remote_bytes: u64,
    /// Threads that issue `rdma_pwrite`/`rdma_wait` (client nodes, docs/design.md §9).
    pub client_threads: u64,
    /// Distinct 64 B PM lines the trace loads or stores, times 64 (its PM footprint).
    pub pm_footprint_bytes: u64,
}

impl TraceStats {
    /// Streams every thread's source once.
    pub fn collect(pm: &[PmRange], sources: &mut [Box<dyn EventSource>]) -> Result<TraceStats, TraceError> {
        let mut st =
            TraceStats { threads: sources.len(), events_by_thread: vec![0; sources.len()], ..Default::default() };
        let mut by_kind = [0u64; Kind::ALL.len()];
        let mut chunk = Chunk::default();
        let mut pm_lines: rustc_hash::FxHashSet<u64> = Default::default();
        for (t, src) in sources.iter_mut().enumerate() {
            let mut epoch_lines: Vec<u64> = Vec::new();
            let mut client = false;
            let close = |lines: &mut Vec<u64>, st: &mut TraceStats| {
                if !lines.is_empty() {
                    st.epochs += 1;
                    lines.sort_unstable();
                    lines.dedup();
                    st.epoch_lines += lines.len() as u64;
                    if lines.len() == 1 {
                        st.single_line_epochs += 1;
                    }
                    lines.clear();
                }
            };
            while src.next_chunk(&mut chunk)? {
                for ev in &chunk.events {
                    st.events += 1;
                    st.events_by_thread[t] += 1;
                    by_kind[ev.kind as usize] += 1;
                    if (ev.kind.writes() || ev.kind.reads()) && is_pm(pm, ev.addr) {
                        pm_lines.insert(ev.addr / LINE_BYTES);
                    }
                    if ev.kind.writes() {
                        if is_pm(pm, ev.addr) {
                            st.pm_stores += 1;
                            st.pm_store_bytes += ev.size as u64;
                            epoch_lines.push(ev.addr & !(LINE_BYTES - 1));
                        } else {
                            st.volatile_stores += 1;
                        }
                    }
                    if ev.kind.reads() {
                        st.loads += 1;
                        st.load_bytes += ev.size as u64;
                    }
                    if ev.kind.is_barrier() {
                        close(&mut epoch_lines, &mut st);
                    }
                    if ev.kind == Kind::End {
                        st.operations += 1;
                    }
                    if ev.kind == Kind::Compute {
                        st.compute_instructions = st.compute_instructions.saturating_add(ev.addr);
                    }
                    if ev.kind == Kind::RdmaPwrite {
                        st.remote_regions += 1;
                        st.remote_bytes += ev.data;
                    }
                    client |= ev.kind.is_remote();
                }
            }
            close(&mut epoch_lines, &mut st);
            st.client_threads += client as u64;
        }
        st.pm_footprint_bytes = pm_lines.len() as u64 * LINE_BYTES;
        for k in Kind::ALL {
            st.events_by_kind.insert(k.name().to_string(), by_kind[k as usize]);
        }
        Ok(st)
    }
}
