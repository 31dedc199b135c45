//! Dash-EH (Lu et al., VLDB'20): Dash's extendible hashing.
//!
//! Buckets, insert and split copy are in [`super::dash`]. Extendible-hashing split, in Dash's
//! order: lock all buckets; set the segment's state to splitting and `ofence`; initialise the new
//! segment (local depth + 1, new pattern, splitting state, next = old next) and `ofence`; link it
//! as the old segment's `next` and `ofence`; copy the moving items and `ofence`; store the old
//! segment's new pattern and `ofence` (the mark that the copy is complete); clear the moved items'
//! bits in the old segment and `ofence`; update the directory (upper half of the segment's entries, or
//! a doubled directory written, `ofence`d and swapped in by the root pointer) and `ofence`; bump
//! the old local depth and `ofence`; reset both states and `ofence`; unlock.
//!
//! Synchronisation: the directory is updated under its lock (Dash's `lock_dir`, a word of the
//! directory's header line here), the root pointer is swapped by a `release`, and an operation
//! finds its segment after an `acquire` of the root and of the directory's lock word, so it sees
//! every directory update (and every segment published by one) that came before it; Dash reads the
//! directory without locking, relying on x86-TSO loads being acquires.
//!
//! Recovery (Dash's, eager instead of lazy): walk the directory as CCEH does (a segment whose
//! entries imply a deeper local depth gets it); a segment still in the splitting state also
//! contributes the matching items of its `next` segment (the copy may be the only one left once the
//! old bits were cleared) once its pattern word shows the copy finished (the pattern word carries
//! its depth, so the store after the copy's `ofence` is visible even when the pattern value is
//! unchanged); a partial copy is ignored, every item still being in the old segment then; version
//! locks are reset.
//!
//! Built on [`crate::blocks::segment`] (directory doubling, in-place update, recovery walk).
//! Simplifications: those of [`super::dash`]; no directory halving or segment merge (the
//! benchmark only inserts and searches).

