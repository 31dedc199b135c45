//! The per-core persist buffer shared by BBB, HOPS and ASAP.
//!
//! Entries are 64 B lines with word masks, tagged with the epoch of the stores they hold. A store
//! coalesces into a not-yet-flushed entry of the same line and epoch; otherwise it needs a free
//! entry. Entries are freed when their flush is acknowledged, in any order (eager flushing
//! acknowledges out of order). Occupancy is tracked time-weighted for the average and the 99th
//! percentile (ASAP Fig 11).

use crate::mem::nvm::LineData;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// Waiting to be flushed.
    Queued,
    /// Sent to the MC; `early` if its epoch was not safe when sent.
    InFlight { early: bool },
}

#[derive(Clone, Copy, Debug)]
pub struct PbEntry {
    pub id: u64,
    pub data: LineData,
    pub epoch: u64,
    pub state: EntryState,
    /// An MC NACKed its flush: its retry takes the line out of that MC's Bloom filter.
    pub nacked: bool,
}

pub struct PersistBuffer {
    pub entries: VecDeque<PbEntry>,
    pub cap: usize,
    next_id: u64,
    /// Time (ps) spent at each occupancy.
    occ_time: Vec<u64>,
    last_change: u64,
    pub inserts: u64,
    pub coalesced: u64,
}

impl PersistBuffer {
    pub fn new(cap: usize) -> PersistBuffer {
        PersistBuffer {
            entries: VecDeque::with_capacity(cap),
            cap,
            next_id: 0,
            occ_time: vec![0; cap + 1],
            last_change: 0,
            inserts: 0,
            coalesced: 0,
        }
    }

    fn account(&mut self, now: u64) {
        let n = self.entries.len().min(self.cap);
        self.occ_time[n] += now.saturating_sub(self.last_change);
        self.last_change = now;
    }

    /// Whether a store to `line` in `epoch` fits (coalesces or has a free entry).
    pub fn admits(&self, line: u64, epoch: u64) -> bool {
        self.entries.len() < self.cap || self.coalescable(line, epoch).is_some()
    }

    /// Only the line's youngest entry may take a store: an older queued one (a flush NACKed
    /// back to `Queued` while a newer flush of the line is in flight) would carry the store
    /// ahead of that newer flush's older words, which its retry would then land on top of.
    fn coalescable(&self, line: u64, epoch: u64) -> Option<usize> {
        let i = self.entries.iter().rposition(|e| e.data.line == line)?;
        let e = &self.entries[i];
        (e.epoch == epoch && e.state == EntryState::Queued).then_some(i)
    }

    /// Adds a store's words; returns (entry id, whether it took a new entry).
    pub fn insert(&mut self, now: u64, data: &LineData, epoch: u64) -> (u64, bool) {
        self.inserts += 1;
        if let Some(i) = self.coalescable(data.line, epoch) {
            self.coalesced += 1;
            self.entries[i].data.merge(data);
            return (self.entries[i].id, false);
        }
        self.account(now);
        let id = self.next_id;
        self.next_id += 1;
        self.entries.push_back(PbEntry { id, data: *data, epoch, state: EntryState::Queued, nacked: false });
        (id, true)
    }

    /// Position of entry `id`: entries are appended with increasing ids and removed without
    /// reordering, so they stay sorted by id.
    #[inline]
    fn position(&self, id: u64) -> Option<usize> {
        self.entries.binary_search_by_key(&id, |e| e.id).ok()
    }

