//! What every index workload shares: the operation driver, value records, version locks and the
//! check every structure's recovery ends with.
//!
//! An insert first writes a *record* (key bytes then value bytes, 16..128 B each) to freshly
//! allocated PM, then calls the structure's insert with the 8-byte key word and the record's
//! address, which the structure stores as the original stores its 8-byte value. Each structure
//! orders the record before the store that makes it reachable, as the benchmarks of the originals
//! persist the key/value objects before inserting them. Every insert and delete ends with a
//! `dfence` (the original's final flush+fence before returning); searches do not persist.

use super::keys;
use crate::blocks::node::LeafPiece;
use crate::ctx::{Ctx, Gen, Interleaver};
use crate::params::{compute, ParamSpec, Params};
use crate::recovery::{piece, OpLog, OpRecord, PieceCache, RecoveryError, RecoveryReport};
use pmsim_trace::MemImage;
use rustc_hash::{FxHashMap, FxHashSet};

pub const OP_INSERT: u8 = 0;
pub const OP_DELETE: u8 = 2;
pub const OP_SEARCH: u8 = 3;

/// Instructions charged for hashing or comparing a key (modest, fixed, the same for every design).
pub const HASH_COST: u64 = 20;
/// Instructions charged per slot or entry examined.
pub const PROBE_COST: u64 = 2;

/// Parameters every index workload has besides the common ones.
pub const COMPUTE_PARAM: ParamSpec = compute("100", "application work before each operation (request handling)");

/// The top `bits` bits of `h` (0 when `bits` is 0): the directory index of extendible hashing.
pub fn top(h: u64, bits: u64) -> u64 {
    if bits == 0 {
        0
    } else {
        h >> (64 - bits.min(64))
    }
}

pub type R<T> = Result<T, RecoveryError>;

pub fn err<T>(msg: impl Into<String>) -> R<T> {
    Err(RecoveryError::new(msg))
}