use super::common::*;
use super::dash::{Geo, LD, NEXT, PATTERN, SPLITTING, STATE};
use crate::blocks::segment::{point_upper_half, walk_pieces, write_doubled};
use crate::ctx::{Ctx, Gen};
use crate::params::{int, ParamSpec, Params};
use crate::recovery::{DfenceDone, PieceCache, Recovery, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;

pub static DASH_EH: WorkloadSpec = WorkloadSpec {
    name: "dash-eh",
    description: "Dash extendible hashing: pair, ofence, fingerprint+bitmap, ofence; stash, displacement; state-logged segment split",
    params: PARAMS,
    generate,
};

const DIR_ENTRIES: u64 = 64;
/// The directory's lock word (its header line: depth at 0).
const DIR_LOCK: u64 = 8;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "initial_depth",
        default: "2",
        unit: "bits",
        range: int(0, 12),
        help: "initial global depth (2^d segments)",
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

struct Ix {
    root: u64,
    geo: Geo,
}

impl Ix {
    fn split(&mut self, c: &mut Ctx<'_>, seg: u64, w: u64) {
        let geo = self.geo;
        let ld = c.load_u64(seg + LD);
        let locks = geo.lock_all(c, seg);
        c.store_u64(seg + STATE, SPLITTING);
        c.ofence();
        let new = c.alloc_pm(geo.seg_bytes(), 64);
        let pat = top(w, ld);
        let old_next = c.load_u64(seg + NEXT);
        c.store(new, &[ld + 1, pattern(ld + 1, (pat << 1) | 1), SPLITTING, old_next].map(u64::to_le_bytes).concat());
        c.ofence();
        c.store_u64(seg + NEXT, new);
        c.ofence();
        let masks = geo.split_copy(c, seg, new, |k| top(k, ld + 1) & 1 == 1);
        c.ofence();
        // Ordered after the copy and before the old bits are cleared: recovery reads the new
        // segment's items exactly when this is there.
        c.store_u64(seg + PATTERN, pattern(ld + 1, pat << 1));
        c.ofence();
        geo.clear_moved(c, seg, &masks);
        c.ofence();
        let dir = c.acquire(self.root);
        c.lock(dir + DIR_LOCK);
        let depth = c.load_u64(dir);
        let n = 1u64 << depth;
        let x = top(w, depth);
        if ld == depth {
            let nd = write_doubled(c, dir + DIR_ENTRIES, DIR_ENTRIES, n, x, new);
            c.store_u64(nd, depth + 1);
            c.ofence();
            c.release_value(self.root, nd);
        } else {
            point_upper_half(c, dir + DIR_ENTRIES, depth, ld, x, new);
        }
        c.ofence();
        c.unlock(dir + DIR_LOCK);
        c.store_u64(seg + LD, ld + 1);
        c.ofence();
        c.store_u64(seg + STATE, 0);
        c.store_u64(new + STATE, 0);
        c.ofence();
        geo.unlock_all(c, seg, &locks);
    }

    fn segment(&self, c: &mut Ctx<'_>, w: u64) -> u64 {
        let dir = c.acquire(self.root);
        c.acquire(dir + DIR_LOCK);
        let depth = c.load_u64(dir);
        c.load_u64(dir + DIR_ENTRIES + 8 * top(w, depth))
    }
}

/// A segment's hash pattern word: the local depth it belongs to (high half) and the pattern.
fn pattern(depth: u64, pat: u64) -> u64 {
    (depth << 32) | pat
}

impl Index for Ix {
    fn insert(&mut self, c: &mut Ctx<'_>, w: u64, rec: u64) {
        loop {
            let seg = self.segment(c, w);
            if self.geo.insert(c, seg, w, rec) {
                return;
            }
            self.split(c, seg, w);
        }
    }
    fn search(&mut self, c: &mut Ctx<'_>, w: u64) -> Option<u64> {
        let seg = self.segment(c, w);
        self.geo.search(c, seg, w)
    }
}

fn generate(p: &Params) -> Generated {
    let geo = Geo { nb: p.get("buckets").clamp(4, 1 << 12).next_power_of_two() };
    let depth = p.get("initial_depth").min(12);
    let mut g = Gen::new(p);
    let root = g.heap.alloc_pm(64, 64);
    {
        let mut c = g.ctx(0);
        let n = 1u64 << depth;
        let dir = c.alloc_pm(DIR_ENTRIES + 8 * n, 64);
        let mut e = Vec::new();
        for i in 0..n {
            let seg = c.alloc_pm(geo.seg_bytes(), 64);
            c.store(seg, &[depth.to_le_bytes(), pattern(depth, i).to_le_bytes()].concat());
            e.extend_from_slice(&seg.to_le_bytes());
        }
        c.store(dir + DIR_ENTRIES, &e);
        c.store_u64(dir, depth);
        c.ofence();
        c.store_u64(root, dir);
        c.dfence();
    }
    let mut ix = Ix { root, geo };
    let (trace, truth) = run(p, g, &mut ix, Mix::default());
    Generated { trace, recovery: Box::new(EhRecovery { root, geo, truth }) }
}

/// Piece tags (see [`crate::recovery::piece`]).
const SEGMENT: u64 = 0;
const BUCKET: u64 = 1;

struct EhRecovery {
    root: u64,
    geo: Geo,
    truth: Truth,
}

impl Recovery for EhRecovery {
    /// One piece per segment (its items, verified against the truth for the keys it owns).
    fn check_with(&self, img: &MemImage, dfence_done: &DfenceDone, pieces: &mut dyn PieceCache) -> R<RecoveryReport> {
        let dir = img.read_u64(self.root);
        if dir == 0 {
            return self.truth.verify(img, &[], dfence_done);
        }
        let depth = img.read_u64(dir);
        if depth > 32 {
            return err(format!("directory depth {depth}"));
        }
        let parts = walk_pieces(img, dir + DIR_ENTRIES, depth, pieces, SEGMENT, |o, c, d| {
            let ld = img.read_u64(o.seg + LD);
            if ld > o.ld {
                return err(format!("segment {:#x}: local depth {ld} > {}", o.seg, o.ld));
            }
            let keep = |k: u64| top(k, o.ld) == o.pattern;
            // Each bucket a piece of its own, its items checked against the truth inside it.
            let item = |k, v| self.truth.check_item(img, k, v);
            let mut found = Vec::new();
            let filter = [o.ld, o.pattern];
            self.geo.items_pieces(img, o.seg, filter, keep, c, BUCKET, item, &mut found)?;
            // Mid-split, the new segment (linked by NEXT) is authoritative only once the copy
            // into it is persistent, which the old segment's new pattern (tagged with depth
            // ld+1) shows; before that, every item is still in the old segment.
            let next = img.read_u64(o.seg + NEXT);
            let copied = img.read_u64(o.seg + PATTERN) >> 32 == ld + 1;
            if img.read_u64(o.seg + STATE) == SPLITTING && next != 0 && copied {
                self.geo.items_pieces(img, next, filter, keep, c, BUCKET, item, &mut found)?;
            }
            // Segments own disjoint key ranges in directory order: sorting each segment's
            // items sorts the whole table's.
            found.sort_unstable_by_key(|i| (i.key, i.rec));
            found.dedup_by_key(|i| (i.key, i.rec));
            Ok(self.truth.verify_checked(&found, o.keys(), d))
        })?;
        self.truth.combine(parts.iter().filter_map(|p| p.as_ref().as_ref().ok()), dfence_done)
    }
}
