//! Persistent-memory images: what NVM holds, word by word.
//!
//! Every 8-byte word carries the gid of the store that last wrote it (its *identity*) and its
//! data. The checker reasons about identities only, so it never has to trust values; workload
//! recovery reads the data.

use rustc_hash::FxHashMap;

/// One 8-byte word: the gid of the store that last wrote it and its little-endian data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WordVal {
    pub id: u64,
    pub data: u64,
}

/// Identity of a word never written since the start (initial contents, zero).
pub const INITIAL: u64 = u64::MAX;

/// A sparse NVM image keyed by word address (multiple of 8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemImage {
    pub words: FxHashMap<u64, WordVal>,
}

impl MemImage {
    pub fn new() -> MemImage {
        MemImage::default()
    }

    pub fn get(&self, word_addr: u64) -> Option<WordVal> {
        self.words.get(&word_addr).copied()
    }

    /// The identity of the store visible at `word_addr`, or `INITIAL`.
    pub fn id_at(&self, word_addr: u64) -> u64 {
        self.words.get(&word_addr).map(|w| w.id).unwrap_or(INITIAL)
    }

    pub fn set(&mut self, word_addr: u64, v: WordVal) {
        self.words.insert(word_addr, v);
    }

    /// Reads `len` bytes at `addr` (any alignment); unwritten bytes read as zero.
    pub fn read_bytes(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        for a in addr..addr + len as u64 {
            let w = a & !7;
            let data = self.words.get(&w).map(|v| v.data).unwrap_or(0);
            out.push((data >> ((a - w) * 8)) as u8);
        }
        out
    }

    /// Reads a little-endian u64 at `addr`.
    pub fn read_u64(&self, addr: u64) -> u64 {
        let b = self.read_bytes(addr, 8);
        u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Words sorted by address (deterministic output).
    pub fn sorted(&self) -> Vec<(u64, WordVal)> {
        let mut v: Vec<_> = self.words.iter().map(|(a, w)| (*a, *w)).collect();
        v.sort_unstable_by_key(|p| p.0);
        v
    }
}
