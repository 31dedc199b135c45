//! Private L1/L2 per core, a shared inclusive LLC, and the directory: access latency by function
//! call, no events (ZSim style).
//!
//! The LLC is inclusive: evicting a line from it back-invalidates private copies. L2 is
//! inclusive of L1. Latencies add up level by level; a line held modified by another core costs
//! one extra on-chip hop (the forward); invalidating other sharers costs one hop.

use super::cache::Cache;
use super::coherence::{Conflict, DirEntry, Directory, NO_CORE};
use crate::config::{ns, Config};

/// What an access needs beyond the caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Latency through the caches and the directory, in ps.
    pub latency: u64,
    /// The line must be read from memory (DRAM or PM) after `latency`.
    pub mem_read: bool,
}

pub struct Hierarchy {
    pub l1: Vec<Cache>,
    pub l2: Vec<Cache>,
    pub llc: Cache,
    pub dir: Directory,
    l1_ps: u64,
    l2_ps: u64,
    llc_ps: u64,
    hop_ps: u64,
    /// Lines evicted from the LLC since last drained by the machine: (line, was dirty).
    pub llc_evictions: Vec<(u64, bool)>,
    /// Dirty lines a core's private caches gave up: (core, line).
    pub private_evictions: Vec<(usize, u64)>,
    /// Conflicts found by the last access.
    pub conflicts: Vec<Conflict>,
    /// The perform order of directory-visible accesses: each takes the next stamp (see
    /// [`Hierarchy::stamp`]).
    stamp: u64,
    /// The designs are being shown the conflicts of the latest access (see [`Hierarchy::stamp`]).
    pub ordering_conflicts: bool,
    /// Per core: until when a line it holds may still be arriving from memory (the latest
    /// pending fill it took). A private hit before then looks the line's fill up, so a load of a
    /// line the store buffer's prefetch is still bringing in waits for the data; after it, hits
    /// need no directory look-up.
    fill_pending_until: Vec<u64>,
}

impl Hierarchy {
    pub fn new(cfg: &Config) -> Hierarchy {
        let n = cfg.core.count;
        let seed = cfg.sim.seed;
        Hierarchy {
            l1: (0..n)
                .map(|i| Cache::new(cfg.l1.size_kib, cfg.l1.ways, &cfg.l1.replacement, seed ^ (i as u64 * 31 + 1)))
                .collect(),
            l2: (0..n)
                .map(|i| Cache::new(cfg.l2.size_kib, cfg.l2.ways, &cfg.l2.replacement, seed ^ (i as u64 * 37 + 2)))
                .collect(),
            llc: Cache::new(cfg.llc.size_kib, cfg.llc.ways, &cfg.llc.replacement, seed ^ 3),
            dir: Directory::default(),
            l1_ps: ns(cfg.l1.latency_ns),
            l2_ps: ns(cfg.l2.latency_ns),
            llc_ps: ns(cfg.llc.latency_ns),
            hop_ps: ns(cfg.noc.hop_ns),
            llc_evictions: Vec::new(),
            private_evictions: Vec::new(),
            conflicts: Vec::new(),
            stamp: 0,
            ordering_conflicts: false,
            fill_pending_until: vec![0; n],
        }
    }

    fn drop_private(&mut self, core: usize, line: u64) {
        self.l1[core].invalidate(line);
        let e = self.dir.entry(line);
        e.sharers &= !(1u64 << core);
        if e.owner as usize == core {
            e.owner = NO_CORE;
            if e.dirty {
                self.private_evictions.push((core, line));
            }
        }
    }

    /// Installs `line` in `core`'s L2 and L1, handling victims.
    fn fill_private(&mut self, core: usize, line: u64) {
        if let Some(v) = self.l2[core].fill(line) {
            self.drop_private(core, v);
        }
        if let Some(v) = self.l1[core].fill(line) {
            if !self.l2[core].contains(v) {
                self.drop_private(core, v);
            }
        }
    }

    fn fill_llc(&mut self, line: u64) {
        if let Some(v) = self.llc.fill(line) {
            let e = self.dir.entry(v);
            let mut s = e.sharers;
            let dirty = e.dirty;
            e.sharers = 0;
            e.owner = NO_CORE;
            e.dirty = false;
            while s != 0 {
                let c = s.trailing_zeros() as usize;
                s &= s - 1;
                self.l1[c].invalidate(v);
                self.l2[c].invalidate(v);
            }
            self.llc_evictions.push((v, dirty));
        }
    }

    /// A load by `core` at `now`. Conflicts with other cores' writes land in `self.conflicts`.
    pub fn load(&mut self, core: usize, line: u64, now: u64) -> Access {
        self.read(core, line, now, true)
    }

