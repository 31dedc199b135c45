//! Dash's segment (Lu et al., VLDB'20), shared by `dash-eh` and `dash-lh`.
//!
//! A segment is a header line (local depth, pattern, state, next segment) followed by `nb` normal
//! buckets and 2 stash buckets of 256 B each. A bucket is a 32 B header (an 8 B version lock, a
//! 4 B bitmap with an allocation bit and a "probe" bit per slot, an overflow counter, 14 one-byte
//! fingerprints) and 14 16 B (key, value) pairs.
//!
//! Insert (Dash's balanced insert), under the version locks of the key's bucket and its neighbour:
//! write the pair into the emptier of the two (value, key; the value record in the same epoch),
//! `ofence` (the pair's flush), then the fingerprint and bitmap, unlock, `ofence` (the bitmap's
//! flush). When both are full, displace one of the neighbour's own items to the next bucket, or
//! one of the bucket's probe items to the previous bucket (each move: pair, `ofence`, bitmap,
//! `ofence`, then the freed slot is reused), else insert into a stash bucket and count the
//! overflow in the home bucket's header. A full segment makes the caller split.
//!
//! Split (both variants): lock every bucket, build the new segment from the items that move
//! (Dash's `Insert4split`: no per-item flush) and `ofence` (the whole-segment flush), then the
//! variant links it; the moved items' bitmap bits in the old segment are cleared and `ofence`d.
//! Search (Dash's optimistic read) reads each bucket after an `acquire` of its version word, so it
//! sees every insert that unlocked the bucket before it.
//!
//! Simplification: a split places items only by balanced insert and stash (no displacement).

use super::common::*;
use crate::ctx::Ctx;
use crate::recovery::{piece, PieceCache};
use pmsim_trace::MemImage;

pub const BUCKET: u64 = 256;
pub const SLOTS: u64 = 14;
pub const STASH: u64 = 2;
const BITMAP: u64 = 8;
const OVERFLOW: u64 = 12;
const FP: u64 = 16;
const PAIRS: u64 = 32;
pub const LD: u64 = 0;
pub const PATTERN: u64 = 8;
pub const STATE: u64 = 16;
pub const NEXT: u64 = 24;
/// Segment state while a split is in flight (Dash's -2).
pub const SPLITTING: u64 = (-2i64) as u64;

fn fp(k: u64) -> u64 {
    k & 0xff
}

/// Segment geometry: `nb` normal buckets (a power of two).
#[derive(Clone, Copy)]
pub struct Geo {
    pub nb: u64,
}

impl Geo {
    pub fn seg_bytes(&self) -> u64 {
        64 + (self.nb + STASH) * BUCKET
    }
    pub fn bkt(&self, seg: u64, i: u64) -> u64 {
        seg + 64 + i * BUCKET
    }
    /// The key's home bucket (bits above the fingerprint).
    pub fn home(&self, k: u64) -> u64 {
        (k >> 8) & (self.nb - 1)
    }

    /// Places (k, v) into an empty bucket slot and publishes it: pair, ofence, fingerprint+bitmap.
    fn put(&self, c: &mut Ctx<'_>, b: u64, k: u64, v: u64, probe: bool) -> bool {
        let bm = c.peek(b + BITMAP, 4);
        let Some(s) = (0..SLOTS).find(|s| bm & (1 << s) == 0) else {
            return false;
        };
        c.store_u64(b + PAIRS + 16 * s, k);
        c.store_u64(b + PAIRS + 16 * s + 8, v);
        c.ofence();
        c.store_n(b + FP + s, 1, fp(k));
        let nbm = (bm | 1 << s) & !(1 << (16 + s)) | if probe { 1 << (16 + s) } else { 0 };
        c.store_n(b + BITMAP, 4, nbm);
        true
    }

    fn count(c: &mut Ctx<'_>, b: u64) -> u32 {
        let h = c.load_bytes(b, 32);
        (u64_at(&h, BITMAP as usize) as u32 & 0x3fff).count_ones()
    }

    /// Moves the item in slot `s` of `from` to `to` (probe flag `probe`), then frees `s`.
    fn displace(&self, c: &mut Ctx<'_>, from: u64, s: u64, to: u64, probe: bool) {
        let k = c.peek(from + PAIRS + 16 * s, 8);
        let v = c.peek(from + PAIRS + 16 * s + 8, 8);
        self.put(c, to, k, v, probe);
        c.ofence();
        let bm = c.peek(from + BITMAP, 4);
        c.store_n(from + BITMAP, 4, bm & !(1 << s) & !(1 << (16 + s)));
    }

