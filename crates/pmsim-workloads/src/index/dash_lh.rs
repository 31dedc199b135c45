//! Dash-LH (Lu et al., VLDB'20): Dash's linear hashing.
//!
//! Same segments, buckets and insert as Dash-EH ([`super::dash`]); the directory is a fixed
//! array of segment pointers plus one 8 B word (level, next) that linear hashing advances
//! atomically. A full segment triggers the expansion of segment `next` (not necessarily the full
//! one; the insert retries until it fits): under the expansion lock (an `rmw` in PM) and all of the
//! segment's bucket locks, copy the items whose hash at level + 1 selects the new segment into a
//! new segment and `ofence`; store its directory entry and `ofence`; advance (level, next) with one
//! 8 B store and `ofence`; clear the moved items' bits in the old segment and `ofence`; unlock.
//!
//! Synchronisation: (level, next) is advanced by a `release` and read by an `acquire` (an atomic
//! word in Dash), so an operation that finds a new segment through it sees the expansion's stores.
//!
//! Recovery: (level, next) gives the segment count; each segment's live items are those whose
//! linear-hashing address is that segment (stale copies left by an expansion caught before the
//! bit clearing are ignored); version locks are reset.
//!
//! Simplification: no overflow-bucket chains beyond the two stash buckets (an overflowing
//! segment waits for the expansion to reach it).

use super::common::*;
use super::dash::Geo;
use crate::ctx::{Ctx, Gen};
use crate::params::{int, ParamSpec, Params};
use crate::recovery::{piece, DfenceDone, PieceCache, Recovery, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;
use rustc_hash::FxHashSet;

pub static DASH_LH: WorkloadSpec = WorkloadSpec {
    name: "dash-lh",
    description: "Dash linear hashing: Dash buckets; expansion copies segment `next`, links it, advances (level,next) in one store",
    params: PARAMS,
    generate,
};

const LOCK: u64 = 8;
const DIR_ENTRIES: u64 = 64;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "initial_segments",
        default: "4",
        unit: "segments",
        range: int(1, 4096),
        help: "segments at level 0 (power of two)",
    },
    ParamSpec {
        name: "max_segments",
        default: "65536",
        unit: "segments",
        range: int(2, 1 << 24),
        help: "directory capacity",
    },
    ParamSpec {
        name: "buckets",
        default: "64",
        unit: "buckets",
        range: int(4, 4096),
        help: "normal buckets per segment (power of two >= 4), plus 2 stash",
    },
    COMPUTE_PARAM,
];

#[derive(Clone, Copy)]
struct Lh {
    dir: u64,
    n0: u64,
    cap: u64,
    geo: Geo,
}

impl Lh {
    /// Linear-hashing address of key word `k` (bits above those that pick the bucket).
    fn addr(&self, k: u64, meta: u64) -> u64 {
        let (level, next) = (meta >> 32, meta & 0xffff_ffff);
        let g = k >> HASH_SHIFT;
        let i = g & ((self.n0 << level) - 1);
        if i < next {
            g & ((self.n0 << (level + 1)) - 1)
        } else {
            i
        }
    }
    fn entry(&self, i: u64) -> u64 {
        self.dir + DIR_ENTRIES + 8 * i
    }

    fn expand(&self, c: &mut Ctx<'_>) {
        let geo = self.geo;
        c.lock(self.dir + LOCK);
        let meta = c.load_u64(self.dir);
        let (level, next) = (meta >> 32, meta & 0xffff_ffff);
        let span = self.n0 << level;
        let ni = next + span;
        assert!(ni < self.cap, "dash-lh directory full: raise max_segments");
        let old = c.load_u64(self.entry(next));
        let locks = geo.lock_all(c, old);
        let new = c.alloc_pm(geo.seg_bytes(), 64);
        let mask = (self.n0 << (level + 1)) - 1;
        let masks = geo.split_copy(c, old, new, |k| (k >> 24) & mask == ni);
        c.ofence();
        c.store_u64(self.entry(ni), new);
        c.ofence();
        let nm = if next + 1 == span { (level + 1) << 32 } else { (level << 32) | (next + 1) };
        c.release_value(self.dir, nm);
        c.ofence();
        geo.clear_moved(c, old, &masks);
        c.ofence();
        geo.unlock_all(c, old, &locks);
        c.unlock(self.dir + LOCK);
    }