    /// The store buffer's read-for-ownership prefetch: brings the line into `core`'s caches
    /// (exclusive if nobody else holds it) without performing anything, so it detects no
    /// conflicts; ownership is granted when the store reaches the head (`store`).
    pub fn prefetch(&mut self, core: usize, line: u64, now: u64) -> Access {
        self.read(core, line, now, false)
    }

    /// Records when a fill from memory, requested by `core`, brings `line` on chip.
    pub fn set_ready(&mut self, core: usize, line: u64, t: u64) {
        let e = self.dir.entry(line);
        e.ready_at = e.ready_at.max(t);
        self.fill_pending_until[core] = self.fill_pending_until[core].max(t);
    }

    /// The latency of a private hit at `now`: the hit's own, or until the line's pending fill
    /// lands (the line is installed when the fill is requested).
    #[inline]
    fn private_hit(&self, core: usize, line: u64, now: u64, lat: u64) -> u64 {
        if now >= self.fill_pending_until[core] {
            return lat;
        }
        self.dir.lines.get(&line).map_or(lat, |e| lat.max(e.ready_at.saturating_sub(now)))
    }

    /// The stamp an epoch opened now takes: accesses that performed before have at most this
    /// one, later ones a larger one, even within one picosecond, so a design can tell which of
    /// its epochs a conflicting access belonged to. While the conflicts of an access are shown
    /// to the designs, the epochs they open come before that access (it is ordered after
    /// them): one less than its stamp.
    #[inline]
    pub fn stamp(&self) -> u64 {
        self.stamp - self.ordering_conflicts as u64
    }

    #[inline]
    fn next_stamp(&mut self) -> u64 {
        self.stamp += 1;
        self.stamp
    }

    fn read(&mut self, core: usize, line: u64, now: u64, performs: bool) -> Access {
        self.conflicts.clear();
        let mut lat = self.l1_ps;
        if self.l1[core].access(line) {
            if performs {
                self.first_read_of_held_line(core, line);
            }
            return Access { latency: self.private_hit(core, line, now, lat), mem_read: false };
        }
        lat += self.l2_ps;
        if self.l2[core].access(line) {
            if let Some(v) = self.l1[core].fill(line) {
                if !self.l2[core].contains(v) {
                    self.drop_private(core, v);
                }
            }
            if performs {
                self.first_read_of_held_line(core, line);
            }
            return Access { latency: self.private_hit(core, line, now, lat), mem_read: false };
        }
        lat += self.llc_ps;
        let in_llc = self.llc.access(line);
        let stamp = if performs { self.next_stamp() } else { 0 };
        // One directory lookup: the fills below only touch other lines' entries.
        let d = self.dir.lines.entry(line).or_default();
        let e: DirEntry = *d;
        if performs {
            Directory::load_conflicts(&e, core, &mut self.conflicts, line);
        }
        // Data still being filled from memory arrives when it arrives.
        lat = lat.max(e.ready_at.saturating_sub(now));
        self.fill_pending_until[core] = self.fill_pending_until[core].max(e.ready_at);
        let mut mem_read = false;
        let me = 1u64 << core;
        if e.owner != NO_CORE && e.owner as usize != core {
            // Forward to the owner, which downgrades to shared.
            lat += self.hop_ps;
            self.dir.forwards += 1;
            d.owner = NO_CORE;
            d.sharers |= me;
        } else {
            mem_read = !in_llc;
            // Exclusive grant when nobody else holds it (MESI E).
            if d.sharers & !me == 0 {
                d.owner = core as u8;
            }
            d.sharers |= me;
        }
        if performs {
            d.readers |= me;
            d.read_seq = stamp;
        }
        if !in_llc {
            self.fill_llc(line);
        }
        self.fill_private(core, line);
        Access { latency: lat, mem_read }
    }

    /// A load hit on a line the core holds without having read it since the last write: the
    /// store buffer's prefetch brought it in, which detects nothing. The first read performs
    /// there, so it is a reader from now on (WAR with the next writer) and conflicts with the
    /// line's last writer (RAW), as a miss would. Later hits find the bit set: one directory
    /// look-up per hit, no conflict.
    fn first_read_of_held_line(&mut self, core: usize, line: u64) {
        let me = 1u64 << core;
        let stamp = self.next_stamp();
        let Some(d) = self.dir.lines.get_mut(&line) else { return };
        // Every read counts: a later writer is ordered after the reader's latest read.
        d.read_seq = stamp;
        if d.readers & me != 0 {
            return;
        }
        let e: DirEntry = *d;
        d.readers |= me;
        Directory::load_conflicts(&e, core, &mut self.conflicts, line);
    }

