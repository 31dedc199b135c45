//! libpmemobj's transaction as WHISPER ran it (NVML 1.x, github.com/snalli/nvml, the fork the
//! WHISPER suite builds for `ctree` and `hashmap`), for the remote clients `rdma-ctree` and
//! `rdma-hashmap`: every persist (flush + fence) of the library's transaction path is one
//! ordering point here.
//!
//! Why not a plain undo log: in NVML the undo entry is a small part of a transaction's ordering
//! points; the allocator's redo log and the transaction's state words add most of them. From
//! `src/libpmemobj/tx.c`, `redo.c`, `pvector.c`:
//! - `TX_ADD` of a range of at most `MAX_CACHED_RANGE_SIZE` (32) bytes
//!   (`pmemobj_tx_add_small`): the snapshot copied into the lane's range cache
//!   (`memcpy_persist`: 1), then the slot's offset and size (`persist`: 1). Larger ranges
//!   (`pmemobj_tx_add_large`) allocate a snapshot object through the heap (below).
//! - `TX_NEW`/`pmemobj_tx_alloc` (`tx_alloc_common`): a slot of the lane's `UNDO_ALLOC` vector
//!   receives the new object's offset through a heap operation (`pmalloc_construct` →
//!   `palloc_operation`): two redo entries (the run's bitmap word and the destination), stored
//!   and persisted (`redo_log_store_last`: entries 1, finish flag 1), applied and persisted
//!   (`redo_log_process`: 1), the finish flag cleared (1): 4.
//! - `TX_FREE` (`pmemobj_tx_free`) of an object from before the transaction: its offset into
//!   an `UNDO_FREE` slot (`persist`: 1); the free itself after commit (a heap operation: 4).
//! - commit (`pmemobj_tx_commit`): the ranges and new objects flushed and drained (1), the
//!   lane's state set COMMITTED (1); `tx_post_commit`: the used range-cache slots zeroed
//!   (`memset_persist`: 1), each `UNDO_ALLOC` slot cleared (1 each), each `UNDO_FREE`
//!   object freed (4 each); the state set back to NONE, whose persist ends the transaction: the
//!   caller's `dfence`.
//!
//! Guarantees: every one of those persists is an `ofence` after the stores the library makes
//! (the in-place data stores belong to the drain's epoch). Not modelled: the heap's transient
//! buckets (the block comes from a per-size bump pointer or free list), the first transaction's
//! range-cache allocation (the cache is kept across transactions), run and chunk
//! reorganisation.

use crate::ctx::Ctx;

/// `MAX_CACHED_RANGE_SIZE` and `MAX_CACHED_RANGES` (`obj.h`); a slot is {offset, size, data}.
const CACHED_RANGE: u64 = 32;
const CACHE_SLOTS: u64 = 169;
const SLOT: u64 = 16 + CACHED_RANGE;
/// Redo log entry {offset | finish flag, value}.
const REDO_FINISH: u64 = 1;

/// One lane's persistent transaction state: state word, range cache, undo vectors, allocator
/// redo log.
pub struct Lane {
    state: u64,
    cache: u64,
    alloc_vec: u64,
    free_vec: u64,
    redo: u64,
}

impl Lane {
    pub fn new(c: &mut Ctx<'_>) -> Lane {
        Lane {
            state: c.alloc_pm(64, 64),
            cache: c.alloc_pm(CACHE_SLOTS * SLOT, 64),
            alloc_vec: c.alloc_pm(64 * 8, 64),
            free_vec: c.alloc_pm(64 * 8, 64),
            redo: c.alloc_pm(64 * 16, 64),
        }
    }

    /// `palloc_operation`'s redo log: `entries` (address, value) stored, persisted, finished,
    /// applied, persisted, finish flag cleared.
    fn redo(&self, c: &mut Ctx<'_>, entries: &[(u64, u64)]) {
        for (i, &(a, v)) in entries.iter().enumerate() {
            c.store_u64(self.redo + 16 * i as u64, a);
            c.store_u64(self.redo + 16 * i as u64 + 8, v);
        }
        c.ofence();
        let last = self.redo + 16 * (entries.len() as u64 - 1);
        c.store_u64(last, entries[entries.len() - 1].0 | REDO_FINISH);
        c.ofence();
        for &(a, v) in entries {
            c.store_u64(a, v);
        }
        c.ofence();
        c.store_u64(last, entries[entries.len() - 1].0);
        c.ofence();
    }
}

/// A size class of the heap: blocks of `size` bytes in a run whose bitmap words are in PM.
pub struct Heap {
    size: u64,
    blocks: u64,
    bitmap: u64,
    bump: u64,
    free: Vec<u64>,
}

impl Heap {
    pub fn new(c: &mut Ctx<'_>, size: u64, count: u64) -> Heap {
        let count = count.max(1);
        let blocks = c.alloc_pm(size * count, 64);
        let bitmap = c.alloc_pm(count.div_ceil(64) * 8, 64);
        Heap { size, blocks, bitmap, bump: 0, free: Vec::new() }
    }

    fn bit(&self, blk: u64) -> (u64, u64) {
        let i = (blk - self.blocks) / self.size;
        (self.bitmap + (i / 64) * 8, 1 << (i % 64))
    }

