//! N-Store's persistent heap and log list (github.com/snalli/nstore, branch
//! `placement_new_on_psegments`, the one WHISPER packages), as the remote clients' model of where
//! N-Store's persist epochs come from.
//!
//! Why a model of the allocator: in N-Store's opt-WAL engine most ordering points are not the
//! log's or the tuple's own persists but the allocator's. Every `pmalloc`
//! (`src/clibpm.cpp`, `pmemalloc_reserve`: rotating first fit over a list of 64-byte clump
//! headers) persists the headers it changes one `pmem_persist` (flush + fence) at a time; every
//! `pmemalloc_activate` (`src/common/clibpm.h`) persists the payload, then the header's ACTIVE
//! state; every `delete` of a PM object (`pmemalloc_free`) persists the headers of its coalesced
//! neighbours. How many fences a statement costs therefore depends on the heap's state (split or
//! not, neighbours free or not), so the allocator is modelled, not counted: [`Pool`] keeps the
//! clump list and replays exactly the stores and fences of those functions.
//!
//! Guarantees: each `pmem_persist` of the original is one `ofence` here, preceded by the stores
//! the original makes to PM since the previous fence (a persist whose range has no new stores is
//! an empty epoch); clump sizes follow `pmemalloc_reserve`'s rounding (`<= 64` bytes: 128, else
//! 64 + the size rounded up to 64). Headers live where the original puts them (64 bytes before
//! the payload), so the epochs' byte ranges are the original's.

use crate::ctx::Ctx;
use std::collections::BTreeMap;

/// `PMEM_CHUNK_SIZE`: the clump header and allocation granularity.
const CHUNK: u64 = 64;
/// `PMEM_CLUMP_OFFSET`: the first clump's offset in the pool.
const CLUMP_OFFSET: u64 = 16384;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Free = 0,
    Reserved = 1,
    Active = 2,
}

#[derive(Clone, Copy, Debug)]
struct Clump {
    size: u64,
    prevsize: u64,
    state: State,
}

/// One N-Store persistent pool (`pmemalloc_init`): clumps from `CLUMP_OFFSET` to a size-0
/// sentinel at the end.
pub struct Pool {
    clumps: BTreeMap<u64, Clump>,
    first: u64,
    /// `prev_clp`: where the next first-fit search starts.
    prev: Option<u64>,
    /// While loading (before the clients' run) the heap changes without emitting anything.
    pub quiet: bool,
}

impl Pool {
    /// A pool over `[base, base + size)` of PM (already allocated by the caller).
    pub fn new(base: u64, size: u64) -> Pool {
        let first = base + CLUMP_OFFSET;
        let last = base + (size & !(CHUNK - 1)) - CHUNK;
        let mut clumps = BTreeMap::new();
        clumps.insert(first, Clump { size: last - first, prevsize: 0, state: State::Free });
        clumps.insert(last, Clump { size: 0, prevsize: last - first, state: State::Free });
        Pool { clumps, first, prev: None, quiet: true }
    }