/// A structure the driver runs operations on.
pub trait Index {
    /// Inserts `word` with its value record at `rec` (a new key).
    fn insert(&mut self, c: &mut Ctx<'_>, word: u64, rec: u64);
    /// Looks `word` up; returns the record address.
    fn search(&mut self, c: &mut Ctx<'_>, word: u64) -> Option<u64>;
    /// Deletes `word` (a present key); only structures whose benchmark deletes implement it.
    fn delete(&mut self, c: &mut Ctx<'_>, word: u64) -> bool {
        let _ = (c, word);
        false
    }
}

/// Operation mix (percent of operations; the rest are inserts of new keys).
#[derive(Clone, Copy, Default)]
pub struct Mix {
    pub search_pct: u64,
    pub delete_pct: u64,
}

/// The ground truth recovery checks against: which record holds which key, and the op log.
pub struct Truth {
    pub key_size: usize,
    pub value_size: usize,
    /// record address -> key word
    pub records: FxHashMap<u64, u64>,
    /// op key id -> key word
    pub words: Vec<u64>,
    pub log: OpLog,
    /// The op log by key, per key order, for [`Truth::verify_part`] (built on first use).
    index: std::sync::Mutex<Vec<(KeyOrder, std::sync::Arc<OpIndex>)>>,
}

/// Runs `p.ops` operations per thread on `ix` and returns the truth (the log is filled in by the
/// caller after `Gen::finish`).
pub fn drive(p: &Params, g: &mut Gen, ix: &mut dyn Index, mix: Mix) -> Truth {
    let compute = p.get("compute");
    let (ks, vs) = (p.key_size, p.value_size);
    let mut t = Truth {
        key_size: ks,
        value_size: vs,
        records: FxHashMap::default(),
        words: Vec::new(),
        log: OpLog::default(),
        index: Default::default(),
    };
    let mut next_id = 0u64;
    let mut used: FxHashSet<u64> = FxHashSet::default();
    // Live keys: (id, record); searches and deletes pick among them.
    let mut live: Vec<(u64, u64)> = Vec::new();
    Interleaver::run(g, p.threads, p.ops, |c, _| {
        let r = c.rng().below(100);
        if r < mix.search_pct + mix.delete_pct && !live.is_empty() {
            let i = c.rng().below(live.len() as u64) as usize;
            let (id, rec) = live[i];
            let w = t.words[id as usize];
            if r < mix.search_pct {
                c.begin("search");
                c.compute(compute);
                let got = ix.search(c, w);
                // A generator bug, not bad input: the structure lost a key it holds.
                assert_eq!(got, Some(rec), "search lost key {w:#x}");
                c.end("search", OpRecord { op: OP_SEARCH, key: id, value: rec, ..Default::default() });
            } else {
                live.swap_remove(i);
                c.begin("delete");
                c.compute(compute);
                let ok = ix.delete(c, w);
                assert!(ok, "delete missed key {w:#x}");
                c.end("delete", OpRecord { op: OP_DELETE, key: id, value: rec, ..Default::default() });
                c.op_dfence();
            }
            return;
        }
        // Key ids are consecutive; skip the (astronomically rare) unusable or repeated words.
        let mut w = keys::key_word(p.seed, next_id);
        while !keys::usable(w) || used.contains(&w) {
            t.words.push(w);
            next_id += 1;
            w = keys::key_word(p.seed, next_id);
        }
        let id = next_id;
        next_id += 1;
        used.insert(w);
        t.words.push(w);
        c.begin("insert");
        c.compute(compute);
        let rec = c.alloc_pm((ks + vs) as u64, 16);
        c.store(rec, &keys::record_bytes(w, ks, vs));
        t.records.insert(rec, w);
        c.compute(HASH_COST);
        ix.insert(c, w, rec);
        live.push((id, rec));
        c.end("insert", OpRecord { op: OP_INSERT, key: id, value: rec, ..Default::default() });
        c.op_dfence();
    });
    t
}

/// Runs the operations ([`drive`]) and ends the trace: the trace and the truth with its op log.
pub fn run(p: &Params, mut g: Gen, ix: &mut dyn Index, mix: Mix) -> (pmsim_trace::Trace, Truth) {
    let mut truth = drive(p, &mut g, ix, mix);
    let (trace, log) = g.finish();
    truth.log = log;
    (trace, truth)
}

/// What one key range of a recovered structure contributes to [`Truth::verify`]: a recovery
/// split into pieces (one per segment, each owning a range of keys) verifies each piece's items
/// with [`Truth::verify_part`] inside the piece, and [`Truth::combine`]s the parts.
#[derive(Clone, Debug, Default)]
pub struct Part {
    /// Distinct keys found.
    pub items: u64,
    /// Durable operations on keys of the range verified.
    pub checked: u64,
    /// The first failing item in the part's order.
    pub item_err: Option<String>,
    /// The failing durable operation that comes first in the op log: (its index, message).
    pub op_err: Option<(usize, String)>,
}

/// [`Truth::verify`]'s checks of one found item that need nothing but the item and the image
/// (so a piece may make them once and cache them): `Unknown` fails before the duplicate-key
/// check, `Bytes` after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ItemCheck {
    Ok,
    Unknown(String),
    Bytes(String),
}

/// A found item with its [`ItemCheck`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub key: u64,
    pub rec: u64,
    pub check: ItemCheck,
}

/// The order in which the parts of a structure own ranges of keys ([`Truth::verify_part`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// By key word (extendible hashing's top bits, a B-tree's keys).
    Natural,
    /// By the bits of `key >> shift`, lowest first: the keys whose `(key >> shift) mod 2^m` is
    /// `i` (a linear-hashing segment's) are one range of this order ([`KeyOrder::low_bits`]).
    LowBits(u32),
}

