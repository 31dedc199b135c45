//! P-ART (RECIPE, SOSP'19): the persistent adaptive radix tree (ART with ROWEX).
//!
//! Persist pattern reproduced:
//! - layout: a persistent root pointer to an N256 root; nodes N4/N16/N48/N256 with a header (8 B
//!   version lock, type, level, count, compact count, prefix length, 8 prefix bytes stored
//!   right-aligned to the node's level); leaves are tagged pointers to the value record, whose first
//!   8 bytes are the key word; the tree indexes the key word's 8 big-endian bytes.
//! - every insert first `ofence`s its record (RECIPE flushes the key object before inserting it).
//! - insert into a node with room, under its version lock: N4/N16: bump the counts, store the key
//!   byte, `ofence` (the node flush), store the child pointer (movnt + fence), `ofence`; N48: store
//!   the child, `ofence`, store the child index, `ofence`; N256: store the child, `ofence`.
//! - grow (node full): under the node's and the parent's locks, write the larger copy with the
//!   new child and `ofence`, swap the parent's child pointer and `ofence`, unlock the old node as
//!   obsolete.
//! - leaf collision: write a new N4 (prefix = the bytes the two keys share) holding both leaves,
//!   `ofence`, swap the parent slot, `ofence`.
//! - prefix mismatch: write a new N4 above the node (the shared part of the prefix), `ofence`,
//!   swap the parent's pointer, `ofence`, shorten the node's prefix length, `ofence`. A crash before
//!   the shortening leaves a longer stale prefix, which is harmless because prefix bytes are
//!   located by the node's level (as ROWEX does).
//! - recovery: walk from the root; every leaf's key must agree with every byte on its path; locks
//!   are reset.
//!
//! Synchronisation: a traversal reads each node's version word with an `acquire` (an atomic load
//! in RECIPE's code) before the rest of the node, so it sees every critical section that unlocked
//! the node before it (and, through the parent, every node published there).
//!
//! Built on [`crate::blocks::node`] (a node persisted before the pointer swap that links it).
//! Simplifications: 8-byte keys only (the key word); no deletes (the benchmark inserts and
//! searches); obsolete nodes are not reclaimed.

