//! CCEH (Nam et al., FAST'19): cache-line-conscious extendible hashing.
//!
//! Persist pattern reproduced (the paper's in-place split, `INPLACE` in the original):
//! - layout: a persistent root holds the directory pointer; the directory holds a lock word, the
//!   global depth and 2^depth segment pointers; a segment is `segment_lines` 64 B lines of four
//!   16 B (key, value) pairs, followed by a header line (lock word, local depth).
//! - insert: lock the segment (an `rmw` on its lock word, in PM as in the original), probe
//!   `probe_lines` lines from the first hash position then from the second; claim a free or stale
//!   slot by CAS-ing its key to a sentinel, store the value (the record address; the record is in
//!   the same epoch), `ofence`, store the key, unlock. The closing `dfence` is the final flush.
//! - split when both probe ranges are full: suspend the segment, build a new segment holding the
//!   keys whose next hash bit is 1, write it and `ofence` (its flush); then, under the directory
//!   lock, point the upper half of the segment's directory entries at it and `ofence`; then bump
//!   the old segment's local depth and `ofence`; moved keys stay behind as stale copies (lazy
//!   deletion by hash-prefix check). When the local depth equals the global depth the directory is
//!   doubled instead: a new directory is written and `ofence`d, then the root pointer swapped and
//!   `ofence`d, then the local depth bumped.
//! - recovery (as CCEH's): walk the directory; a segment whose run of entries implies a deeper local
//!   depth than it records was caught between the directory update and the depth bump, and is
//!   repaired; a slot is live when its key is neither empty nor the sentinel and its hash prefix
//!   matches the segment; lock words are reset.
//!
//! Simplification: no deletes (the paper's benchmark inserts and searches).
//!
//! Synchronisation: CCEH reads the root, the directory and (in searches) the segment without
//! taking locks, relying on x86-TSO (every load an acquire, every store a release). The trace
//! makes that explicit (docs/design.md §3): the root pointer is read by an `acquire` and swapped by a
//! `release`, a directory is read after an `acquire` of its lock word (released by the last
//! directory update), and a search reads a segment after an `acquire` of the segment's lock word.
//! Otherwise a thread could use a new segment or directory before its creator's stores landed.
//!
//! Built on [`crate::blocks::segment`] (directory doubling, in-place update, recovery walk); the
//! probed-line segment is CCEH's own.

use super::common::*;
use crate::blocks::segment::{point_upper_half, walk_pieces, write_doubled};
use crate::ctx::{Ctx, Gen};
use crate::params::{int, percent, ParamSpec, Params};
use crate::recovery::{piece, DfenceDone, PieceCache, Recovery, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;

pub static CCEH: WorkloadSpec = WorkloadSpec {
    name: "cceh",
    description:
        "CCEH extendible hashing: value, ofence, key per insert; segment split then directory update, ofence-ordered",
    params: PARAMS,
    generate,
};

const SENTINEL: u64 = u64::MAX - 1;
const SUSPENDED: u64 = u64::MAX;
const DIR_ENTRIES: u64 = 64;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "initial_depth",
        default: "2",
        unit: "bits",
        range: int(0, 16),
        help: "initial global depth (2^d segments)",
    },
    ParamSpec {
        name: "segment_lines",
        default: "256",
        unit: "lines",
        range: int(4, 1 << 16),
        help: "64 B lines per segment (256 = CCEH's 16 KiB)",
    },
    ParamSpec {
        name: "probe_lines",
        default: "8",
        unit: "lines",
        range: int(1, 1 << 16),
        help: "lines probed from each of the two hash positions",
    },
    percent("search_pct", "20", "operations that search an inserted key"),
    COMPUTE_PARAM,
];

#[derive(Clone, Copy)]
struct Layout {
    root: u64,
    lines: u64,
    probe: u64,
}

impl Layout {
    fn slots(&self) -> u64 {
        self.lines * 4
    }
    fn hdr(&self, seg: u64) -> u64 {
        seg + self.lines * 64
    }
    /// The slots a key may occupy, in probing order.
    fn probe_slots(&self, w: u64) -> impl Iterator<Item = u64> + '_ {
        let n = self.slots();
        [w % self.lines, keys_hash2(w) % self.lines]
            .into_iter()
            .flat_map(move |l| (0..self.probe * 4).map(move |i| (l * 4 + i) % n))
    }
}