    fn take(&mut self) -> u64 {
        self.free.pop().unwrap_or_else(|| {
            self.bump += 1;
            self.blocks + (self.bump - 1) * self.size
        })
    }
}

/// One libpmemobj transaction.
pub struct NvmlTx {
    /// Ranges already in the undo log (`TX_ADD` skips what they cover) or allocated here.
    covered: Vec<(u64, u64)>,
    slots: u64,
    allocs: u64,
    frees: Vec<(u64, usize)>,
}

impl NvmlTx {
    pub fn begin() -> NvmlTx {
        NvmlTx { covered: Vec::new(), slots: 0, allocs: 0, frees: Vec::new() }
    }

    fn is_covered(&self, a: u64, len: u64) -> bool {
        self.covered.iter().any(|&(s, l)| a >= s && a + len <= s + l)
    }

    /// `TX_ADD` of `[addr, addr + len)` (once per range per transaction); a large range's
    /// snapshot comes from `heap`, which must be the first class the caller passes to `commit`.
    pub fn add(&mut self, c: &mut Ctx<'_>, lane: &Lane, heap: &mut Heap, addr: u64, len: u64) {
        if self.is_covered(addr, len) {
            return;
        }
        let old = c.load_bytes(addr, len as usize);
        if len <= CACHED_RANGE {
            let slot = lane.cache + (self.slots % CACHE_SLOTS) * SLOT;
            self.slots += 1;
            c.store(slot + 16, &old);
            c.ofence();
            c.store_u64(slot, addr);
            c.store_u64(slot + 8, len);
            c.ofence();
        } else {
            // A snapshot object: allocated (its constructor copies the range), then freed after
            // commit with the UNDO_SET vector.
            let snap = self.alloc(c, lane, heap);
            c.store(snap, &old[..old.len().min(heap.size as usize)]);
            self.frees.push((snap, 0));
        }
        self.covered.push((addr, len));
    }

    /// A store inside the transaction: `TX_ADD` first unless covered, then the data in place.
    pub fn write(&mut self, c: &mut Ctx<'_>, lane: &Lane, heap: &mut Heap, addr: u64, bytes: &[u8]) {
        self.add(c, lane, heap, addr, bytes.len() as u64);
        c.store(addr, bytes);
    }

    pub fn write_u64(&mut self, c: &mut Ctx<'_>, lane: &Lane, heap: &mut Heap, addr: u64, v: u64) {
        self.write(c, lane, heap, addr, &v.to_le_bytes());
    }

    /// `pmemobj_tx_alloc`: a block of `heap`'s class, its offset into an `UNDO_ALLOC` slot
    /// through the allocator's redo log. Stores to it need no `TX_ADD`.
    pub fn alloc(&mut self, c: &mut Ctx<'_>, lane: &Lane, heap: &mut Heap) -> u64 {
        let blk = heap.take();
        let (word, bit) = heap.bit(blk);
        let bits = c.load_u64(word);
        let slot = lane.alloc_vec + 8 * (self.allocs % 64);
        self.allocs += 1;
        lane.redo(c, &[(word, bits | bit), (slot, blk)]);
        self.covered.push((blk, heap.size));
        blk
    }

    /// `pmemobj_tx_free` of `blk` (allocated before this transaction) from `heap` (index
    /// `class` into the caller's classes, for the post-commit free).
    pub fn free(&mut self, c: &mut Ctx<'_>, lane: &Lane, blk: u64, class: usize) {
        let slot = lane.free_vec + 8 * (self.frees.len() as u64 % 64);
        c.store_u64(slot, blk);
        c.ofence();
        self.frees.push((blk, class + 1));
    }

    /// `pmemobj_tx_commit` and `tx_post_commit`; `heaps[class]` are the caller's classes (the
    /// large snapshots come from `heaps[0]`). Ends before the state's return to NONE is
    /// persisted: the caller's `dfence`.
    pub fn commit(self, c: &mut Ctx<'_>, lane: &Lane, heaps: &mut [&mut Heap]) {
        c.ofence();
        c.store_u64(lane.state, 1);
        c.ofence();
        if self.slots > 0 {
            c.store(lane.cache, &vec![0; (self.slots.min(CACHE_SLOTS) * SLOT) as usize]);
            c.ofence();
        }
        // `tx_post_commit`: UNDO_SET snapshots freed, UNDO_ALLOC slots cleared, UNDO_FREE
        // objects freed, in that order.
        let free = |c: &mut Ctx<'_>, heap: &mut Heap, blk: u64, slot: u64| {
            let (word, bit) = heap.bit(blk);
            let bits = c.load_u64(word);
            lane.redo(c, &[(word, bits & !bit), (slot, 0)]);
            heap.free.push(blk);
        };
        for &(blk, _) in self.frees.iter().filter(|f| f.1 == 0) {
            free(c, &mut *heaps[0], blk, lane.cache);
        }
        for i in 0..self.allocs {
            c.store_u64(lane.alloc_vec + 8 * (i % 64), 0);
            c.ofence();
        }
        for &(blk, class) in self.frees.iter().filter(|f| f.1 > 0) {
            free(c, &mut *heaps[class - 1], blk, lane.free_vec);
        }
        c.store_u64(lane.state, 0);
    }
}
