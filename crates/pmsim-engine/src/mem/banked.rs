//! The banked NVM model of docs/design.md §9 (the BROI seed's Table III): per memory controller,
//! `bank.count` banks with open-page row buffers.
//!
//! Why it exists: the default media model (latency + bandwidth per MC) cannot see bank
//! conflicts, so it cannot show what a BLP-aware persist scheduler gains. This model can: an
//! access that hits the bank's open row takes `bank.hit_ns`; one that must open another row
//! takes `bank.read_conflict_ns` / `bank.write_conflict_ns`; a bank serves one access at a time.
//!
//! What it guarantees: every bank's accesses form one non-overlapping timeline (a reservation
//! never starts before the bank is free), so bank busy time, row hits/conflicts and BLP are
//! exact. Scheduling (in [`super::mc::Mc`]) is FR-FCFS: row hits first, then oldest; reads
//! before writes except in write drain (queue above `drain_high_pct` until below
//! `drain_low_pct`), when the queued writes of a read's bank go first.
//!
//! Address mapping (`bank.mapping`; the seed's stride mapping, after FIRM, by default): the
//! MC-local address is split into row-sized groups; a group stays in one bank (row-buffer
//! locality for sequential writes) and consecutive groups go to consecutive banks (BLP for
//! larger footprints). `xor` (permutation-based interleaving) XORs that bank with the low bits
//! of the row index, as memory controllers do so that regions aligned to a large power of two
//! (per-thread heaps, logs) do not all begin in one bank; rows and row locality are unchanged.

use crate::config::{ns, Config};

/// Per-bank statistics (stable names in `docs/stats.md`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BankStats {
    pub row_hits: u64,
    pub row_conflicts: u64,
    pub reads: u64,
    pub writes: u64,
    pub busy_ps: u64,
}

pub struct Banks {
    count: usize,
    /// `bank.mapping = "xor"`.
    xor: bool,
    row_shift: u32,
    mc_gran: u64,
    mc_count: u64,
    hit_ps: u64,
    read_conflict_ps: u64,
    write_conflict_ps: u64,
    /// Open row per bank (`u64::MAX`: none yet).
    open_row: Vec<u64>,
    /// When each bank's last reservation ends.
    pub free_at: Vec<u64>,
    pub stats: Vec<BankStats>,
    read_cap: usize,
    /// Completion times of reads in service or waiting (sorted).
    reads_out: Vec<u64>,
    pub drain_high: usize,
    pub drain_low: usize,
    pub draining: bool,
    pub persist_at_media: bool,
    /// Disjoint, sorted busy intervals not yet behind `now`: their union is the time any bank
    /// is busy (BLP's denominator).
    union: Vec<(u64, u64)>,
    union_done_ps: u64,
    /// Accesses that waited because their bank was busy with another.
    pub bank_waits: u64,
    pub accesses: u64,
}