fn keys_hash2(w: u64) -> u64 {
    super::keys::hash2(w)
}

/// A slot key is live in a segment of local depth `ld` and prefix `pat`.
fn live(k: u64, ld: u64, pat: u64) -> bool {
    k != 0 && k != SENTINEL && top(k, ld) == pat
}

struct Ix {
    l: Layout,
}

impl Ix {
    fn setup(c: &mut Ctx<'_>, l: Layout, depth: u64) {
        let n = 1u64 << depth;
        let dir = c.alloc_pm(DIR_ENTRIES + 8 * n, 64);
        let mut entries = Vec::with_capacity(8 * n as usize);
        for _ in 0..n {
            let seg = c.alloc_pm(l.lines * 64 + 64, 64);
            c.store_u64(l.hdr(seg) + 8, depth);
            entries.extend_from_slice(&seg.to_le_bytes());
        }
        c.store(dir + DIR_ENTRIES, &entries);
        c.store(dir + 8, &[depth.to_le_bytes(), n.to_le_bytes()].concat());
        c.ofence();
        c.store_u64(l.root, dir);
        c.dfence();
    }

    /// The current directory, synchronised with its last update: (address, global depth).
    fn directory(&self, c: &mut Ctx<'_>) -> (u64, u64) {
        let dir = c.acquire(self.l.root);
        c.acquire(dir);
        (dir, c.load_u64(dir + 8))
    }

    fn split(&mut self, c: &mut Ctx<'_>, seg: u64, ld: u64, w: u64) {
        let l = self.l;
        c.cas(l.hdr(seg), 0, SUSPENDED);
        let pat = top(w, ld);
        let new = c.alloc_pm(l.lines * 64 + 64, 64);
        let mut old = Vec::with_capacity(l.lines as usize * 64);
        for i in 0..l.lines {
            old.extend(c.load_bytes(seg + i * 64, 64));
        }
        let mut buf = vec![0u8; l.lines as usize * 64];
        for s in 0..l.slots() as usize {
            let k = u64_at(&old, s * 16);
            c.compute(PROBE_COST);
            if !live(k, ld, pat) || top(k, ld + 1) & 1 == 0 {
                continue;
            }
            // A subset of one segment's keys always fits in the same probe ranges of an empty one.
            let slot = l.probe_slots(k).find(|&t| u64_at(&buf, t as usize * 16) == 0).expect("split target full");
            put_u64(&mut buf, slot as usize * 16, k);
            put_u64(&mut buf, slot as usize * 16 + 8, u64_at(&old, s * 16 + 8));
        }
        store_nonzero_lines(c, new, &buf);
        c.store_u64(l.hdr(new) + 8, ld + 1);
        c.ofence();
        let (dir, depth) = self.directory(c);
        if ld == depth {
            // Directory doubling: write the new directory, persist it, swap the root pointer.
            c.cas(dir, 0, SUSPENDED);
            let n = 1u64 << depth;
            let x = top(w, depth);
            let nd = write_doubled(c, dir + DIR_ENTRIES, DIR_ENTRIES, n, x, new);
            c.store(nd + 8, &[(depth + 1).to_le_bytes(), (2 * n).to_le_bytes()].concat());
            c.ofence();
            c.release_value(l.root, nd);
            c.ofence();
        } else {
            c.lock(dir);
            let x = top(w, depth);
            point_upper_half(c, dir + DIR_ENTRIES, depth, ld, x, new);
            c.ofence();
            c.unlock(dir);
        }
        c.store_u64(l.hdr(seg) + 8, ld + 1);
        c.ofence();
        c.release_value(l.hdr(seg), 0);
    }
}

impl Index for Ix {
    fn insert(&mut self, c: &mut Ctx<'_>, w: u64, rec: u64) {
        let l = self.l;
        loop {
            let (dir, depth) = self.directory(c);
            let x = top(w, depth);
            let seg = c.load_u64(dir + DIR_ENTRIES + 8 * x);
            c.lock(l.hdr(seg));
            c.load_u64(dir + DIR_ENTRIES + 8 * x); // re-check the directory entry under the lock
            let ld = c.load_u64(l.hdr(seg) + 8);
            let pat = top(w, ld);
            for s in l.probe_slots(w).collect::<Vec<_>>() {
                let a = seg + s * 16;
                let k = c.load_u64(a);
                c.compute(PROBE_COST);
                if k != SENTINEL && !live(k, ld, pat) {
                    c.cas(a, k, SENTINEL);
                    c.store_u64(a + 8, rec);
                    c.ofence();
                    c.store_u64(a, w);
                    c.unlock(l.hdr(seg));
                    return;
                }
            }
            c.unlock(l.hdr(seg));
            self.split(c, seg, ld, w);
        }
    }

