//! `pmsim trace stats`: what a trace contains, without simulating it.

use crate::event::{Kind, LINE_BYTES};
use crate::source::{Chunk, EventSource};
use crate::trace::{is_pm, PmRange};
use crate::TraceError;
use std::collections::BTreeMap;

/// Counts per thread and in total. Epochs are maximal runs of a thread's PM stores between
/// barriers (`ofence`/`dfence`), as the checker defines them (docs/design.md §6); in a legacy
/// x86 trace (no `ofence`/`dfence`/`strand`), between `sfence`/`mfence`, its only ordering, as
/// `pmsim analyze` and the buffered designs read it (docs/design.md §3, §8).
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
        // Epochs both ways; the trace's dialect, known at its end, picks one.
        let (mut neutral, mut x86) = (Epochs::default(), Epochs::default());
        let mut dialect = crate::dialect::DialectScan::default();
        for (t, src) in sources.iter_mut().enumerate() {
            let mut client = false;
            while src.next_chunk(&mut chunk)? {
                for ev in &chunk.events {
                    st.events += 1;
                    st.events_by_thread[t] += 1;
                    by_kind[ev.kind as usize] += 1;
                    dialect.see(ev.kind);
                    if (ev.kind.writes() || ev.kind.reads()) && is_pm(pm, ev.addr) {
                        pm_lines.insert(ev.addr / LINE_BYTES);
                    }
                    if ev.kind.writes() {
                        if is_pm(pm, ev.addr) {
                            st.pm_stores += 1;
                            st.pm_store_bytes += ev.size as u64;
                            neutral.lines.push(ev.addr & !(LINE_BYTES - 1));
                            x86.lines.push(ev.addr & !(LINE_BYTES - 1));
                        } else {
                            st.volatile_stores += 1;
                        }
                    }
                    if ev.kind.reads() {
                        st.loads += 1;
                        st.load_bytes += ev.size as u64;
                    }
                    if ev.kind.is_barrier() {
                        neutral.close();
                    }
                    if matches!(ev.kind, Kind::Sfence | Kind::Mfence) {
                        x86.close();
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
            neutral.close();
            x86.close();
            st.client_threads += client as u64;
        }
        let e = if dialect.dialect() == crate::Dialect::X86 { x86 } else { neutral };
        (st.epochs, st.single_line_epochs, st.epoch_lines) = (e.epochs, e.single_line, e.lines_sum);
        st.pm_footprint_bytes = pm_lines.len() as u64 * LINE_BYTES;
        for k in Kind::ALL {
            st.events_by_kind.insert(k.name().to_string(), by_kind[k as usize]);
        }
        Ok(st)
    }
}

/// Epoch counts of one reading of the barriers, over the threads in turn.
#[derive(Default)]
struct Epochs {
    epochs: u64,
    single_line: u64,
    lines_sum: u64,
    /// The open epoch's PM lines (with repeats).
    lines: Vec<u64>,
}

impl Epochs {
    fn close(&mut self) {
        if !self.lines.is_empty() {
            self.epochs += 1;
            self.lines.sort_unstable();
            self.lines.dedup();
            self.lines_sum += self.lines.len() as u64;
            self.single_line += (self.lines.len() == 1) as u64;
            self.lines.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn stats(body: &str) -> TraceStats {
        let t = Arc::new(crate::text::parse_str("s.trace", &format!("# pmsim trace v1\nthreads 1\n{body}")).unwrap());
        TraceStats::collect(&t.pm, &mut crate::source::VecSource::all(&t)).unwrap()
    }

    #[test]
    fn epochs_are_split_by_the_barriers_of_the_traces_dialect() {
        let legacy = "T0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 sfence\n\
                      T0 store 0x100000040 8 2\nT0 store 0x100000080 8 3\nT0 mfence\nT0 store 0x100000000 8 4\n";
        let s = stats(legacy);
        assert_eq!((s.epochs, s.single_line_epochs, s.epoch_lines), (3, 2, 4));
        // One ofence makes it design-neutral: its x86 fences split nothing.
        let s = stats(&format!("{legacy}T0 ofence\n"));
        assert_eq!((s.epochs, s.single_line_epochs, s.epoch_lines), (1, 0, 3));
    }
}
