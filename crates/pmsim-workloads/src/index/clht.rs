//! P-CLHT (RECIPE, SOSP'19): the persistent cache-line hash table.
//!
//! Persist pattern reproduced:
//! - layout: a persistent root line (table pointer, resize lock); a table header line (bucket
//!   count, bucket array); 64 B buckets = lock word, 3 keys, 3 values, next-overflow pointer.
//! - insert: take the bucket's lock (an `rmw` on its first word, in PM as in CLHT); scan the chain;
//!   with a free slot: store the value (the record in the same epoch), `ofence` (its flush), store
//!   the key (movnt + fence), `ofence`; with none: fill a fresh overflow bucket (value and key),
//!   `ofence` (its flush), link it from the last bucket's next pointer, `ofence`; unlock.
//! - resize (when the overflow buckets created since the last resize exceed `expand_pct` % of the
//!   buckets, as CLHT's expansion threshold): take the resize lock, lock every old bucket, build a
//!   table twice as large without flushes, write it and `ofence` (the whole-table flush), swap the
//!   root's table pointer and `ofence`, release the resize lock; old buckets stay locked (retired).
//! - recovery: follow the root's table pointer; a slot is live when its key is non-zero; every key
//!   must be in its hash's chain; locks are reset.
//!
//! Simplification: no CLHT helper threads during resize; no shrinking.
//!
//! Synchronisation: CLHT reads the table pointer and (in searches) buckets without locks, relying
//! on x86-TSO (every load an acquire, every store a release). The trace says so (docs/design.md §3): the
//! root's table pointer is swapped by a `release` and read by an `acquire`, and a search reads a
//! bucket after an `acquire` of its lock word (released by the last insert into it). Otherwise a
//! thread could insert into a new table before the resizer's stores that built it had landed.

use super::common::*;
use crate::ctx::{Ctx, Gen};
use crate::params::{int, ParamSpec, Params};
use crate::recovery::{Recovery, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;
use rustc_hash::FxHashSet;

pub static P_CLHT: WorkloadSpec = WorkloadSpec {
    name: "p-clht",
    description: "RECIPE P-CLHT: 64 B buckets; value, ofence, key, ofence under a bucket lock; resize builds a table then swaps the root",
    params: PARAMS,
    generate,
};

const KEYS: u64 = 8;
const VALS: u64 = 32;
const NEXT: u64 = 56;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "initial_buckets",
        default: "512",
        unit: "buckets",
        range: int(1, 1 << 24),
        help: "initial table size (power of two)",
    },
    ParamSpec {
        name: "expand_pct",
        default: "1",
        unit: "%",
        range: int(1, 100),
        help: "overflow buckets (as % of buckets, at least 1) that trigger a resize",
    },
    COMPUTE_PARAM,
];

struct Ix {
    root: u64,
    expands: u64,
    expand_pct: u64,
}

