//! Memory contents with identities: the coherent view and the NVM media.
//!
//! docs/design.md §6: every 8-byte word carries the gid of the store that last wrote it. The
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

/// Memory with identities, stored per 64 B line (one hash lookup per line access).
#[derive(Default)]
pub struct WordStore {
    pub lines: FxHashMap<u64, LineData>,
}

impl WordStore {
    #[inline]
    pub fn get(&self, word: u64) -> Option<WordVal> {
        let line = word & !(LINE_BYTES - 1);
        let i = word_index(word);
        self.lines.get(&line).filter(|d| d.mask & (1 << i) != 0).map(|d| d.words[i])
    }

    #[inline]
    pub fn put(&mut self, word: u64, v: WordVal) {
        let line = word & !(LINE_BYTES - 1);
        self.lines.entry(line).or_insert_with(|| LineData::new(line)).set(word_index(word), v);
    }

    /// The valid words of `line` this store holds.
    #[inline]
    pub fn line(&self, line: u64) -> LineData {
        self.lines.get(&line).copied().unwrap_or_else(|| LineData::new(line))
    }

    /// Mutable access to `line`'s words (created empty).
    #[inline]
    pub fn line_mut(&mut self, line: u64) -> &mut LineData {
        self.lines.entry(line).or_insert_with(|| LineData::new(line))
    }

    pub fn write_line(&mut self, d: &LineData) {
        self.line_mut(d.line).merge(d);
    }

    /// Every word, unordered.
    pub fn words(&self) -> impl Iterator<Item = (u64, WordVal)> + '_ {
        self.lines.values().flat_map(|d| d.iter())
    }
}

/// The newest performed value of every word (volatile and persistent).
pub type CoherentMemory = WordStore;
/// What the NVM media holds.
pub type Nvm = WordStore;