    fn segment(&self, c: &mut Ctx<'_>, w: u64) -> u64 {
        let meta = c.acquire(self.dir);
        c.load_u64(self.entry(self.addr(w, meta)))
    }
}

impl Index for Lh {
    fn insert(&mut self, c: &mut Ctx<'_>, w: u64, rec: u64) {
        loop {
            let seg = self.segment(c, w);
            if self.geo.insert(c, seg, w, rec) {
                return;
            }
            self.expand(c);
        }
    }
    fn search(&mut self, c: &mut Ctx<'_>, w: u64) -> Option<u64> {
        let seg = self.segment(c, w);
        self.geo.search(c, seg, w)
    }
}

fn generate(p: &Params) -> Generated {
    let geo = Geo { nb: p.get("buckets").clamp(4, 1 << 12).next_power_of_two() };
    let n0 = p.get("initial_segments").clamp(1, 1 << 12).next_power_of_two();
    let cap = p.get("max_segments").clamp(2 * n0, 1 << 24);
    let mut g = Gen::new(p);
    let root = g.heap.alloc_pm(64, 64);
    let dir = g.heap.alloc_pm(DIR_ENTRIES + 8 * cap, 64);
    let lh = Lh { dir, n0, cap, geo };
    {
        let mut c = g.ctx(0);
        let e: Vec<u8> = (0..n0).flat_map(|_| c.alloc_pm(geo.seg_bytes(), 64).to_le_bytes()).collect();
        c.store(lh.entry(0), &e);
        c.ofence();
        c.store_u64(root, dir);
        c.dfence();
    }
    let mut ix = lh;
    let (trace, truth) = run(p, g, &mut ix, Mix::default());
    Generated { trace, recovery: Box::new(LhRecovery { root, lh, truth }) }
}

struct LhRecovery {
    root: u64,
    lh: Lh,
    truth: Truth,
}

impl Recovery for LhRecovery {
    /// One piece per segment (each bucket a nested piece), verified against the truth for the
    /// keys it owns: linear hashing gives segment i the keys whose hash's low bits are i, a range
    /// of [`KeyOrder::LowBits`].
    fn check_with(&self, img: &MemImage, dfence_done: &DfenceDone, pieces: &mut dyn PieceCache) -> R<RecoveryReport> {
        let lh = self.lh;
        let dir = img.read_u64(self.root);
        if dir == 0 {
            return self.truth.verify(img, &[], dfence_done);
        }
        if dir != lh.dir {
            return err(format!("root points to {dir:#x}, not the directory"));
        }
        let meta = img.read_u64(dir);
        let (level, next) = (meta >> 32, meta & 0xffff_ffff);
        if level > 24 || next >= lh.n0 << level || (lh.n0 << level) + next > lh.cap {
            return err(format!("bad (level, next) = ({level}, {next})"));
        }
        let order = KeyOrder::LowBits(HASH_SHIFT);
        let bits = lh.n0.trailing_zeros() + level as u32;
        let mut seen = FxHashSet::default();
        let mut parts = Vec::new();
        for i in 0..(lh.n0 << level) + next {
            let seg = img.read_u64(lh.entry(i));
            if seg == 0 {
                return err(format!("segment {i} missing"));
            }
            guard(&mut seen, seg, "segment")?;
            let part = piece(pieces, &[SEGMENT, seg, i, meta], |c, d| -> R<Part> {
                let mut found = Vec::new();
                let item = |k, v| self.truth.check_item(img, k, v);
                let keep = |k| lh.addr(k, meta) == i;
                lh.geo.items_pieces(img, seg, [i, meta], keep, c, BUCKET, item, &mut found)?;
                // Segments split at this level (below `next`, and their images above the
                // level's count) are addressed by one more bit.
                let m = if i < next || i >= lh.n0 << level { bits + 1 } else { bits };
                Ok(self.truth.verify_checked_in(order, &found, KeyOrder::low_bits(i, m), d))
            });
            match &*part {
                Ok(_) => parts.push(part),
                Err(e) => return Err(e.clone()),
            }
        }
        self.truth.combine(parts.iter().filter_map(|p| p.as_ref().as_ref().ok()), dfence_done)
    }
}

/// Piece tags (see [`crate::recovery::piece`]).
const SEGMENT: u64 = 0;
const BUCKET: u64 = 1;
/// [`Lh::addr`] hashes the key's bits from this one up.
const HASH_SHIFT: u32 = 24;