    /// Dash's `Table::Insert` on segment `seg`; false when the segment has no room (split).
    pub fn insert(&self, c: &mut Ctx<'_>, seg: u64, k: u64, v: u64) -> bool {
        let y = self.home(k);
        let t = self.bkt(seg, y);
        let n = self.bkt(seg, (y + 1) % self.nb);
        let vt = vlock(c, t);
        let vn = vlock(c, n);
        let (ct, cn) = (Self::count(c, t), Self::count(c, n));
        c.compute(PROBE_COST * 4);
        if (ct as u64) < SLOTS || (cn as u64) < SLOTS {
            let (b, probe) = if ct <= cn { (t, false) } else { (n, true) };
            self.put(c, b, k, v, probe);
            let (first, vf, second, vs) = if b == t { (t, vt, n, vn) } else { (n, vn, t, vt) };
            vunlock(c, first, vf);
            c.ofence();
            vunlock(c, second, vs);
            return true;
        }
        let mut done = false;
        // Next displacement: one of the neighbour's own items moves on to the next bucket.
        let nx = self.bkt(seg, (y + 2) % self.nb);
        let vx = vlock(c, nx);
        let nbm = c.peek(n + BITMAP, 4);
        if (Self::count(c, nx) as u64) < SLOTS {
            if let Some(s) = (0..SLOTS).find(|s| nbm & (1 << s) != 0 && nbm & (1 << (16 + s)) == 0) {
                self.displace(c, n, s, nx, true);
                self.put(c, n, k, v, true);
                done = true;
            }
        }
        vunlock(c, nx, vx);
        if !done {
            // Previous displacement: one of the bucket's probe items moves back home.
            let pv = self.bkt(seg, (y + self.nb - 1) % self.nb);
            let vp = if pv != n { Some(vlock(c, pv)) } else { None };
            let tbm = c.peek(t + BITMAP, 4);
            if (Self::count(c, pv) as u64) < SLOTS {
                if let Some(s) = (0..SLOTS).find(|s| tbm & (1 << s) != 0 && tbm & (1 << (16 + s)) != 0) {
                    self.displace(c, t, s, pv, false);
                    self.put(c, t, k, v, false);
                    done = true;
                }
            }
            if !done {
                for i in 0..STASH {
                    let sb = self.bkt(seg, self.nb + (y + i) % STASH);
                    let vs = vlock(c, sb);
                    if self.put(c, sb, k, v, false) {
                        let o = c.peek(t + OVERFLOW, 1);
                        c.store_n(t + OVERFLOW, 1, (o + 1) & 0xff);
                        done = true;
                    }
                    vunlock(c, sb, vs);
                    if done {
                        break;
                    }
                }
            }
            if let Some(vp) = vp {
                vunlock(c, pv, vp);
            }
        }
        vunlock(c, t, vt);
        if done {
            c.ofence();
        }
        vunlock(c, n, vn);
        done
    }

    /// Locks every normal bucket of a segment (the split's exclusive access); returns versions.
    pub fn lock_all(&self, c: &mut Ctx<'_>, seg: u64) -> Vec<u64> {
        (0..self.nb).map(|i| vlock(c, self.bkt(seg, i))).collect()
    }

    pub fn unlock_all(&self, c: &mut Ctx<'_>, seg: u64, v: &[u64]) {
        for (i, &x) in v.iter().enumerate() {
            vunlock(c, self.bkt(seg, i as u64), x);
        }
    }

    /// Copies the items of `old` for which `moves` holds into the (fresh) segment `new`, writes
    /// it, and returns per bucket the bitmap bits to clear in `old`. No fence: the caller flushes.
    pub fn split_copy(&self, c: &mut Ctx<'_>, old: u64, new: u64, moves: impl Fn(u64) -> bool) -> Vec<u64> {
        let nbk = (self.nb + STASH) as usize;
        let mut buf = vec![0u8; nbk * BUCKET as usize];
        let mut masks = vec![0u64; nbk];
        let bm_of = |buf: &[u8], b: usize| u64_at(buf, b * BUCKET as usize + BITMAP as usize) & 0xffff_ffff;
        for (b, mask) in masks.iter_mut().enumerate() {
            let bytes = c.load_bytes(self.bkt(old, b as u64), BUCKET as usize);
            let bm = u64_at(&bytes, BITMAP as usize);
            for s in 0..SLOTS {
                if bm & (1 << s) == 0 {
                    continue;
                }
                let k = u64_at(&bytes, (PAIRS + 16 * s) as usize);
                let v = u64_at(&bytes, (PAIRS + 16 * s + 8) as usize);
                c.compute(PROBE_COST + HASH_COST);
                if !moves(k) {
                    continue;
                }
                *mask |= 1 << s | 1 << (16 + s);
                let y = self.home(k) as usize;
                let n = (y + 1) % self.nb as usize;
                let cnt = |buf: &[u8], b| (bm_of(buf, b) & 0x3fff).count_ones();
                let order = if cnt(&buf, y) <= cnt(&buf, n) { [y, n] } else { [n, y] };
                let cands = order.into_iter().chain((0..STASH as usize).map(|i| self.nb as usize + i));
                // A subset of one segment's items fits in an empty one.
                let (tb, ts) = cands
                    .filter_map(|tb| {
                        let bm = bm_of(&buf, tb);
                        (0..SLOTS).find(|s| bm & (1 << s) == 0).map(|s| (tb, s))
                    })
                    .next()
                    .expect("split target segment full");
                let base = tb * BUCKET as usize;
                put_u64(&mut buf, base + (PAIRS + 16 * ts) as usize, k);
                put_u64(&mut buf, base + (PAIRS + 16 * ts + 8) as usize, v);
                buf[base + (FP + ts) as usize] = fp(k) as u8;
                let probe = if tb == n && tb != y { 1 << (16 + ts) } else { 0 };
                let nbm = (bm_of(&buf, tb) | 1 << ts | probe) as u32;
                buf[base + BITMAP as usize..base + BITMAP as usize + 4].copy_from_slice(&nbm.to_le_bytes());
            }
        }
        store_nonzero_lines(c, new + 64, &buf);
        masks
    }