    fn persist(&self, c: &mut Ctx<'_>, addr: u64, words: &[u64]) {
        if self.quiet {
            return;
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        c.store(addr, &bytes);
        c.ofence();
    }

    fn header(&self, clp: u64) -> Clump {
        self.clumps[&clp]
    }

    /// `pmemalloc_reserve` (via `pmalloc`): returns the payload's address.
    pub fn reserve(&mut self, c: &mut Ctx<'_>, size: u64) -> u64 {
        let nsize = if size <= 64 { 128 } else { 64 + size.div_ceil(64) * 64 };
        // A `prev_clp` merged into a free neighbour since: the search starts at the clump now
        // holding it.
        let mut clp = match self.prev {
            Some(p) => *self.clumps.range(..=p).next_back().map(|(a, _)| a).unwrap_or(&self.first),
            None => self.first,
        };
        let mut looped = false;
        loop {
            let h = self.header(clp);
            if h.size == 0 {
                assert!(!looped, "N-Store pool of the rdma-ycsb/tpcc model is full");
                looped = true;
                clp = self.first;
                continue;
            }
            if nsize <= h.size && h.state == State::Free {
                let leftover = h.size - nsize;
                if leftover >= 2 * CHUNK {
                    let new = clp + nsize;
                    let next = new + leftover;
                    self.clumps.insert(new, Clump { size: leftover, prevsize: nsize, state: State::Free });
                    self.persist(c, new, &[leftover, nsize]);
                    self.clumps.get_mut(&next).expect("clump list").prevsize = leftover;
                    self.persist(c, next + 8, &[leftover]);
                    *self.clumps.get_mut(&clp).expect("clump") = Clump { size: nsize, state: State::Reserved, ..h };
                    self.persist(c, clp, &[nsize | State::Reserved as u64]);
                } else {
                    self.clumps.get_mut(&clp).expect("clump").state = State::Reserved;
                    self.persist(c, clp, &[h.size | State::Reserved as u64]);
                    let next = clp + h.size;
                    self.clumps.get_mut(&next).expect("clump list").prevsize = h.size;
                    self.persist(c, next + 8, &[h.size]);
                }
                self.prev = Some(clp);
                return clp + CHUNK;
            }
            clp += h.size;
        }
    }

    /// `pmemalloc_activate`: persists the payload (the stores made to it since the last fence),
    /// then the header's ACTIVE state.
    pub fn activate(&mut self, c: &mut Ctx<'_>, ptr: u64) {
        let clp = ptr - CHUNK;
        let h = self.header(clp);
        if !self.quiet {
            c.ofence();
        }
        self.clumps.get_mut(&clp).expect("clump").state = State::Active;
        self.persist(c, clp, &[h.size | State::Active as u64]);
    }

    /// `pmemalloc_free` (via `delete`/`pfree`): frees the clump, coalescing free neighbours.
    pub fn free(&mut self, c: &mut Ctx<'_>, ptr: u64) {
        let clp = ptr - CHUNK;
        let h = self.header(clp);
        let sz = h.size;
        let lastfree = clp + sz;
        let lf = self.header(lastfree);
        let last = lf.state == State::Free;
        let firstfree = clp - h.prevsize;
        let first = firstfree != clp && self.header(firstfree).state == State::Free;
        let free = State::Free as u64;
        match (first, last) {
            (true, true) => {
                let csize = self.header(firstfree).size + sz + lf.size;
                self.set(firstfree, csize);
                self.persist(c, firstfree, &[csize | free]);
                let next = lastfree + lf.size;
                self.clumps.remove(&clp);
                if lf.size > 0 {
                    self.clumps.remove(&lastfree);
                }
                self.clumps.get_mut(&next).expect("clump list").prevsize = csize;
                self.persist(c, next + 8, &[csize]);
                self.prev = Some(firstfree);
            }
            (true, false) => {
                let csize = self.header(firstfree).size + sz;
                self.set(firstfree, csize);
                self.persist(c, firstfree, &[csize | free]);
                self.clumps.remove(&clp);
                self.clumps.get_mut(&lastfree).expect("clump list").prevsize = csize;
                self.persist(c, lastfree + 8, &[csize]);
                self.prev = Some(firstfree);
            }
            (false, true) => {
                let csize = sz + lf.size;
                self.clumps.insert(clp, Clump { size: csize, prevsize: h.prevsize, state: State::Free });
                self.persist(c, clp, &[csize | free]);
                let next = lastfree + lf.size;
                if lf.size > 0 {
                    self.clumps.remove(&lastfree);
                }
                self.clumps.get_mut(&next).expect("clump list").prevsize = csize;
                self.persist(c, next + 8, &[csize]);
                self.prev = Some(clp);
            }
            (false, false) => {
                self.clumps.get_mut(&clp).expect("clump").state = State::Free;
                self.persist(c, clp, &[sz | free]);
            }
        }
    }

    fn set(&mut self, clp: u64, size: u64) {
        let h = self.clumps.get_mut(&clp).expect("clump");
        h.size = size;
        h.state = State::Free;
    }
}

/// N-Store's `plist<char*>` as the engine's log (`src/common/plist.h`): `head` and `tail` are two
/// adjacent words of the static area (`sp->ptrs`), nodes are 16-byte `pmalloc`ed
/// `{next, val}` pairs activated on insertion.
pub struct PList {
    head: u64,
    nodes: Vec<u64>,
}

impl PList {
    /// A list whose `head` word is at `head` and `tail` word at `head + 8`.
    pub fn new(head: u64) -> PList {
        PList { head, nodes: Vec::new() }
    }

    /// A list loaded before the run, whose last node is `tail` (the nodes before it are never
    /// touched by the run's `push_back`s).
    pub fn with_tail(head: u64, tail: u64) -> PList {
        PList { head, nodes: vec![tail] }
    }

    /// `push_back`: the first node goes through `init` (node stores, head and tail, activate);
    /// later ones link at the tail and persist the old tail's `next`.
    pub fn push_back(&mut self, c: &mut Ctx<'_>, pool: &mut Pool, val: u64) {
        let np = pool.reserve(c, 16);
        if let Some(&tailp) = self.nodes.last() {
            c.store_u64(np + 8, val);
            c.store_u64(np, 0);
            c.store_u64(self.head + 8, np);
            pool.activate(c, np);
            c.store_u64(tailp, np);
            c.ofence();
        } else {
            c.store_u64(np, 0);
            c.store_u64(np + 8, val);
            c.store_u64(self.head, np);
            c.store_u64(self.head + 8, np);
            pool.activate(c, np);
        }
        self.nodes.push(np);
    }

    /// Appends a log entry (`entry_stream`'s text, NUL-terminated) as opt-WAL does: `pmalloc`,
    /// copy, `pmemalloc_activate`, then `push_back` of its pointer. Returns the entry's address.
    pub fn append_entry(&mut self, c: &mut Ctx<'_>, pool: &mut Pool, text: String) -> u64 {
        let mut bytes = text.into_bytes();
        bytes.push(0);
        let e = pool.reserve(c, bytes.len() as u64);
        c.store(e, &bytes);
        pool.activate(c, e);
        self.push_back(c, pool, e);
        e
    }

    /// `clear`: frees every node (`delete`), then stores NULL into head and tail (not persisted
    /// by `clear` itself; the caller's fence orders them).
    pub fn clear(&mut self, c: &mut Ctx<'_>, pool: &mut Pool) {
        for np in std::mem::take(&mut self.nodes) {
            c.load_u64(np);
            pool.free(c, np);
        }
        c.store_u64(self.head, 0);
        c.store_u64(self.head + 8, 0);
    }
}