    pub fn get(&self, id: u64) -> Option<&PbEntry> {
        self.entries.get(self.position(id)?)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut PbEntry> {
        let i = self.position(id)?;
        self.entries.get_mut(i)
    }

    /// Frees the entry `id` (its flush was acknowledged).
    pub fn remove(&mut self, now: u64, id: u64) -> Option<PbEntry> {
        let i = self.position(id)?;
        self.account(now);
        self.entries.remove(i)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn holds_line(&self, line: u64) -> bool {
        self.entries.iter().any(|e| e.data.line == line)
    }

    /// Time-weighted average occupancy up to `now`.
    pub fn occupancy_avg(&self, now: u64) -> f64 {
        let (mut sum, mut total) = (0u128, 0u128);
        for (n, &t) in self.occ_time.iter().enumerate() {
            let t = t as u128
                + if n == self.entries.len().min(self.cap) { now.saturating_sub(self.last_change) as u128 } else { 0 };
            sum += n as u128 * t;
            total += t;
        }
        if total == 0 {
            0.0
        } else {
            sum as f64 / total as f64
        }
    }

    /// Time-weighted percentile (`q` in 0..=1) of occupancy up to `now`.
    pub fn occupancy_quantile(&self, now: u64, q: f64) -> usize {
        let cur = self.entries.len().min(self.cap);
        let times: Vec<u128> = self
            .occ_time
            .iter()
            .enumerate()
            .map(|(n, &t)| t as u128 + if n == cur { now.saturating_sub(self.last_change) as u128 } else { 0 })
            .collect();
        let total: u128 = times.iter().sum();
        if total == 0 {
            return 0;
        }
        let target = (total as f64 * q).ceil() as u128;
        let mut acc = 0u128;
        for (n, t) in times.iter().enumerate() {
            acc += t;
            if acc >= target {
                return n;
            }
        }
        self.cap
    }
}

/// Sums occupancy statistics over cores into `out` (names shared by every PB design).
/// The persist buffers of the cores that ran a thread (cores with trace events), wherever they
/// sit: an idle core's buffer is not a thread's (counting the first k cores instead reported an
/// idle core's empty buffer when an earlier thread had no events, tester P's P2).
pub fn active_pbs<'a>(
    m: &crate::machine::Machine,
    pbs: impl Iterator<Item = &'a PersistBuffer>,
) -> Vec<&'a PersistBuffer> {
    pbs.zip(&m.cores).filter(|(_, c)| c.stats.events > 0).map(|(p, _)| p).collect()
}

pub fn occupancy_stats(pbs: &[&PersistBuffer], now: u64, out: &mut super::DesignStats) {
    let n = pbs.len().max(1) as f64;
    out.insert("pb_occupancy_avg".into(), pbs.iter().map(|p| p.occupancy_avg(now)).sum::<f64>() / n);
    out.insert(
        "pb_occupancy_p99".into(),
        pbs.iter().map(|p| p.occupancy_quantile(now, 0.99)).max().unwrap_or(0) as f64,
    );
    out.insert("pb_inserts".into(), pbs.iter().map(|p| p.inserts).sum::<u64>() as f64);
    out.insert("pb_coalesced".into(), pbs.iter().map(|p| p.coalesced).sum::<u64>() as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries are found by id (binary search) however they were freed: out of order, after
    /// coalescing, and with ids that are gone.
    #[test]
    fn entries_are_found_by_id_after_out_of_order_frees() {
        let mut pb = PersistBuffer::new(16);
        let mut ids = Vec::new();
        for i in 0..12u64 {
            let (id, new) = pb.insert(i, &LineData::new(i * 64), i / 3);
            assert!(new);
            ids.push(id);
        }
        // A store to a queued line of the same epoch coalesces and keeps the entry's id.
        assert_eq!(pb.insert(20, &LineData::new(11 * 64), 3), (ids[11], false));
        let mut live: Vec<u64> = ids.clone();
        for &gone in &[ids[5], ids[0], ids[11], ids[7], ids[6]] {
            let e = pb.remove(30, gone).expect("live entry");
            assert_eq!(e.id, gone);
            live.retain(|&x| x != gone);
            assert!(pb.remove(31, gone).is_none(), "freed twice");
            assert!(pb.get_mut(gone).is_none());
            for &id in &live {
                assert_eq!(pb.get_mut(id).map(|e| e.id), Some(id));
            }
        }
        assert!(pb.get_mut(1000).is_none());
        assert_eq!(pb.len(), live.len());
    }
}