/// Writes a table of `nb` buckets holding `items` (no fence: the caller flushes); returns the
/// table header's address and the bucket array's.
fn layout(c: &mut Ctx<'_>, nb: u64, items: &[(u64, u64)]) -> (u64, u64) {
    let mut chains: Vec<Vec<(u64, u64)>> = vec![Vec::new(); nb as usize];
    for &(k, v) in items {
        chains[(k & (nb - 1)) as usize].push((k, v));
    }
    let table = c.alloc_pm(64 * nb, 64);
    let mut buf = vec![0u8; 64 * nb as usize];
    let mut extra: Vec<(u64, Vec<u8>)> = Vec::new();
    for (b, ch) in chains.iter().enumerate() {
        // CLHT's sequential put: 3 pairs per bucket, then chained overflow buckets.
        let mut lines: Vec<Vec<u8>> = ch
            .chunks(3)
            .map(|part| {
                let mut l = vec![0u8; 64];
                for (j, &(k, v)) in part.iter().enumerate() {
                    put_u64(&mut l, (KEYS + 8 * j as u64) as usize, k);
                    put_u64(&mut l, (VALS + 8 * j as u64) as usize, v);
                }
                l
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        let addrs: Vec<u64> =
            (0..lines.len()).map(|i| if i == 0 { table + 64 * b as u64 } else { c.alloc_pm(64, 64) }).collect();
        for i in 0..lines.len() - 1 {
            put_u64(&mut lines[i], NEXT as usize, addrs[i + 1]);
        }
        for (i, l) in lines.into_iter().enumerate() {
            if i == 0 {
                buf[64 * b..64 * b + 64].copy_from_slice(&l);
            } else {
                extra.push((addrs[i], l));
            }
        }
    }
    store_nonzero_lines(c, table, &buf);
    for (a, l) in extra {
        c.store(a, &l);
    }
    let ht = c.alloc_pm(64, 64);
    c.store(ht, &[nb.to_le_bytes(), table.to_le_bytes()].concat());
    (ht, table)
}

impl Ix {
    fn bucket(&self, c: &mut Ctx<'_>, w: u64) -> u64 {
        let ht = c.acquire(self.root);
        let h = c.load_bytes(ht, 16);
        let (nb, table) = (u64_at(&h, 0), u64_at(&h, 8));
        table + 64 * (w & (nb - 1))
    }

    fn resize(&mut self, c: &mut Ctx<'_>) {
        c.lock(self.root + 8);
        let ht = c.load_u64(self.root);
        let h = c.load_bytes(ht, 16);
        let (nb, table) = (u64_at(&h, 0), u64_at(&h, 8));
        let mut items = Vec::new();
        for b in 0..nb {
            let mut a = table + 64 * b;
            c.lock(a);
            while a != 0 {
                let l = c.load_bytes(a, 64);
                for j in 0..3 {
                    let k = u64_at(&l, (KEYS + 8 * j) as usize);
                    if k != 0 {
                        items.push((k, u64_at(&l, (VALS + 8 * j) as usize)));
                    }
                }
                c.compute(PROBE_COST * 3);
                a = u64_at(&l, NEXT as usize);
            }
        }
        let (nht, _) = layout(c, 2 * nb, &items);
        c.ofence();
        c.release_value(self.root, nht);
        c.ofence();
        c.unlock(self.root + 8);
        self.expands = 0;
    }
}

impl Index for Ix {
    fn insert(&mut self, c: &mut Ctx<'_>, w: u64, rec: u64) {
        let b = self.bucket(c, w);
        c.lock(b);
        let mut a = b;
        loop {
            let l = c.load_bytes(a, 64);
            c.compute(PROBE_COST * 3);
            if let Some(j) = (0..3).find(|&j| u64_at(&l, (KEYS + 8 * j) as usize) == 0) {
                c.store_u64(a + VALS + 8 * j, rec);
                c.ofence();
                c.store_u64(a + KEYS + 8 * j, w);
                c.ofence();
                c.unlock(b);
                return;
            }
            let next = u64_at(&l, NEXT as usize);
            if next == 0 {
                let nbk = c.alloc_pm(64, 64);
                c.store_u64(nbk + VALS, rec);
                c.store_u64(nbk + KEYS, w);
                c.ofence();
                c.store_u64(a + NEXT, nbk);
                c.ofence();
                c.unlock(b);
                self.expands += 1;
                let ht = c.acquire(self.root);
                let nb = c.load_u64(ht);
                if self.expands > (nb * self.expand_pct / 100).max(1) {
                    self.resize(c);
                }
                return;
            }
            a = next;
        }
    }

    fn search(&mut self, c: &mut Ctx<'_>, w: u64) -> Option<u64> {
        let mut a = self.bucket(c, w);
        c.acquire(a);
        while a != 0 {
            let l = c.load_bytes(a, 64);
            if let Some(j) = (0..3).find(|&j| u64_at(&l, (KEYS + 8 * j) as usize) == w) {
                return Some(u64_at(&l, (VALS + 8 * j) as usize));
            }
            a = u64_at(&l, NEXT as usize);
        }
        None
    }
}

fn generate(p: &Params) -> Generated {
    let nb = p.get("initial_buckets").clamp(1, 1 << 24).next_power_of_two();
    let mut g = Gen::new(p);
    let root = g.heap.alloc_pm(64, 64);
    {
        let mut c = g.ctx(0);
        let (ht, _) = layout(&mut c, nb, &[]);
        c.ofence();
        c.store_u64(root, ht);
        c.dfence();
    }
    let mut ix = Ix { root, expands: 0, expand_pct: p.get("expand_pct") };
    let (trace, truth) = run(p, g, &mut ix, Mix::default());
    Generated { trace, recovery: Box::new(ClhtRecovery { root, truth }) }
}

struct ClhtRecovery {
    root: u64,
    truth: Truth,
}

impl Recovery for ClhtRecovery {
    fn check(&self, img: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> R<RecoveryReport> {
        let mut found = Vec::new();
        let ht = img.read_u64(self.root);
        if ht != 0 {
            let (nb, table) = (img.read_u64(ht), img.read_u64(ht + 8));
            if !nb.is_power_of_two() || nb > 1 << 28 || table == 0 {
                return err(format!("table header {ht:#x}: {nb} buckets at {table:#x}"));
            }
            let mut seen = FxHashSet::default();
            for b in 0..nb {
                let mut a = table + 64 * b;
                while a != 0 {
                    guard(&mut seen, a, "bucket")?;
                    for j in 0..3 {
                        let k = img.read_u64(a + KEYS + 8 * j);
                        if k == 0 {
                            continue;
                        }
                        if k & (nb - 1) != b {
                            return err(format!("key {k:#x} in the chain of bucket {b}"));
                        }
                        found.push((k, img.read_u64(a + VALS + 8 * j)));
                    }
                    a = img.read_u64(a + NEXT);
                }
            }
        }
        self.truth.verify(img, &found, dfence_done)
    }
}
