//! A map from block number to plain state, paged for locality.
//!
//! Why not a plain hash map: traces walk memory mostly sequentially (a queue's data segment, a
//! log), and a hash map scatters neighbouring blocks across a large table, so every access is a
//! cache miss once the table outgrows the cache. Here blocks live in pages of [`PAGE`]
//! neighbours; the hash map indexes pages and the last page used is remembered, so sequential
//! accesses skip the hash entirely.
//!
//! Why a page holds chunks: a trace that touches one line in every few KiB (a hash table over a
//! large pool, one store per page) would pay a whole page of state per touched line (12 KB per
//! model at 8-byte blocks: 3.7 GB for 100 k random stores). A page is an index of [`CHUNK`]-block
//! chunks allocated on first touch, so memory is bounded by the distinct chunks touched (one
//! line's blocks at 8-byte blocks) plus a small index per page.

use rustc_hash::FxHashMap;

pub const PAGE_SHIFT: u32 = 8;
pub const PAGE: usize = 1 << PAGE_SHIFT;
const CHUNK_SHIFT: u32 = 3;
pub const CHUNK: usize = 1 << CHUNK_SHIFT;
const CHUNKS: usize = PAGE / CHUNK;

/// Recently used pages, direct-mapped by page number: a trace's few hot regions (lock words,
/// a queue's head, the current data page) each keep their slot, so most accesses skip the hash.
const CACHE: usize = 64;

#[derive(Clone)]
pub struct PagedMap<T: Copy + Default> {
    index: FxHashMap<u64, u32>,
    /// Per page: 1 + the index in `chunks` of each of its chunks (0: not touched yet).
    pages: Vec<[u32; CHUNKS]>,
    chunks: Vec<[T; CHUNK]>,
    cache: [(u64, u32); CACHE],
}

impl<T: Copy + Default> Default for PagedMap<T> {
    fn default() -> Self {
        PagedMap { index: FxHashMap::default(), pages: Vec::new(), chunks: Vec::new(), cache: [(u64::MAX, 0); CACHE] }
    }
}

impl<T: Copy + Default> PagedMap<T> {
    /// The state of block `key`, created (as `T::default()`) on first touch.
    #[inline(always)]
    pub fn get_mut(&mut self, key: u64) -> &mut T {
        let page = key >> PAGE_SHIFT;
        let slot = (page as usize) & (CACHE - 1);
        let (cached, idx) = self.cache[slot];
        let idx = if cached == page { idx } else { self.switch(page, slot) };
        let c = &mut self.pages[idx as usize][(key as usize >> CHUNK_SHIFT) & (CHUNKS - 1)];
        if *c == 0 {
            self.chunks.push([T::default(); CHUNK]);
            *c = self.chunks.len() as u32;
        }
        &mut self.chunks[*c as usize - 1][(key as usize) & (CHUNK - 1)]
    }

    #[inline(never)]
    fn switch(&mut self, page: u64, slot: usize) -> u32 {
        let next = self.pages.len() as u32;
        let idx = *self.index.entry(page).or_insert(next);
        if idx == next {
            self.pages.push([0; CHUNKS]);
        }
        self.cache[slot] = (page, idx);
        idx
    }

    /// Chunks held (each [`CHUNK`] blocks): the memory bound.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_state_and_sparse_touches_hold_one_chunk_each() {
        let mut m: PagedMap<u64> = PagedMap::default();
        // One block in each of 1,000 pages far apart, then every block of two pages.
        let sparse: Vec<u64> = (0..1000u64).map(|i| i * 7919 * PAGE as u64 + i % PAGE as u64).collect();
        for &k in &sparse {
            *m.get_mut(k) = k + 1;
        }
        assert_eq!(m.chunks(), 1000);
        let dense = (1u64 << 40)..(1u64 << 40) + 2 * PAGE as u64;
        for k in dense.clone() {
            *m.get_mut(k) = k + 1;
        }
        assert_eq!(m.chunks(), 1000 + 2 * CHUNKS);
        for k in sparse.iter().copied().chain(dense) {
            assert_eq!(*m.get_mut(k), k + 1, "block {k}");
        }
        // An untouched block of a touched chunk is the default.
        assert_eq!(*m.get_mut(sparse[3] ^ 1), 0);
        assert_eq!(m.chunks(), 1000 + 2 * CHUNKS);
    }
}
