//! A map from block number to plain state, paged for locality.
//!
//! Why not a plain hash map: traces walk memory mostly sequentially (a queue's data segment, a
//! log), and a hash map scatters neighbouring blocks across a large table, so every access is a
//! cache miss once the table outgrows the cache. Here blocks live in pages of [`PAGE`]
//! neighbours; the hash map indexes pages and the last page used is remembered, so sequential
//! accesses skip the hash entirely. Memory is bounded by the distinct pages touched, i.e. by the
//! distinct blocks touched times at most [`PAGE`].

use rustc_hash::FxHashMap;

pub const PAGE_SHIFT: u32 = 6;
pub const PAGE: usize = 1 << PAGE_SHIFT;

pub struct PagedMap<T: Copy + Default> {
    index: FxHashMap<u64, u32>,
    pages: Vec<[T; PAGE]>,
    last_page: u64,
    last_idx: u32,
}

impl<T: Copy + Default> Default for PagedMap<T> {
    fn default() -> Self {
        PagedMap { index: FxHashMap::default(), pages: Vec::new(), last_page: u64::MAX, last_idx: 0 }
    }
}

impl<T: Copy + Default> PagedMap<T> {
    /// The state of block `key`, created (as `T::default()`) on first touch.
    #[inline(always)]
    pub fn get_mut(&mut self, key: u64) -> &mut T {
        let page = key >> PAGE_SHIFT;
        if page != self.last_page {
            self.switch(page);
        }
        &mut self.pages[self.last_idx as usize][(key as usize) & (PAGE - 1)]
    }

    #[inline(never)]
    fn switch(&mut self, page: u64) {
        let next = self.pages.len() as u32;
        let idx = *self.index.entry(page).or_insert(next);
        if idx == next {
            self.pages.push([T::default(); PAGE]);
        }
        self.last_page = page;
        self.last_idx = idx;
    }

    /// Pages held (each [`PAGE`] blocks).
    pub fn pages(&self) -> usize {
        self.pages.len()
    }
}