impl KeyOrder {
    /// Where key `w` sits in this order.
    pub fn of(self, w: u64) -> u64 {
        match self {
            KeyOrder::Natural => w,
            KeyOrder::LowBits(shift) => (w >> shift).reverse_bits(),
        }
    }

    /// In order `LowBits`: the range of the keys whose `(key >> shift) mod 2^m` is `i` (`i` <
    /// 2^m, m <= 64).
    pub fn low_bits(i: u64, m: u32) -> std::ops::RangeInclusive<u64> {
        if m == 0 {
            return 0..=u64::MAX;
        }
        let lo = i.reverse_bits();
        lo..=lo | (u64::MAX >> m)
    }
}

/// The op log indexed for range queries in one key order (built once, on first use).
#[derive(Default)]
struct OpIndex {
    /// (place in the order, key word, op index) of every insert or delete with a `durable_at`
    /// and a known key, sorted.
    by_word: Vec<(u64, u64, usize)>,
    /// Indexes of the operations with a `durable_at` whose key id is unknown.
    unknown: Vec<usize>,
    /// Key ids some operation deletes.
    deleted: FxHashSet<u64>,
}

impl Truth {
    fn index(&self, order: KeyOrder) -> std::sync::Arc<OpIndex> {
        let mut cached = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, ix)) = cached.iter().find(|(o, _)| *o == order) {
            return ix.clone();
        }
        let ix = std::sync::Arc::new({
            let mut ix = OpIndex::default();
            for (i, o) in self.log.ops.iter().enumerate() {
                if o.op == OP_DELETE {
                    ix.deleted.insert(o.key);
                }
                if o.durable_at.is_none() {
                    continue;
                }
                match self.words.get(o.key as usize) {
                    None => ix.unknown.push(i),
                    Some(&w) if o.op == OP_INSERT || o.op == OP_DELETE => ix.by_word.push((order.of(w), w, i)),
                    Some(_) => {}
                }
            }
            ix.by_word.sort_unstable();
            ix
        });
        cached.push((order, ix.clone()));
        ix
    }

    /// Checks the entries a structure's recovery found: each is a written record of its key, no
    /// key appears twice with different records, every durable insert is present and every
    /// durable delete absent. The first failure in `found`'s order, then in the op log's, is
    /// reported.
    pub fn verify(&self, img: &MemImage, found: &[(u64, u64)], dfence_done: &dyn Fn(u64) -> bool) -> R<RecoveryReport> {
        let part = self.verify_part(img, found, 0..=u64::MAX, dfence_done);
        self.combine([&part], dfence_done)
    }

    /// [`Truth::verify`]'s checks restricted to the keys in `range`: `found` (every item's key in
    /// `range`) and the durable operations on those keys. When the ranges of several parts are
    /// disjoint and cover every key, [`Truth::combine`] of the parts in the order of the whole
    /// `found` returns exactly what `verify` returns on their concatenation.
    pub fn verify_part(
        &self,
        img: &MemImage,
        found: &[(u64, u64)],
        range: std::ops::RangeInclusive<u64>,
        dfence_done: &dyn Fn(u64) -> bool,
    ) -> Part {
        let checked: Vec<Checked> = found.iter().map(|&(w, rec)| self.check_item(img, w, rec)).collect();
        self.verify_checked(&checked, range, dfence_done)
    }

    /// The checks of item (`w`, `rec`) that depend on it alone (see [`ItemCheck`]).
    pub fn check_item(&self, img: &MemImage, w: u64, rec: u64) -> Checked {
        let check = match self.records.get(&rec) {
            None => ItemCheck::Unknown(format!("key {w:#x} points to {rec:#x}, which is not a record ever written")),
            Some(&rw) if rw != w => ItemCheck::Unknown(format!("key {w:#x} points to the record of key {rw:#x}")),
            _ => {
                let want = keys::record_bytes(w, self.key_size, self.value_size);
                if img.read_bytes(rec, want.len()) != want {
                    ItemCheck::Bytes(format!("record of key {w:#x} at {rec:#x} holds bytes never written there"))
                } else {
                    ItemCheck::Ok
                }
            }
        };
        Checked { key: w, rec, check }
    }

    /// [`Truth::verify_part`] of items already checked one by one ([`Truth::check_item`]).
    pub fn verify_checked(
        &self,
        found: &[Checked],
        range: std::ops::RangeInclusive<u64>,
        dfence_done: &dyn Fn(u64) -> bool,
    ) -> Part {
        self.verify_checked_in(KeyOrder::Natural, found, range, dfence_done)
    }

    /// [`Truth::verify_checked`] for parts owning ranges of `order`.
    pub fn verify_checked_in(
        &self,
        order: KeyOrder,
        found: &[Checked],
        range: std::ops::RangeInclusive<u64>,
        dfence_done: &dyn Fn(u64) -> bool,
    ) -> Part {
        let mut map: FxHashMap<u64, u64> = FxHashMap::with_capacity_and_hasher(found.len(), Default::default());
        let mut part = Part::default();
        for c in found {
            let (w, rec) = (c.key, c.rec);
            debug_assert!(range.contains(&order.of(w)), "key {w:#x} outside its part's range");
            let e = match &c.check {
                ItemCheck::Unknown(m) => Some(m.clone()),
                _ if map.get(&w).is_some_and(|&old| old != rec) => {
                    Some(format!("key {w:#x} appears twice with different records"))
                }
                ItemCheck::Bytes(m) => Some(m.clone()),
                ItemCheck::Ok => None,
            };
            if e.is_some() {
                part.item_err = e;
                return part;
            }
            map.insert(w, rec);
        }
        part.items = map.len() as u64;
        let ix = self.index(order);
        let from = ix.by_word.partition_point(|&(o, _, _)| o < *range.start());
        for &(_, w, i) in ix.by_word[from..].iter().take_while(|&&(o, _, _)| o <= *range.end()) {
            let op = &self.log.ops[i];
            if !op.durable_at.is_some_and(dfence_done) {
                continue;
            }
            let bad = match op.op {
                // A key whose delete may have happened can be absent; otherwise it must be there.
                OP_INSERT => (map.get(&w) != Some(&op.value) && !ix.deleted.contains(&op.key))
                    .then(|| format!("insert of key {w:#x} completed before a dfence but is missing")),
                _ => map
                    .contains_key(&w)
                    .then(|| format!("delete of key {w:#x} completed before a dfence but the key is present")),
            };
            match bad {
                Some(m) if part.op_err.as_ref().is_none_or(|(j, _)| i < *j) => part.op_err = Some((i, m)),
                Some(_) => {}
                None => part.checked += 1,
            }
        }
        part
    }

    /// [`Truth::verify`] of the entries of a leaf chain whose keys strictly increase along it
    /// (as [`crate::blocks::node::Blink::leaves_pieces`] returns them), each leaf's part a piece
    /// (`tag`, leaf, its key range) that gets the leaf's entries from `leaf` (a nested piece, so
    /// the part depends on what the leaf read). Leaf i's range runs from its first key (0 for the
    /// first non-empty leaf) to below the next non-empty leaf's first key.
    pub fn verify_leaves(
        &self,
        img: &MemImage,
        dfence_done: &dyn Fn(u64) -> bool,
        cache: &mut dyn PieceCache,
        tag: u64,
        leaves: &[(u64, LeafPiece)],
        leaf: &dyn Fn(&mut dyn PieceCache, u64) -> LeafPiece,
    ) -> R<RecoveryReport> {
        let first = |l: &LeafPiece| l.as_ref().as_ref().ok().and_then(|l| l.entries.first().map(|e| e.0));
        let full: Vec<(u64, u64)> = leaves.iter().filter_map(|(n, l)| first(l).map(|k| (*n, k))).collect();
        if full.is_empty() {
            return self.verify(img, &[], dfence_done);
        }
        let mut parts = Vec::with_capacity(full.len());
        for (i, &(n, k)) in full.iter().enumerate() {
            let lo = if i == 0 { 0 } else { k };
            let hi = full.get(i + 1).map_or(u64::MAX, |&(_, next)| next - 1);
            parts.push(piece(cache, &[tag, n, lo, hi], |c, d| match &*leaf(c, n) {
                Ok(l) => self.verify_part(img, &l.entries, lo..=hi, d),
                Err(_) => Part::default(),
            }));
        }
        self.combine(parts.iter().map(|p| &**p), dfence_done)
    }

    /// The verdict of parts (in the order of the whole `found`, see [`Truth::verify_part`]):
    /// the first item failure, else the failing durable operation first in the op log.
    pub fn combine<'a>(
        &self,
        parts: impl IntoIterator<Item = &'a Part>,
        dfence_done: &dyn Fn(u64) -> bool,
    ) -> R<RecoveryReport> {
        let mut rep = RecoveryReport::default();
        let mut first: Option<(usize, String)> = None;
        for p in parts {
            if let Some(e) = &p.item_err {
                return err(e.clone());
            }
            if let Some((i, m)) = &p.op_err {
                if first.as_ref().is_none_or(|(j, _)| i < j) {
                    first = Some((*i, m.clone()));
                }
            }
            rep.items += p.items;
            rep.durable_ops_checked += p.checked;
        }
        for &i in &self.index(KeyOrder::Natural).unknown {
            if first.as_ref().is_some_and(|(j, _)| *j < i) {
                break;
            }
            if self.log.ops[i].durable_at.is_some_and(dfence_done) {
                first = Some((i, format!("op log names unknown key id {}", self.log.ops[i].key)));
                break;
            }
        }
        match first {
            Some((_, m)) => err(m),
            None => Ok(rep),
        }
    }
}