    /// Clears the moved items' bits in the old segment (the caller fences).
    pub fn clear_moved(&self, c: &mut Ctx<'_>, old: u64, masks: &[u64]) {
        for (b, &m) in masks.iter().enumerate() {
            if m != 0 {
                let a = self.bkt(old, b as u64) + BITMAP;
                let bm = c.peek(a, 4);
                c.store_n(a, 4, bm & !m);
            }
        }
    }

    pub fn search(&self, c: &mut Ctx<'_>, seg: u64, k: u64) -> Option<u64> {
        let y = self.home(k);
        let cands = [y, (y + 1) % self.nb].into_iter().chain((0..STASH).map(|i| self.nb + i));
        for b in cands {
            let a = self.bkt(seg, b);
            let v = c.acquire(a);
            let mut h = v.to_le_bytes().to_vec();
            h.extend(c.load_bytes(a + 8, 24));
            let bm = u64_at(&h, BITMAP as usize);
            for s in 0..SLOTS {
                if bm & (1 << s) != 0 && h[(FP + s) as usize] as u64 == fp(k) && c.load_u64(a + PAIRS + 16 * s) == k {
                    return Some(c.load_u64(a + PAIRS + 16 * s + 8));
                }
            }
        }
        None
    }

    /// Recovery: the items of segment `seg` that `keep` accepts, checking that each sits where
    /// an insert could have put it and that its fingerprint matches; each bucket is a nested
    /// piece of `cache` (key: `tag`, the segment, the bucket, and `filter`, the words that
    /// determine `keep`), and `item` maps each item inside the piece (its result is cached with
    /// it). Appends the items in bucket order.
    #[allow(clippy::too_many_arguments)]
    pub fn items_pieces<T: Clone + 'static>(
        &self,
        img: &MemImage,
        seg: u64,
        filter: [u64; 2],
        keep: impl Fn(u64) -> bool,
        cache: &mut dyn PieceCache,
        tag: u64,
        item: impl Fn(u64, u64) -> T,
        out: &mut Vec<T>,
    ) -> R<()> {
        for b in 0..self.nb + STASH {
            let got = piece(cache, &[tag, seg, b, filter[0], filter[1]], |_, _| -> R<Vec<T>> {
                let mut v = Vec::new();
                self.bucket_items(img, seg, b, &keep, &mut |k, p| v.push(item(k, p)))?;
                Ok(v)
            });
            match &*got {
                Ok(v) => out.extend_from_slice(v),
                Err(e) => return Err(e.clone()),
            }
        }
        Ok(())
    }

    /// The items of bucket `b` of `seg` that `keep` accepts, checked, to `push`.
    fn bucket_items(
        &self,
        img: &MemImage,
        seg: u64,
        b: u64,
        keep: &dyn Fn(u64) -> bool,
        push: &mut dyn FnMut(u64, u64),
    ) -> R<()> {
        let a = self.bkt(seg, b);
        let bm = img.read_u64(a + BITMAP) & 0xffff_ffff;
        for s in 0..SLOTS {
            if bm & (1 << s) == 0 {
                continue;
            }
            let k = img.read_u64(a + PAIRS + 16 * s);
            if !keep(k) {
                continue;
            }
            let y = self.home(k);
            if b < self.nb && b != y && b != (y + 1) % self.nb {
                return err(format!("key {k:#x} in bucket {b} of {seg:#x}; its buckets are {y} and {}", y + 1));
            }
            if img.read_bytes(a + FP + s, 1)[0] as u64 != fp(k) {
                return err(format!("key {k:#x} in {seg:#x}: fingerprint does not match"));
            }
            push(k, img.read_u64(a + PAIRS + 16 * s + 8));
        }
        Ok(())
    }
}
