//! A map from block number to plain state, paged for locality.
//!
//! Why not a plain hash map: traces walk memory mostly sequentially (a queue's data segment, a
//! log), and a hash map scatters neighbouring blocks across a large table, so every access is a
//! cache miss once the table outgrows the cache. Here blocks live in pages of [`PAGE`]
//! neighbours; the hash map indexes pages and the last page used is remembered, so sequential
//! accesses skip the hash entirely. Memory is bounded by the distinct pages touched, i.e. by the
//! distinct blocks touched times at most [`PAGE`].

use rustc_hash::FxHashMap;

pub const PAGE_SHIFT: u32 = 8;
pub const PAGE: usize = 1 << PAGE_SHIFT;

/// Recently used pages, direct-mapped by page number: a trace's few hot regions (lock words,
/// a queue's head, the current data page) each keep their slot, so most accesses skip the hash.
const CACHE: usize = 64;

#[derive(Clone)]
pub struct PagedMap<T: Copy + Default> {
    index: FxHashMap<u64, u32>,
    /// Boxed, so growing the list never moves the pages already touched.
    pages: Vec<Box<[T; PAGE]>>,
    cache: [(u64, u32); CACHE],
}

impl<T: Copy + Default> Default for PagedMap<T> {
    fn default() -> Self {
        PagedMap { index: FxHashMap::default(), pages: Vec::new(), cache: [(u64::MAX, 0); CACHE] }
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
        &mut self.pages[idx as usize][(key as usize) & (PAGE - 1)]
    }

    #[inline(never)]
    fn switch(&mut self, page: u64, slot: usize) -> u32 {
        let next = self.pages.len() as u32;
        let idx = *self.index.entry(page).or_insert(next);
        if idx == next {
            self.pages.push(Box::new([T::default(); PAGE]));
        }
        self.cache[slot] = (page, idx);
        idx
    }

    /// Pages held (each [`PAGE`] blocks).
    pub fn pages(&self) -> usize {
        self.pages.len()
    }
}
