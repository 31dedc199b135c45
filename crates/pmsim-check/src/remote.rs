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
//! later region overwrote it); a word that shows anything else (the initial value, a server
//! thread's store) counts as missing. Regions and server threads writing the same words are
//! therefore not checked against each other.

use pmsim_trace::{Kind, MemImage, Trace};
use rustc_hash::FxHashMap;

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
}

/// The regions of a trace's client threads, in posting order.
#[derive(Clone, Debug, Default)]
pub struct RegionOrder {
    clients: Vec<(u16, Vec<Region>)>,
    /// gid -> (client index, region index).
    index: FxHashMap<u64, (u32, u32)>,
}

impl RegionOrder {
    pub fn new(trace: &Trace) -> RegionOrder {
        let mut ro = RegionOrder::default();
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

    fn held(&self, ci: usize, ri: usize, img: &MemImage) -> Held {
        let r = self.clients[ci].1[ri];
        let (mut present, mut total) = (0u64, 0u64);
        let mut w = r.addr & !7;
        while w < r.addr + r.len {
            total += 1;
            if let Some(v) = img.get(w) {
                let later = self.index.get(&v.id).is_some_and(|&(c, i)| c as usize == ci && i as usize >= ri);
                present += later as u64;
            }
            w += 8;
        }
        match present {
            0 => Held::Absent,
            p if p == total => Held::Complete,
            _ => Held::Partial,
        }
    }

    /// Checks the image; `acked(gid)` tells whether the region's persist ACK had reached its
    /// client by the crash. Returns the first violation, naming the thread and the regions.
    pub fn check(&self, img: &MemImage, acked: &dyn Fn(u64) -> bool) -> Result<(), String> {
        for (ci, (thread, regions)) in self.clients.iter().enumerate() {
            let held: Vec<Held> = (0..regions.len()).map(|ri| self.held(ci, ri, img)).collect();
            let name = |ri: usize| {
                let r = regions[ri];
                format!("region #{ri} (gid {}, [{:#x}, {:#x}))", r.gid, r.addr, r.addr + r.len)
            };
            for (ri, h) in held.iter().enumerate() {
                if *h != Held::Complete && acked(regions[ri].gid) {
                    return Err(format!("T{thread}: {} is {:?} although its persist ACK was delivered", name(ri), h));
                }
            }
            let Some(last) = held.iter().rposition(|&h| h != Held::Absent) else { continue };
            if let Some(ri) = held[..last].iter().position(|&h| h != Held::Complete) {
                return Err(format!(
                    "T{thread}: {} is {:?} but the later {} is durable (regions must become durable in order)",
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
        let e = ro.check(&img(&[(0x1_0000_0000, 0), (0x1_0000_0108, 1), (0x1_0000_0200, 2)]), NO).unwrap_err();
        assert!(e.contains("region #0") && e.contains("Partial"), "{e}");
        // A server store over a region's word is not the region.
        let e = ro.check(&img(&[(0x1_0000_0000, 99), (0x1_0000_0008, 0), (0x1_0000_0100, 1)]), NO).unwrap_err();
        assert!(e.contains("region #0"), "{e}");
    }

    #[test]
    fn an_acknowledged_region_must_be_complete() {
        let (_, ro) = order();
        let e = ro.check(&img(&[(0x1_0000_0000, 0)]), &|g| g == 0).unwrap_err();
        assert!(e.contains("persist ACK was delivered"), "{e}");
    }
}