use super::common::*;
use crate::blocks::node::{link, persist_new};
use crate::ctx::{Ctx, Gen};
use crate::params::{ParamSpec, Params};
use crate::recovery::{Recovery, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;
use rustc_hash::FxHashSet;

pub static P_ART: WorkloadSpec = WorkloadSpec {
    name: "p-art",
    description: "RECIPE P-ART: record ofence, key byte, ofence, child pointer, ofence; grow/split write a node, ofence, swap the parent pointer",
    params: PARAMS,
    generate,
};

const TAG: u64 = 1 << 63;
const N4: u8 = 1;
const N16: u8 = 2;
const N48: u8 = 3;
const N256: u8 = 4;
const TYPE: u64 = 8;
const LEVEL: u64 = 9;
const COUNTS: u64 = 10; // count u16, compact count u16
const PLEN: u64 = 14;
const PREFIX: u64 = 16;
const BODY: u64 = 24;

const PARAMS: &[ParamSpec] = &[COMPUTE_PARAM];

fn kbyte(w: u64, d: u64) -> u64 {
    (w >> (56 - 8 * d)) & 0xff
}

fn size_of(t: u8) -> u64 {
    match t {
        N4 => 64,
        N16 => 168,
        N48 => 664,
        _ => 2072,
    }
}

fn cap_of(t: u8) -> usize {
    match t {
        N4 => 4,
        N16 => 16,
        N48 => 48,
        _ => 256,
    }
}

fn keys_off(_t: u8) -> u64 {
    BODY
}

fn child_off(t: u8, i: u64) -> u64 {
    match t {
        N4 => 32 + 8 * i,
        N16 => 40 + 8 * i,
        N48 => 280 + 8 * i,
        _ => BODY + 8 * i,
    }
}

/// A node's image: (key byte, child) pairs, from bytes.
fn children(t: u8, b: &[u8]) -> Vec<(u64, u64)> {
    let cc = u64_at(b, 8) >> 32 & 0xffff;
    match t {
        N4 | N16 => (0..cc.min(cap_of(t) as u64))
            .map(|i| (b[(keys_off(t) + i) as usize] as u64, u64_at(b, child_off(t, i) as usize)))
            .filter(|e| e.1 != 0)
            .collect(),
        N48 => (0..256u64)
            .filter_map(|k| {
                let ix = b[(BODY + k) as usize] as u64;
                (ix != 0 && ix <= 48).then(|| (k, u64_at(b, child_off(N48, ix - 1) as usize)))
            })
            .filter(|e| e.1 != 0)
            .collect(),
        _ => (0..256u64).map(|k| (k, u64_at(b, child_off(N256, k) as usize))).filter(|e| e.1 != 0).collect(),
    }
}

/// Builds a node buffer of type `t` at `level` with prefix bytes of `w` for [level-plen, level).
fn build(t: u8, level: u64, plen: u64, w: u64, kids: &[(u64, u64)]) -> Vec<u8> {
    let mut b = vec![0u8; size_of(t) as usize];
    b[TYPE as usize] = t;
    b[LEVEL as usize] = level as u8;
    let n = kids.len() as u64;
    b[COUNTS as usize..COUNTS as usize + 4].copy_from_slice(&((n | n << 16) as u32).to_le_bytes());
    b[PLEN as usize] = plen as u8;
    for d in level - plen..level {
        b[(PREFIX + 8 - (level - d)) as usize] = kbyte(w, d) as u8;
    }
    for (i, &(k, c)) in kids.iter().enumerate() {
        let i = i as u64;
        match t {
            N4 | N16 => {
                b[(keys_off(t) + i) as usize] = k as u8;
                put_u64(&mut b, child_off(t, i) as usize, c);
            }
            N48 => {
                b[(BODY + k) as usize] = (i + 1) as u8;
                put_u64(&mut b, child_off(t, i) as usize, c);
            }
            _ => put_u64(&mut b, child_off(t, k) as usize, c),
        }
    }
    b
}

struct Ix {
    root: u64,
}

impl Ix {
    /// Visits a node: acquire its version word, then read the rest of its header.
    fn header(c: &mut Ctx<'_>, n: u64) -> Vec<u8> {
        let v = c.acquire(n);
        let mut h = v.to_le_bytes().to_vec();
        h.extend(c.load_bytes(n + 8, BODY as usize - 8));
        h
    }

    fn write_new(c: &mut Ctx<'_>, b: &[u8]) -> u64 {
        let n = c.alloc_pm(b.len() as u64, 64);
        persist_new(c, n, b);
        n
    }

    /// The child pointer slot of key byte `k` in node `n` (loads as a lookup does).
    fn slot(c: &mut Ctx<'_>, n: u64, t: u8, k: u64) -> Option<u64> {
        match t {
            N4 | N16 => {
                let cc = c.load(n + COUNTS + 2, 2);
                let keys = c.load_bytes(n + keys_off(t), cap_of(t));
                c.compute(PROBE_COST * cc);
                (0..cc).find(|&i| keys[i as usize] as u64 == k).map(|i| n + child_off(t, i))
            }
            N48 => {
                let ix = c.load(n + BODY + k, 1);
                (ix != 0).then(|| n + child_off(N48, ix - 1))
            }
            _ => Some(n + child_off(N256, k)),
        }
    }

    fn change(c: &mut Ctx<'_>, n: u64, k: u64, child: u64) {
        let t = c.peek(n + TYPE, 1) as u8;
        let s = Self::slot(c, n, t, k).expect("parent slot exists");
        link(c, s, child);
    }

    fn add(c: &mut Ctx<'_>, n: u64, t: u8, k: u64, child: u64) {
        let counts = c.peek(n + COUNTS, 4);
        let (cnt, cc) = (counts & 0xffff, counts >> 16);
        c.store_n(n + COUNTS, 4, (cnt + 1) | (cc + 1) << 16);
        match t {
            N4 | N16 => {
                c.store_n(n + keys_off(t) + cc, 1, k);
                c.ofence();
                c.store_u64(n + child_off(t, cc), child);
                c.ofence();
            }
            N48 => {
                c.store_u64(n + child_off(N48, cc), child);
                c.ofence();
                c.store_n(n + BODY + k, 1, cc + 1);
                c.ofence();
            }
            _ => {
                c.store_u64(n + child_off(N256, k), child);
                c.ofence();
            }
        }
    }
}

impl Index for Ix {
    fn insert(&mut self, c: &mut Ctx<'_>, w: u64, rec: u64) {
        c.ofence();
        let leaf = rec | TAG;
        let mut node = c.load_u64(self.root);
        let (mut parent, mut pkey, mut depth) = (0u64, 0u64, 0u64);
        loop {
            let h = Self::header(c, node);
            let t = h[TYPE as usize];
            let level = h[LEVEL as usize] as u64;
            let plen = h[PLEN as usize] as u64;
            c.compute(HASH_COST);
            if let Some(d) = (depth..level).find(|&d| h[(PREFIX + 8 - (level - d)) as usize] as u64 != kbyte(w, d)) {
                // Prefix mismatch at d: a new N4 above the node holds the shared part.
                let vp = vlock(c, parent);
                let vn = vlock(c, node);
                let node_byte = h[(PREFIX + 8 - (level - d)) as usize] as u64;
                let mut kids = vec![(kbyte(w, d), leaf), (node_byte, node)];
                kids.sort_unstable();
                let n4 = Self::write_new(c, &build(N4, d, d - depth, w, &kids));
                Self::change(c, parent, pkey, n4);
                c.store_n(node + PLEN, 1, plen.min(level - d - 1));
                c.ofence();
                vunlock(c, node, vn);
                vunlock(c, parent, vp);
                return;
            }
            let k = kbyte(w, level);
            let slot = Self::slot(c, node, t, k);
            let next = match slot {
                Some(s) => c.load_u64(s),
                None => 0,
            };
            if next == 0 {
                let vn = vlock(c, node);
                let cc = c.peek(node + COUNTS + 2, 2) as usize;
                if t != N256 && cc >= cap_of(t) {
                    let vp = vlock(c, parent);
                    let b = c.load_bytes(node, size_of(t) as usize);
                    let mut kids = children(t, &b);
                    kids.push((k, leaf));
                    kids.sort_unstable();
                    let bigger = Self::write_new(c, &build(t + 1, level, plen, w, &kids));
                    Self::change(c, parent, pkey, bigger);
                    vunlock_obsolete(c, node, vn);
                    vunlock(c, parent, vp);
                } else {
                    Self::add(c, node, t, k, leaf);
                    vunlock(c, node, vn);
                }
                return;
            }
            if next & TAG != 0 {
                let vn = vlock(c, node);
                let w2 = c.load_u64(next & !TAG);
                let mut d = level + 1;
                while d < 7 && kbyte(w, d) == kbyte(w2, d) {
                    d += 1;
                }
                let mut kids = vec![(kbyte(w, d), leaf), (kbyte(w2, d), next)];
                kids.sort_unstable();
                let n4 = Self::write_new(c, &build(N4, d, d - level - 1, w, &kids));
                Self::change(c, node, k, n4);
                vunlock(c, node, vn);
                return;
            }
            parent = node;
            pkey = k;
            depth = level + 1;
            node = next;
        }
    }

    fn search(&mut self, c: &mut Ctx<'_>, w: u64) -> Option<u64> {
        let mut node = c.load_u64(self.root);
        loop {
            let h = Self::header(c, node);
            let t = h[TYPE as usize];
            let s = Self::slot(c, node, t, kbyte(w, h[LEVEL as usize] as u64))?;
            let next = c.load_u64(s);
            if next == 0 {
                return None;
            }
            if next & TAG != 0 {
                return (c.load_u64(next & !TAG) == w).then_some(next & !TAG);
            }
            node = next;
        }
    }
}

fn generate(p: &Params) -> Generated {
    let mut g = Gen::new(p);
    let root = g.heap.alloc_pm(64, 64);
    {
        let mut c = g.ctx(0);
        let r = Ix::write_new(&mut c, &build(N256, 0, 0, 0, &[]));
        c.store_u64(root, r);
        c.dfence();
    }
    let mut ix = Ix { root };
    let (trace, truth) = run(p, g, &mut ix, Mix::default());
    Generated { trace, recovery: Box::new(ArtRecovery { root, truth }) }
}

/// A node still to walk: (address, depth, path bytes known so far as (position, byte)).
type Pending = (u64, u64, Vec<(u64, u64)>);

struct ArtRecovery {
    root: u64,
    truth: Truth,
}

impl Recovery for ArtRecovery {
    fn check(&self, img: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> R<RecoveryReport> {
        let mut found = Vec::new();
        let root = img.read_u64(self.root);
        let mut seen = FxHashSet::default();
        // (node, depth, path bytes known so far as (position, byte))
        let mut stack: Vec<Pending> = if root != 0 { vec![(root, 0, Vec::new())] } else { Vec::new() };
        while let Some((n, depth, path)) = stack.pop() {
            guard(&mut seen, n, "node")?;
            let h = img.read_bytes(n, BODY as usize);
            let t = h[TYPE as usize];
            let level = h[LEVEL as usize] as u64;
            let plen = h[PLEN as usize] as u64;
            if !(N4..=N256).contains(&t) || level > 7 || level < depth || level - depth > plen || plen > 8 {
                return err(format!("node {n:#x}: type {t}, level {level}, prefix {plen} at depth {depth}"));
            }
            let mut path = path;
            for d in depth..level {
                path.push((d, h[(PREFIX + 8 - (level - d)) as usize] as u64));
            }
            let b = img.read_bytes(n, size_of(t) as usize);
            for (k, child) in children(t, &b) {
                let mut p = path.clone();
                p.push((level, k));
                if child & TAG != 0 {
                    let rec = child & !TAG;
                    let w = img.read_u64(rec);
                    if let Some(&(d, _)) = p.iter().find(|&&(d, byte)| kbyte(w, d) != byte) {
                        return err(format!("leaf {w:#x} under node {n:#x} disagrees with its path at byte {d}"));
                    }
                    found.push((w, rec));
                } else {
                    stack.push((child, level + 1, p));
                }
            }
        }
        self.truth.verify(img, &found, dfence_done)
    }
}
