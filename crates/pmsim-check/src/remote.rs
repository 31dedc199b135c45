//! The ordering rule of remote persistence (docs/design.md §9), checked on a server's crash image.
//!
//! Why it is separate from the persist-order graph: an `rdma_pwrite` is one barrier region of
//! arbitrary length written by a client node, not a store of the server's threads, so it has no
//! place in the run record's per-word accesses. Its rule is simpler than PMO and is checked
//! directly, by store identity (every word of a region carries the region's gid, as words of a
//! store carry the store's): per client thread, in posting order,
//! - a region may be missing from the image only if every later region of the client is;
//! - a region may be partial (some of its words durable) only if it is the last one present;
//! - a region whose persist ACK reached the client before the crash must be complete.
//!
//! A word of a region that shows a *later* region of the same client counts as present (the
//! later region overwrote it); the initial value or an *earlier* region of the client counts as
//! missing. A word that shows another writer (another client's region, a server thread's store)
//! proves nothing: nothing orders the two, so the region may have landed first and been
//! overwritten, or never. Such words are left out; a region all of whose words are is
//! [`Held::Unknown`] and constrains nothing. (The persist-order check in turn takes a region's
//! value over a server store's word as overwriting every store of that word,
//! `Incremental::set_word_outside`.)

use pmsim_trace::{Kind, MemImage, Trace, INITIAL_ID, LINE_BYTES};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;

#[derive(Clone, Copy, Debug)]
struct Region {
    gid: u64,
    addr: u64,
    len: u64,
}

/// How much of a region an image holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    Absent,
    Partial,
    Complete,
    /// Every word shows another writer's value.
    Unknown,
}

impl Held {
    /// Not settled: the rule constrains the regions around it.
    fn unsettled(self) -> bool {
        matches!(self, Held::Absent | Held::Partial)
    }

    fn present(self) -> bool {
        matches!(self, Held::Partial | Held::Complete)
    }

    fn of(present: u64, missing: u64) -> Held {
        match (present, missing) {
            (0, 0) => Held::Unknown,
            (0, _) => Held::Absent,
            (_, 0) => Held::Complete,
            _ => Held::Partial,
        }
    }
}

/// [`RegionOrder::check`] for an image that changes a few words at a time (a crash sweep): each
/// region's present and missing words are counted as its words change, instead of read again at
/// every image (a 1 MiB region is 131,072 words; a sweep checks tens of thousands of images).
/// The rule's three conditions are kept as ordered sets per client, so an image is checked in
/// O(clients × log regions), not by a pass over every region (a TPC-C client posts tens of
/// thousands: the pass made a sweep quadratic).
pub struct RegionFollower {
    /// The regions covering each word: `index[word]` = (start, len) into `cover`.
    cover: Vec<(u32, u32)>,
    index: FxHashMap<u64, (usize, usize)>,
    /// Per client, per region: (present, missing) words.
    counts: Vec<Vec<(u64, u64)>>,
    /// Per client, per region: when its persist ACK reached the client (`u64::MAX`: never).
    acks: Vec<Vec<u64>>,
    /// Per client: the regions not settled, by index and by (ACK time, index), and the regions
    /// present (partial or complete).
    unsettled: Vec<BTreeSet<u32>>,
    unsettled_acks: Vec<BTreeSet<(u64, u32)>>,
    present: Vec<BTreeSet<u32>>,
}

impl RegionFollower {
    /// Word `w` of the image changed from showing store `old` to `new` (`None`: the initial
    /// value, or no value).
    pub fn changed(&mut self, order: &RegionOrder, w: u64, old: Option<u64>, new: Option<u64>) {
        let Some(&(start, len)) = self.index.get(&w) else { return };
        for k in start..start + len {
            let (ci, ri) = (self.cover[k].0 as usize, self.cover[k].1 as usize);
            let c = &mut self.counts[ci][ri];
            let before = Held::of(c.0, c.1);
            match order.evidence(ci, ri, old) {
                Some(true) => c.0 -= 1,
                Some(false) => c.1 -= 1,
                None => {}
            }
            match order.evidence(ci, ri, new) {
                Some(true) => c.0 += 1,
                Some(false) => c.1 += 1,
                None => {}
            }
            let after = Held::of(c.0, c.1);
            if before != after {
                self.classify(ci, ri, before, false);
                self.classify(ci, ri, after, true);
            }
        }
    }

