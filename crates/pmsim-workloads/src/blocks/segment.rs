//! A hashed segment with buckets and a directory: the extendible-hashing directory CCEH and
//! Dash-EH share (a directory of 2^depth segment pointers indexed by a key hash's top bits; a
//! segment of local depth `ld` owns an aligned run of 2^(depth - ld) entries).
//!
//! Split, after the new segment is persistent: when the segment's local depth equals the global
//! depth the directory doubles copy-on-write ([`write_doubled`]: a new directory whose entries
//! the caller persists and then publishes by a release of the root pointer, so a crash leaves the
//! old or the new one); otherwise the upper half of the segment's run is pointed at the new
//! segment in place ([`point_upper_half`], one store the caller orders). The buckets inside a
//! segment are the structure's own (CCEH's probed lines, Dash's fingerprinted buckets and stash).
//!
//! Recovery ([`walk`]) checks the directory's shape and hands each segment the local depth and
//! hash pattern the directory implies, from which the structure reads its live items.
//! [`walk_pieces`] makes each segment's part of the recovery a memoised piece
//! ([`crate::recovery::piece`]): a crash checker reruns only the segments whose words changed.

use crate::ctx::Ctx;
#[cfg(test)]
use crate::ctx::Gen;
use crate::index::common::{err, guard, u64_at, R};
use crate::recovery::{piece, PieceCache};
use pmsim_trace::MemImage;
use rustc_hash::FxHashSet;
use std::rc::Rc;

/// Writes the doubled copy of the directory whose `n` entries start at `entries` into a fresh
/// directory (`entries_off` bytes of header, then 2n entries): each old entry twice, the second
/// copy of entry `x` (the split segment's) pointing to `new`. Returns the new directory, not yet
/// ordered or published.
pub fn write_doubled(c: &mut Ctx<'_>, entries: u64, entries_off: u64, n: u64, x: u64, new: u64) -> u64 {
    let old = c.load_bytes(entries, 8 * n as usize);
    let nd = c.alloc_pm(entries_off + 16 * n, 64);
    let mut e = Vec::with_capacity(16 * n as usize);
    for i in 0..n {
        let s = u64_at(&old, 8 * i as usize);
        e.extend_from_slice(&s.to_le_bytes());
        e.extend_from_slice(&(if i == x { new } else { s }).to_le_bytes());
    }
    c.store(nd + entries_off, &e);
    nd
}

/// Points the upper half of the run of entries owned by the segment of local depth `ld` that
/// entry `x` names (global depth `depth`) at `new`: one store, not yet ordered.
pub fn point_upper_half(c: &mut Ctx<'_>, entries: u64, depth: u64, ld: u64, x: u64, new: u64) {
    let stride = 1u64 << (depth - ld);
    let loc = x - x % stride;
    let half: Vec<u8> = (0..stride / 2).flat_map(|_| new.to_le_bytes()).collect();
    c.store(entries + 8 * (loc + stride / 2), &half);
}

/// One segment as a recovered directory assigns it.
pub struct Owned {
    pub seg: u64,
    /// The local depth the directory implies (the segment's own may lag after a crash).
    pub ld: u64,
    /// The hash pattern (top `ld` bits) of the keys the segment holds.
    pub pattern: u64,
}

impl Owned {
    /// The keys the segment owns (top `ld` bits equal to `pattern`), a range in key order.
    pub fn keys(&self) -> std::ops::RangeInclusive<u64> {
        if self.ld == 0 {
            return 0..=u64::MAX;
        }
        let lo = self.pattern << (64 - self.ld);
        lo..=lo | (u64::MAX >> self.ld)
    }
}

/// [`walk`], with each segment's work (`visit`) run as the piece (`tag`, segment, implied local
/// depth, pattern) of `cache` (`visit` gets the cache for pieces of its own): reused while
/// nothing it read changed. A segment's error stops
/// the walk, as in [`walk`]. Returns the segments' outputs in directory (= key) order.
pub fn walk_pieces<T: 'static>(
    img: &MemImage,
    entries: u64,
    depth: u64,
    cache: &mut dyn PieceCache,
    tag: u64,
    mut visit: impl FnMut(&Owned, &mut dyn PieceCache, &dyn Fn(u64) -> bool) -> R<T>,
) -> R<Vec<Rc<R<T>>>> {
    let mut out = Vec::new();
    walk(img, entries, depth, |o| {
        let p = piece(cache, &[tag, o.seg, o.ld, o.pattern], |c, d| visit(&o, c, d));
        if let Err(e) = &*p {
            return Err(e.clone());
        }
        out.push(p);
        Ok(())
    })?;
    Ok(out)
}

