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

use crate::ctx::Ctx;
use crate::index::common::{err, guard, u64_at, R};
use pmsim_trace::MemImage;
use rustc_hash::FxHashSet;

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