/// Optimistic version lock (Dash, P-ART, P-Masstree): bit 0 = locked, bit 1 = obsolete, version
/// above. Taking it is a load of the version then a CAS setting the lock bit.
pub fn vlock(c: &mut Ctx<'_>, addr: u64) -> u64 {
    let v = c.acquire(addr);
    let ok = c.cas(addr, v, v | 1);
    debug_assert!(ok && v & 1 == 0, "version lock {addr:#x} held across operations");
    v & !1
}

/// Releases a version lock taken at version `v`, bumping the version.
pub fn vunlock(c: &mut Ctx<'_>, addr: u64, v: u64) {
    c.release_value(addr, v + 4);
}

/// Releases a version lock and marks the node obsolete (replaced by a copy).
pub fn vunlock_obsolete(c: &mut Ctx<'_>, addr: u64, v: u64) {
    c.release_value(addr, (v + 4) | 2);
}

/// Reads a little-endian u64 out of a byte buffer at `off` (0 past the end).
pub fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(off..off + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// Stores every 64 B line of `bytes` (at `addr`, line aligned) that is not all zero: how a
/// freshly allocated (zeroed) node or segment is filled before it is flushed as a whole.
pub fn store_nonzero_lines(c: &mut Ctx<'_>, addr: u64, bytes: &[u8]) {
    for (i, line) in bytes.chunks(64).enumerate() {
        if line.iter().any(|&b| b != 0) {
            c.store(addr + 64 * i as u64, line);
        }
    }
}

/// Writes `v` into a byte buffer at `off`.
pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// Fails when a walk visits more nodes than any run could build (a cycle in a corrupt image).
pub fn guard(visited: &mut FxHashSet<u64>, addr: u64, what: &str) -> R<()> {
    if !visited.insert(addr) {
        return err(format!("{what} {addr:#x} reached twice (cycle or shared node)"));
    }
    if visited.len() > 10_000_000 {
        return err(format!("{what}: walk too long"));
    }
    Ok(())
}