impl Banks {
    pub fn new(cfg: &Config) -> Banks {
        let n = cfg.bank.count;
        let q = cfg.bank.write_queue;
        let high = ((q as f64 * cfg.bank.drain_high_pct / 100.0).ceil() as usize).clamp(1, q);
        let low = ((q as f64 * cfg.bank.drain_low_pct / 100.0).floor() as usize).min(high - 1);
        Banks {
            count: n,
            xor: cfg.bank.mapping == "xor",
            row_shift: cfg.bank.row_bytes.trailing_zeros(),
            mc_gran: cfg.mc.interleave,
            mc_count: cfg.mc.count as u64,
            hit_ps: ns(cfg.bank.hit_ns),
            read_conflict_ps: ns(cfg.bank.read_conflict_ns),
            write_conflict_ps: ns(cfg.bank.write_conflict_ns),
            open_row: vec![u64::MAX; n],
            free_at: vec![0; n],
            stats: vec![BankStats::default(); n],
            read_cap: cfg.bank.read_queue,
            reads_out: Vec::with_capacity(cfg.bank.read_queue + 1),
            drain_high: high,
            drain_low: low,
            draining: false,
            persist_at_media: cfg.bank.persist_at == "media",
            union: Vec::with_capacity(2 * n),
            union_done_ps: 0,
            bank_waits: 0,
            accesses: 0,
        }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// (bank, row) of a line under the configured mapping.
    #[inline]
    pub fn locate(&self, line: u64) -> (usize, u64) {
        // Remove the MC-interleave bits: the address as this MC's own space sees it.
        let local = if self.mc_count > 1 {
            (line / (self.mc_gran * self.mc_count)) * self.mc_gran + line % self.mc_gran
        } else {
            line
        };
        let group = local >> self.row_shift;
        let n = self.count as u64;
        let (stride_bank, row) = (group % n, group / n);
        // XOR with the row's low bits is a bijection per row: (bank, row) still names one group.
        let bank = if self.xor { stride_bank ^ (row % n) } else { stride_bank };
        (bank as usize, row)
    }

    /// Whether an access to `row` of `bank` would hit the open row now.
    #[inline]
    pub fn is_hit(&self, bank: usize, row: u64) -> bool {
        self.open_row[bank] == row
    }

    /// Reserves `bank` for an access that was ready (apart from its bank) at `ready`, starting
    /// no earlier than `not_before`; returns (start, done). It counts as stalled by the bank if
    /// it starts after `ready`.
    pub fn reserve(&mut self, ready: u64, not_before: u64, bank: usize, row: u64, write: bool) -> (u64, u64) {
        let start = not_before.max(self.free_at[bank]);
        let hit = self.open_row[bank] == row;
        let lat = match (hit, write) {
            (true, _) => self.hit_ps,
            (false, true) => self.write_conflict_ps,
            (false, false) => self.read_conflict_ps,
        };
        self.open_row[bank] = row;
        let done = start + lat;
        self.free_at[bank] = done;
        let s = &mut self.stats[bank];
        if hit {
            s.row_hits += 1;
        } else {
            s.row_conflicts += 1;
        }
        if write {
            s.writes += 1;
        } else {
            s.reads += 1;
        }
        s.busy_ps += lat;
        self.accesses += 1;
        if start > ready {
            self.bank_waits += 1;
        }
        self.add_busy(start, done);
        (start, done)
    }

    /// The earliest time a read arriving at `now` may start (read-queue capacity).
    pub fn read_slot(&mut self, now: u64) -> u64 {
        self.reads_out.retain(|&t| t > now);
        if self.reads_out.len() < self.read_cap {
            now
        } else {
            self.reads_out[self.reads_out.len() - self.read_cap]
        }
    }

    pub fn read_reserved(&mut self, done: u64) {
        let i = self.reads_out.partition_point(|&t| t <= done);
        self.reads_out.insert(i, done);
    }

    fn add_busy(&mut self, s: u64, e: u64) {
        if e <= s {
            return;
        }
        let (mut s, mut e) = (s, e);
        // Merge with every interval it overlaps or touches.
        let mut i = self.union.partition_point(|iv| iv.1 < s);
        while i < self.union.len() && self.union[i].0 <= e {
            s = s.min(self.union[i].0);
            e = e.max(self.union[i].1);
            self.union.remove(i);
        }
        i = self.union.partition_point(|iv| iv.1 < s);
        self.union.insert(i, (s, e));
    }

    /// Folds busy intervals that ended by `now` into the total (every later reservation starts
    /// at or after `now`, so they can no longer merge).
    pub fn settle(&mut self, now: u64) {
        let k = self.union.partition_point(|iv| iv.1 <= now);
        if k > 0 {
            self.union_done_ps += self.union.drain(..k).map(|(s, e)| e - s).sum::<u64>();
        }
    }

    /// Time (ps) at least one bank was busy.
    pub fn any_busy_ps(&self) -> u64 {
        self.union_done_ps + self.union.iter().map(|(s, e)| e - s).sum::<u64>()
    }

    /// Bank-level parallelism: average number of banks busy while any is.
    pub fn blp(&self) -> f64 {
        let any = self.any_busy_ps();
        if any == 0 {
            0.0
        } else {
            self.stats.iter().map(|s| s.busy_ps).sum::<u64>() as f64 / any as f64
        }
    }

    /// The row `bank` has open (`u64::MAX`: none yet).
    pub fn open_row(&self, bank: usize) -> u64 {
        self.open_row[bank]
    }

    /// Latency of a write to `row` of `bank` if issued now (for schedulers' estimates).
    pub fn write_latency(&self, bank: usize, row: u64) -> u64 {
        if self.is_hit(bank, row) {
            self.hit_ps
        } else {
            self.write_conflict_ps
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stride_mapping_keeps_a_row_in_one_bank_and_strides_groups() {
        let mut cfg = Config::default();
        cfg.mc.count = 1;
        let b = Banks::new(&cfg);
        assert_eq!(b.locate(0), (0, 0));
        assert_eq!(b.locate(2047 & !63), (0, 0));
        assert_eq!(b.locate(2048), (1, 0));
        assert_eq!(b.locate(7 * 2048), (7, 0));
        assert_eq!(b.locate(8 * 2048), (0, 1));
    }

    #[test]
    fn xor_mapping_rotates_aligned_regions_across_banks_and_stays_a_bijection() {
        let mut cfg = Config::default();
        cfg.mc.count = 1;
        cfg.bank.mapping = "xor".into();
        let b = Banks::new(&cfg);
        // Row 0 as under stride; the first group of rows 1, 2, 3 (16 KiB apart: one per row of
        // all 8 banks) lands in banks 1, 2, 3 instead of all in bank 0.
        assert_eq!(b.locate(0), (0, 0));
        assert_eq!(b.locate(2048), (1, 0));
        assert_eq!([1, 2, 3].map(|r| b.locate(r * 8 * 2048)), [(1, 1), (2, 2), (3, 3)]);
        // Every (bank, row) names exactly one row-sized group, as under stride.
        let mut seen = std::collections::HashSet::new();
        for g in 0..8 * 64u64 {
            assert!(seen.insert(b.locate(g * 2048)), "group {g}");
        }
    }

    #[test]
    fn blp_counts_overlap_once() {
        let mut cfg = Config::default();
        cfg.mc.count = 1;
        let mut b = Banks::new(&cfg);
        // Two banks busy over the same 36 ns: BLP 2; a third access after both: BLP (3*36)/(72).
        b.reserve(0, 0, 0, 0, true);
        b.reserve(0, 0, 1, 0, true);
        assert!((b.blp() - 2.0 * 300.0 / 300.0).abs() < 1e-9);
        b.settle(1_000_000);
        b.reserve(1_000_000, 1_000_000, 0, 0, true);
        assert_eq!(b.any_busy_ps(), 300_000 + 36_000);
    }
}