    /// A store by `core` at `now`, performing: ownership is granted now and the line ends up
    /// owned, dirty, last written by `core`; the latency is how long the grant occupies the store
    /// buffer's head. Conflicts (RAW/WAW with the last writer, WAR with readers since) land in
    /// `self.conflicts`.
    pub fn store(&mut self, core: usize, line: u64, now: u64) -> Access {
        self.conflicts.clear();
        let me = 1u64 << core;
        let stamp = self.next_stamp();
        // One directory lookup: the line ends up owned, dirty, last written by `core`; the fills
        // below only touch other lines' entries.
        let d = self.dir.lines.entry(line).or_default();
        let e: DirEntry = *d;
        d.owner = core as u8;
        d.sharers = me;
        d.last_writer = core as u8;
        d.readers = 0;
        d.dirty = true;
        d.written_seq = stamp;
        Directory::store_conflicts(&e, core, &mut self.conflicts, line);
        let mut lat = self.l1_ps;
        lat = lat.max(e.ready_at.saturating_sub(now));
        let mut mem_read = false;
        let owned = e.owner as usize == core;
        if owned && self.l1[core].access(line) {
            // M/E hit.
        } else if owned && self.l2[core].access(line) {
            lat += self.l2_ps;
            self.fill_private(core, line);
        } else {
            if !owned {
                // A write to a line the core does not own misses both private levels (even a
                // shared copy there cannot take it): counted, as the LLC below counts the
                // request, so LLC accesses never exceed L2 misses.
                self.l1[core].misses += 1;
                self.l2[core].misses += 1;
            }
            lat += self.l2_ps + self.llc_ps;
            let in_llc = self.llc.access(line);
            if e.owner != NO_CORE && e.owner as usize != core {
                lat += self.hop_ps;
                self.dir.forwards += 1;
            } else if e.sharers & !me != 0 {
                lat += self.hop_ps;
            }
            let mut others = e.sharers & !me;
            while others != 0 {
                let c = others.trailing_zeros() as usize;
                others &= others - 1;
                self.l1[c].invalidate(line);
                self.l2[c].invalidate(line);
                self.dir.invalidations += 1;
            }
            if !in_llc {
                mem_read = true;
                self.fill_llc(line);
            }
            self.fill_private(core, line);
        }
        Access { latency: lat, mem_read }
    }

    /// A non-temporal store: invalidates every cached copy (the data goes straight to memory). A
    /// copy dirty in some cache is written back first (reported as a dirty LLC eviction), as x86
    /// evicts it: the words other stores left there must not vanish with the invalidation.
    pub fn nt_store(&mut self, core: usize, line: u64) -> Access {
        self.conflicts.clear();
        let stamp = self.next_stamp();
        let d = self.dir.lines.entry(line).or_default();
        let e: DirEntry = *d;
        if e.dirty {
            self.llc_evictions.push((line, true));
        }
        d.owner = NO_CORE;
        d.sharers = 0;
        d.last_writer = core as u8;
        d.readers = 0;
        d.dirty = false;
        d.written_seq = stamp;
        Directory::store_conflicts(&e, core, &mut self.conflicts, line);
        let mut s = e.sharers;
        while s != 0 {
            let c = s.trailing_zeros() as usize;
            s &= s - 1;
            self.l1[c].invalidate(line);
            self.l2[c].invalidate(line);
        }
        Access { latency: self.l1_ps, mem_read: false }
    }

    /// Latency for `core` to reach `line` to write it back (clwb): where it sits in the hierarchy.
    pub fn locate(&self, core: usize, line: u64) -> u64 {
        if self.l1[core].contains(line) {
            self.l1_ps
        } else if self.l2[core].contains(line) {
            self.l1_ps + self.l2_ps
        } else {
            self.l1_ps + self.l2_ps + self.llc_ps
        }
    }

    /// The extra on-chip hop when `line` is held modified by a core other than `core` (a clwb
    /// snoops the owner's cache for the data).
    pub fn remote_owner_hop(&self, core: usize, line: u64) -> u64 {
        match self.dir.get(line) {
            Some(e) if e.owner != NO_CORE && e.owner as usize != core && e.dirty => self.hop_ps,
            _ => 0,
        }
    }

    /// Marks `line` clean everywhere (after a write-back); returns whether it was dirty.
    pub fn clean(&mut self, line: u64) -> bool {
        match self.dir.lines.get_mut(&line) {
            Some(e) if e.dirty => {
                e.dirty = false;
                true
            }
            _ => false,
        }
    }

    /// Drops `line` from every cache (clflush): returns whether it was dirty.
    pub fn flush_out(&mut self, line: u64) -> bool {
        let n = self.l1.len();
        for c in 0..n {
            self.l1[c].invalidate(line);
            self.l2[c].invalidate(line);
        }
        self.llc.invalidate(line);
        let e = self.dir.entry(line);
        let dirty = e.dirty;
        e.dirty = false;
        e.owner = NO_CORE;
        e.sharers = 0;
        dirty
    }
}