    /// Adds region `ri` of client `ci` to (or removes it from) the sets its state `h` puts it in.
    fn classify(&mut self, ci: usize, ri: usize, h: Held, add: bool) {
        let (r, at) = (ri as u32, self.acks[ci][ri]);
        fn put<T: Ord>(set: &mut BTreeSet<T>, v: T, add: bool) {
            if add {
                set.insert(v);
            } else {
                set.remove(&v);
            }
        }
        if h.unsettled() {
            put(&mut self.unsettled[ci], r, add);
            put(&mut self.unsettled_acks[ci], (at, r), add);
        }
        if h.present() {
            put(&mut self.present[ci], r, add);
        }
    }

    /// [`RegionOrder::check`] of the image followed so far, at crash time `t` (a region is
    /// acknowledged if its ACK reached its client by then).
    pub fn check(&self, order: &RegionOrder, t: u64) -> Result<(), String> {
        let violated = (0..self.counts.len()).any(|ci| {
            self.unsettled_acks[ci].first().is_some_and(|&(at, _)| at <= t)
                || matches!((self.unsettled[ci].first(), self.present[ci].last()), (Some(u), Some(p)) if u < p)
        });
        if !violated {
            return Ok(());
        }
        // The whole pass names the violation as reading the image whole does.
        let acked = |gid: u64| order.index.get(&gid).is_some_and(|&(ci, ri)| self.acks[ci as usize][ri as usize] <= t);
        order.check_held(&|ci, ri| Held::of(self.counts[ci][ri].0, self.counts[ci][ri].1), &acked)
    }
}

/// The regions of a trace's client threads, in posting order.
#[derive(Clone, Debug, Default)]
pub struct RegionOrder {
    clients: Vec<(u16, Vec<Region>)>,
    /// gid -> (client index, region index).
    index: FxHashMap<u64, (u32, u32)>,
    /// Lines server threads write: a write-back of one carries the remote data DDIO put in it
    /// to NVM early, outside the rule's guarantee (docs/design.md §9); a violation on such a line
    /// says so.
    server_lines: FxHashSet<u64>,
}