/// Walks a directory image of 2^`depth` entries at `entries`: every entry names a segment, and
/// each segment owns one aligned power-of-two run. Calls `visit` once per segment.
pub fn walk(img: &MemImage, entries: u64, depth: u64, mut visit: impl FnMut(Owned) -> R<()>) -> R<()> {
    let cap = 1u64 << depth;
    let entry = |i: u64| img.read_u64(entries + 8 * i);
    let mut seen = FxHashSet::default();
    let mut i = 0;
    while i < cap {
        let seg = entry(i);
        if seg == 0 {
            return err(format!("directory entry {i} is empty"));
        }
        guard(&mut seen, seg, "segment")?;
        let mut run = 1;
        while i + run < cap && entry(i + run) == seg {
            run += 1;
        }
        if !run.is_power_of_two() || i % run != 0 {
            return err(format!("segment {seg:#x} owns {run} entries from {i}: not an aligned power of two"));
        }
        let ld = depth - run.trailing_zeros() as u64;
        visit(Owned { seg, ld, pattern: i >> (depth - ld) })?;
        i += run;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmsim_trace::WordVal;

    fn directory(entries: &[u64]) -> MemImage {
        let mut img = MemImage::new();
        for (i, &s) in entries.iter().enumerate() {
            img.set(0x1000 + 8 * i as u64, WordVal { data: s, id: 1 });
        }
        img
    }

    fn owned(img: &MemImage, depth: u64) -> R<Vec<(u64, u64, u64)>> {
        let mut v = Vec::new();
        walk(img, 0x1000, depth, |o| {
            v.push((o.seg, o.ld, o.pattern));
            Ok(())
        })?;
        Ok(v)
    }

    #[test]
    fn walk_gives_each_segment_its_implied_depth_and_pattern() {
        // Depth 2: segment A owns entries 0-1 (local depth 1), B entry 2, C entry 3.
        let img = directory(&[0xa0, 0xa0, 0xb0, 0xc0]);
        assert_eq!(owned(&img, 2).unwrap(), vec![(0xa0, 1, 0), (0xb0, 2, 2), (0xc0, 2, 3)]);
    }

    #[test]
    fn walk_rejects_a_misaligned_run_an_empty_entry_and_a_shared_segment() {
        assert!(owned(&directory(&[0xb0, 0xa0, 0xa0, 0xc0]), 2).is_err());
        assert!(owned(&directory(&[0xa0, 0xa0, 0, 0xc0]), 2).is_err());
        assert!(owned(&directory(&[0xa0, 0xb0, 0xa0, 0xc0]), 2).is_err());
    }

    #[test]
    fn doubling_and_half_update_point_the_right_entries_at_the_new_segment() {
        let p = crate::params::Params::parse("t", &[], &Default::default()).unwrap();
        let mut g = Gen::new(&p);
        let mut c = g.ctx(0);
        let dir = c.alloc_pm(64 + 8 * 2, 64);
        c.store(dir + 64, &[0xa0u64.to_le_bytes(), 0xb0u64.to_le_bytes()].concat());
        let nd = write_doubled(&mut c, dir + 64, 64, 2, 1, 0xc0);
        let e: Vec<u64> = (0..4).map(|i| c.peek(nd + 64 + 8 * i, 8)).collect();
        assert_eq!(e, vec![0xa0, 0xa0, 0xb0, 0xc0]);
        // Segment 0xa0 (local depth 1 at global depth 2) splits: its upper entry moves.
        point_upper_half(&mut c, nd + 64, 2, 1, 0, 0xd0);
        let e: Vec<u64> = (0..4).map(|i| c.peek(nd + 64 + 8 * i, 8)).collect();
        assert_eq!(e, vec![0xa0, 0xd0, 0xb0, 0xc0]);
    }
}
