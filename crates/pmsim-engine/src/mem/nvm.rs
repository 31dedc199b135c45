//! Memory contents with identities: the coherent view and the NVM media.
//!
//! DESIGN.md §6: every 8-byte word carries the gid of the store that last wrote it. The
//! *coherent* view is what a load sees (the newest performed store); the *NVM* is what the media
//! holds. Designs move words from one to the other through their persist paths.

use pmsim_trace::{WordVal, LINE_BYTES};
use rustc_hash::FxHashMap;

/// Up to eight words of one 64 B line (a flush, a WPQ entry, a record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineData {
    pub line: u64,
    /// Bit i set = word i valid.
    pub mask: u8,
    pub words: [WordVal; 8],
}

impl LineData {
    pub fn new(line: u64) -> LineData {
        LineData { line, mask: 0, words: [WordVal::default(); 8] }
    }

    pub fn set(&mut self, word_index: usize, v: WordVal) {
        self.mask |= 1 << word_index;
        self.words[word_index] = v;
    }

    /// Overlays `other`'s valid words (other is newer).
    pub fn merge(&mut self, other: &LineData) {
        for i in 0..8 {
            if other.mask & (1 << i) != 0 {
                self.set(i, other.words[i]);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, WordVal)> + '_ {
        (0..8).filter(|i| self.mask & (1 << i) != 0).map(|i| (self.line + i as u64 * 8, self.words[i]))
    }
}

/// Word index within its line.
#[inline]
pub fn word_index(addr: u64) -> usize {
    ((addr % LINE_BYTES) / 8) as usize
}

/// Word-granular memory with identities.
#[derive(Default)]
pub struct WordStore {
    pub words: FxHashMap<u64, WordVal>,
}

impl WordStore {
    #[inline]
    pub fn get(&self, word: u64) -> Option<WordVal> {
        self.words.get(&word).copied()
    }

    #[inline]
    pub fn put(&mut self, word: u64, v: WordVal) {
        self.words.insert(word, v);
    }

    /// The valid words of `line` this store holds.
    pub fn line(&self, line: u64) -> LineData {
        let mut d = LineData::new(line);
        for i in 0..8 {
            if let Some(v) = self.words.get(&(line + i as u64 * 8)) {
                d.set(i, *v);
            }
        }
        d
    }

    pub fn write_line(&mut self, d: &LineData) {
        for (w, v) in d.iter() {
            self.words.insert(w, v);
        }
    }
}

/// The newest performed value of every word (volatile and persistent).
pub type CoherentMemory = WordStore;
/// What the NVM media holds.
pub type Nvm = WordStore;