impl RegionOrder {
    pub fn new(trace: &Trace) -> RegionOrder {
        let mut ro = RegionOrder::default();
        for s in &trace.threads {
            ro.server_lines.extend(s.events.iter().filter(|e| e.kind.writes()).map(|e| e.line()));
        }
        for (t, s) in trace.threads.iter().enumerate() {
            let regions: Vec<Region> = s
                .events
                .iter()
                .filter(|e| e.kind == Kind::RdmaPwrite)
                .map(|e| Region { gid: e.gid, addr: e.addr, len: e.data })
                .collect();
            if regions.is_empty() {
                continue;
            }
            let ci = ro.clients.len() as u32;
            for (i, r) in regions.iter().enumerate() {
                ro.index.insert(r.gid, (ci, i as u32));
            }
            ro.clients.push((t as u16, regions));
        }
        ro
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Whether `id` is a region's (images' words with it belong to this rule, not to PMO's).
    pub fn is_region(&self, id: u64) -> bool {
        self.index.contains_key(&id)
    }

    /// The words of region `ri` of client `ci`.
    fn words(&self, ci: usize, ri: usize) -> impl Iterator<Item = u64> {
        let r = self.clients[ci].1[ri];
        ((r.addr & !7)..r.addr + r.len).step_by(8)
    }

    /// What a word showing store `id` (`None`: the initial value) says of region `ri` of
    /// client `ci`: `Some(true)` present, `Some(false)` missing, `None` no evidence.
    fn evidence(&self, ci: usize, ri: usize, id: Option<u64>) -> Option<bool> {
        match id.filter(|&id| id != INITIAL_ID) {
            None => Some(false),
            Some(id) => match self.index.get(&id) {
                Some(&(c, i)) if c as usize == ci => Some(i as usize >= ri),
                // Another client's region or a server store: no evidence either way.
                _ => None,
            },
        }
    }

    fn held(&self, ci: usize, ri: usize, img: &MemImage) -> Held {
        let (mut present, mut missing) = (0u64, 0u64);
        for w in self.words(ci, ri) {
            match self.evidence(ci, ri, img.get(w).map(|v| v.id)) {
                Some(true) => present += 1,
                Some(false) => missing += 1,
                None => {}
            }
        }
        Held::of(present, missing)
    }

    /// Follows an image word by word (see [`RegionFollower`]), starting from the empty image;
    /// `ack_at(gid)`: when region `gid`'s persist ACK reached its client, if it did.
    pub fn follower(&self, ack_at: &dyn Fn(u64) -> Option<u64>) -> RegionFollower {
        let mut cover: Vec<(u64, u32, u32)> = Vec::new();
        let mut counts = Vec::new();
        let mut acks = Vec::new();
        for (ci, (_, regions)) in self.clients.iter().enumerate() {
            let mut per = Vec::with_capacity(regions.len());
            for ri in 0..regions.len() {
                let n = self.words(ci, ri).inspect(|&w| cover.push((w, ci as u32, ri as u32))).count();
                per.push((0, n as u64));
            }
            counts.push(per);
            acks.push(regions.iter().map(|r| ack_at(r.gid).unwrap_or(u64::MAX)).collect());
        }
        cover.sort_unstable();
        let mut index = FxHashMap::default();
        let mut i = 0;
        while i < cover.len() {
            let j = i + cover[i..].iter().take_while(|c| c.0 == cover[i].0).count();
            index.insert(cover[i].0, (i, j - i));
            i = j;
        }
        let n = counts.len();
        let mut f = RegionFollower {
            cover: cover.into_iter().map(|(_, c, r)| (c, r)).collect(),
            index,
            counts,
            acks,
            unsettled: vec![BTreeSet::new(); n],
            unsettled_acks: vec![BTreeSet::new(); n],
            present: vec![BTreeSet::new(); n],
        };
        for ci in 0..n {
            for ri in 0..f.counts[ci].len() {
                let (p, m) = f.counts[ci][ri];
                f.classify(ci, ri, Held::of(p, m), true);
            }
        }
        f
    }

    /// A note for a violation involving `regions` when server threads write one of their lines.
    fn shared_hint(&self, regions: &[Region]) -> String {
        let shared = regions.iter().find_map(|r| {
            let end = r.addr + r.len.max(1) - 1;
            (r.addr & !(LINE_BYTES - 1)..=end & !(LINE_BYTES - 1))
                .step_by(LINE_BYTES as usize)
                .find(|l| self.server_lines.contains(l))
        });
        match shared {
            Some(line) => format!(
                "; note: server threads also write line {line:#x}: with DDIO their write-back of it can persist \
                 remote data early, which no design orders (docs/design.md §9)"
            ),
            None => String::new(),
        }
    }

    /// Checks the image; `acked(gid)` tells whether the region's persist ACK had reached its
    /// client by the crash. Returns the first violation, naming the thread and the regions.
    pub fn check(&self, img: &MemImage, acked: &dyn Fn(u64) -> bool) -> Result<(), String> {
        self.check_held(&|ci, ri| self.held(ci, ri, img), acked)
    }

    /// [`RegionOrder::check`] with each region's [`Held`] from `held(client, region)`.
    fn check_held(&self, held: &dyn Fn(usize, usize) -> Held, acked: &dyn Fn(u64) -> bool) -> Result<(), String> {
        for (ci, (thread, regions)) in self.clients.iter().enumerate() {
            let held: Vec<Held> = (0..regions.len()).map(|ri| held(ci, ri)).collect();
            let name = |ri: usize| {
                let r = regions[ri];
                format!("region #{ri} (gid {}, [{:#x}, {:#x}))", r.gid, r.addr, r.addr + r.len)
            };
            let settled = |h: Held| matches!(h, Held::Complete | Held::Unknown);
            for (ri, h) in held.iter().enumerate() {
                if !settled(*h) && acked(regions[ri].gid) {
                    let hint = self.shared_hint(&[regions[ri]]);
                    return Err(format!(
                        "T{thread}: {} is {:?} although its persist ACK was delivered{hint}",
                        name(ri),
                        h
                    ));
                }
            }
            let Some(last) = held.iter().rposition(|&h| matches!(h, Held::Partial | Held::Complete)) else { continue };
            if let Some(ri) = held[..last].iter().position(|&h| !settled(h)) {
                let hint = self.shared_hint(&[regions[ri], regions[last]]);
                return Err(format!(
                    "T{thread}: {} is {:?} but the later {} is durable (regions must become durable in order){hint}",
                    name(ri),
                    held[ri],
                    name(last)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmsim_trace::{text::parse_str, WordVal};

    fn order() -> (Trace, RegionOrder) {
        let t = parse_str(
            "t",
            "# pmsim trace v1\nthreads 2\nT1 rdma_pwrite 0 0x100000000 16\nT1 rdma_pwrite 0 0x100000100 24\nT1 rdma_pwrite 0 0x100000200 8\nT1 rdma_pwrite 0 0x100000000 8\n",
        )
        .unwrap();
        let ro = RegionOrder::new(&t);
        (t, ro)
    }

    fn img(words: &[(u64, u64)]) -> MemImage {
        let mut m = MemImage::new();
        for &(w, id) in words {
            m.set(w, WordVal { id, data: 0 });
        }
        m
    }

    const NO: &dyn Fn(u64) -> bool = &|_| false;

    #[test]
    fn in_order_prefixes_with_a_partial_last_region_pass() {
        let (_, ro) = order();
        assert!(ro.check(&img(&[]), NO).is_ok());
        assert!(ro.check(&img(&[(0x1_0000_0000, 0)]), NO).is_ok());
        assert!(ro.check(&img(&[(0x1_0000_0000, 0), (0x1_0000_0008, 0), (0x1_0000_0108, 1)]), NO).is_ok());
        // Region 3 overwrote region 0's first word: region 0 still counts as complete.
        let all = [
            (0x1_0000_0000, 3),
            (0x1_0000_0008, 0),
            (0x1_0000_0100, 1),
            (0x1_0000_0108, 1),
            (0x1_0000_0110, 1),
            (0x1_0000_0200, 2),
        ];
        assert!(ro.check(&img(&all), &|_| true).is_ok());
    }

    #[test]
    fn a_hole_or_an_early_partial_region_fails() {
        let (_, ro) = order();
        let e = ro.check(&img(&[(0x1_0000_0200, 2)]), NO).unwrap_err();
        assert!(e.contains("T1: region #0") && e.contains("Absent") && e.contains("later region #2"), "{e}");
        assert!(!e.contains("note:"), "no server thread writes these lines: {e}");
        let e = ro.check(&img(&[(0x1_0000_0000, 0), (0x1_0000_0108, 1), (0x1_0000_0200, 2)]), NO).unwrap_err();
        assert!(e.contains("region #0") && e.contains("Partial"), "{e}");
        // An earlier region of the client over a later one's word: the later one is missing there.
        let e = ro.check(&img(&[(0x1_0000_0000, 0), (0x1_0000_0008, 0)]), &|g| g == 3).unwrap_err();
        assert!(e.contains("region #3") && e.contains("Absent"), "{e}");
    }

    #[test]
    fn another_writers_value_proves_nothing_about_a_region() {
        // T0 and T1 write the same words; T2 is a server thread.
        let t = parse_str(
            "t",
            "# pmsim trace v1\nthreads 3\nT0 rdma_pwrite 0 0x100000000 16\nT0 rdma_pwrite 0 0x100000100 8\n\
             T1 rdma_pwrite 0 0x100000000 8\nT2 store 0x100000008 8 01\n",
        )
        .unwrap();
        let ro = RegionOrder::new(&t);
        let (r00, r01, r10) = (0, 1, 2);
        let server = 3;
        // T0's first region shows T1's region and the server's store: T0's second region may be
        // durable, and T0's first may have been acknowledged.
        let both_over = img(&[(0x1_0000_0000, r10), (0x1_0000_0008, server), (0x1_0000_0100, r01)]);
        assert!(ro.check(&both_over, &|_| true).is_ok());
        // One word overwritten by T1, the other missing: not durable, so T0's second region must
        // not be, and T0's first must not have been acknowledged.
        let one_missing = img(&[(0x1_0000_0000, r10), (0x1_0000_0100, r01)]);
        let e = ro.check(&one_missing, NO).unwrap_err();
        assert!(e.contains("T0: region #0") && e.contains("Absent"), "{e}");
        // The server writes that line: the message names the likely cause.
        assert!(e.contains("server threads also write line 0x100000000"), "{e}");
        let e = ro.check(&img(&[(0x1_0000_0000, r10)]), &|g| g == r00).unwrap_err();
        assert!(e.contains("persist ACK"), "{e}");
    }

    #[test]
    fn an_acknowledged_region_must_be_complete() {
        let (_, ro) = order();
        let e = ro.check(&img(&[(0x1_0000_0000, 0)]), &|g| g == 0).unwrap_err();
        assert!(e.contains("persist ACK was delivered"), "{e}");
    }

    #[test]
    fn following_an_image_word_by_word_gives_the_verdicts_of_reading_it_whole() {
        // Two clients whose regions overlap each other's and their own, and a server store:
        // random word changes (each of these writers, the initial value, no value), compared
        // after every change with the whole-image check, ACKs drawn per region.
        let t = parse_str(
            "t",
            "# pmsim trace v1\nthreads 3\nT0 rdma_pwrite 0 0x100000000 24\nT0 rdma_pwrite 0 0x100000008 8\n\
             T1 rdma_pwrite 0 0x100000010 16\nT0 rdma_pwrite 0 0x100000000 40\nT1 rdma_pwrite 0 0x100000003 2\n\
             T2 store 0x100000018 8 01\n",
        )
        .unwrap();
        let ro = RegionOrder::new(&t);
        let words: Vec<u64> = (0..6).map(|i| 0x1_0000_0000 + 8 * i).collect();
        let ids = [None, Some(INITIAL_ID), Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)];
        let mut seed = 0x5eed_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // ACK times per region; each image is checked at a random time among them.
        let ack_at = |g: u64| (g % 3 != 2).then_some(10 * g + 5);
        let (mut whole, mut followed) = (MemImage::new(), ro.follower(&ack_at));
        let (mut oks, mut errs) = (0, 0);
        for _ in 0..5000 {
            let w = words[(next() % words.len() as u64) as usize];
            let new = ids[(next() % ids.len() as u64) as usize];
            followed.changed(&ro, w, whole.get(w).map(|v| v.id), new);
            match new {
                Some(id) => whole.set(w, WordVal { id, data: 0 }),
                None => whole.remove(w),
            }
            let t = next() % 60;
            let acked = |g: u64| ack_at(g).is_some_and(|at| at <= t);
            let expected = ro.check(&whole, &acked);
            assert_eq!(followed.check(&ro, t), expected);
            if expected.is_ok() {
                oks += 1;
            } else {
                errs += 1;
            }
        }
        assert!(oks > 100 && errs > 100, "{oks} passing and {errs} failing images: not both kinds exercised");
    }
}