    fn search(&mut self, c: &mut Ctx<'_>, w: u64) -> Option<u64> {
        let l = self.l;
        let (dir, depth) = self.directory(c);
        let seg = c.load_u64(dir + DIR_ENTRIES + 8 * top(w, depth));
        c.acquire(l.hdr(seg));
        for s in l.probe_slots(w).collect::<Vec<_>>() {
            c.compute(PROBE_COST);
            if c.load_u64(seg + s * 16) == w {
                return Some(c.load_u64(seg + s * 16 + 8));
            }
        }
        None
    }
}

fn generate(p: &Params) -> Generated {
    let mut g = Gen::new(p);
    let l = Layout {
        root: g.heap.alloc_pm(64, 64),
        lines: p.get("segment_lines").clamp(4, 1 << 16),
        probe: p.get("probe_lines").max(1),
    };
    let l = Layout { probe: l.probe.min(l.lines / 2).max(1), ..l };
    Ix::setup(&mut g.ctx(0), l, p.get("initial_depth").min(16));
    let mut ix = Ix { l };
    let mix = Mix { search_pct: p.get("search_pct").min(100), delete_pct: 0 };
    let (trace, truth) = run(p, g, &mut ix, mix);
    Generated { trace, recovery: Box::new(CcehRecovery { l, truth }) }
}

struct CcehRecovery {
    l: Layout,
    truth: Truth,
}

/// Piece tags (see [`crate::recovery::piece`]) and the slots of one nested piece.
const SEGMENT: u64 = 0;
const SLOTS: u64 = 1;
const CHUNK: u64 = 64;

impl Recovery for CcehRecovery {
    /// One piece per segment (its items, verified against the truth for the keys it owns).
    fn check_with(&self, img: &MemImage, dfence_done: &DfenceDone, pieces: &mut dyn PieceCache) -> R<RecoveryReport> {
        let l = self.l;
        let dir = img.read_u64(l.root);
        if dir == 0 {
            return self.truth.verify(img, &[], dfence_done);
        }
        let depth = img.read_u64(dir + 8);
        let cap = img.read_u64(dir + 16);
        if depth > 32 || cap != 1 << depth {
            return err(format!("directory {dir:#x}: depth {depth}, capacity {cap}"));
        }
        let parts = walk_pieces(img, dir + DIR_ENTRIES, depth, pieces, SEGMENT, |o, c, d| {
            let ld = img.read_u64(l.hdr(o.seg) + 8);
            if ld > o.ld {
                return err(format!("segment {:#x} has local depth {ld} > {} implied by the directory", o.seg, o.ld));
            }
            // ld < o.ld: crashed between the directory update and the depth bump; CCEH's
            // recovery sets the depth the directory implies.
            let mut found = Vec::new();
            // Runs of CHUNK slots, each a nested piece whose items are checked inside it.
            for first in (0..l.slots()).step_by(CHUNK as usize) {
                let got = piece(c, &[SLOTS, o.seg, first, o.ld, o.pattern], |_, _| -> R<Vec<Checked>> {
                    let mut v = Vec::new();
                    for s in first..(first + CHUNK).min(l.slots()) {
                        let k = img.read_u64(o.seg + s * 16);
                        if !live(k, o.ld, o.pattern) {
                            continue;
                        }
                        if !l.probe_slots(k).any(|t| t == s) {
                            return err(format!("key {k:#x} in slot {s} of {:#x}, outside its probe ranges", o.seg));
                        }
                        v.push(self.truth.check_item(img, k, img.read_u64(o.seg + s * 16 + 8)));
                    }
                    Ok(v)
                });
                match &*got {
                    Ok(v) => found.extend_from_slice(v),
                    Err(e) => return Err(e.clone()),
                }
            }
            // Segments own disjoint key ranges in directory order (verified in slot order).
            Ok(self.truth.verify_checked(&found, o.keys(), d))
        })?;
        self.truth.combine(parts.iter().filter_map(|p| p.as_ref().as_ref().ok()), dfence_done)
    }
}
