//! Memory contents with identities: the coherent view and the NVM media.
//!
//! docs/design.md §6: every 8-byte word carries the gid of the store that last wrote it. The
//! *coherent* view is what a load sees (the newest performed store); the *NVM* is what the media
//! holds. Designs move words from one to the other through their persist paths.
//!
//! The per-line records every persist path copies ([`LineData`]: PB entries, packets, WPQ
//! entries, recovery-table records) carry only the words' identities (80 B, was 144 B with the
//! values beside them). A word's value is a function of its identity: the store `gid` that last
//! wrote word `w` wrote it exactly once, when it performed, so [`WordValues`] keeps that value
//! once, by store, and crash images look it up ([`WordValues::val`]).

use pmsim_trace::{WordVal, LINE_BYTES};
use rustc_hash::FxHashMap;

/// Up to eight words of one 64 B line (a flush, a WPQ entry, a record): their identities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineData {
    pub line: u64,
    /// Bit i set = word i valid.
    pub mask: u8,
    /// Word i's identity: the gid of the store that wrote it (`INITIAL_ID`: never written).
    pub ids: [u64; 8],
}

impl LineData {
    pub fn new(line: u64) -> LineData {
        LineData { line, mask: 0, ids: [0; 8] }
    }

    #[inline]
    pub fn set(&mut self, word_index: usize, id: u64) {
        self.mask |= 1 << word_index;
        self.ids[word_index] = id;
    }

    /// Overlays `other`'s valid words (other is newer).
    pub fn merge(&mut self, other: &LineData) {
        for i in 0..8 {
            if other.mask & (1 << i) != 0 {
                self.set(i, other.ids[i]);
            }
        }
    }

    /// (word address, identity) of each valid word.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..8).filter(|i| self.mask & (1 << i) != 0).map(|i| (self.line + i as u64 * 8, self.ids[i]))
    }
}

/// The value each store wrote to each word. A store writes once (when it performs) to
/// consecutive words of one line, so its values sit together in one arena, found through a dense
/// per-gid slot: a lookup is two array reads, no hashing. A gid with no slot (`INITIAL_ID`, a
/// remote write's words, a non-store) reads as zero.
#[derive(Default)]
pub struct WordValues {
    /// Per gid: `(offset in vals) << 3 | index in its line of the store's first word`, or `NO_SLOT`.
    slot: Vec<u64>,
    vals: Vec<u64>,
}

const NO_SLOT: u64 = u64::MAX;

impl WordValues {
    /// The value store `id` wrote to `word`.
    #[inline]
    pub fn get(&self, word: u64, id: u64) -> u64 {
        let Some(&s) = self.slot.get(id as usize) else { return 0 };
        if s == NO_SLOT {
            return 0;
        }
        let i = word_index(word) as u64;
        match i.checked_sub(s & 7) {
            Some(k) => self.vals.get(((s >> 3) + k) as usize).copied().unwrap_or(0),
            None => 0,
        }
    }

    /// Starts the values of store `id`, whose first word is word `first` of its line; its words'
    /// values follow in order ([`WordValues::push`]).
    #[inline]
    pub fn start(&mut self, id: u64, first: usize) {
        let id = id as usize;
        if id >= self.slot.len() {
            self.slot.resize((id + 1).max(self.slot.len() * 2), NO_SLOT);
        }
        self.slot[id] = (self.vals.len() as u64) << 3 | first as u64;
    }

    /// The value of the current store's next word.
    #[inline]
    pub fn push(&mut self, data: u64) {
        self.vals.push(data);
    }

    /// `word` with identity `id` as a crash image holds it.
    #[inline]
    pub fn val(&self, word: u64, id: u64) -> WordVal {
        WordVal { id, data: self.get(word, id) }
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
    /// The identity of `word`, if written.
    pub fn get(&self, word: u64) -> Option<u64> {
        let line = word & !(LINE_BYTES - 1);
        let i = word_index(word);
        self.lines.get(&line).filter(|d| d.mask & (1 << i) != 0).map(|d| d.ids[i])
    }

    #[inline]
    pub fn put(&mut self, word: u64, v: u64) {
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

    /// Every word with its identity, unordered.
    pub fn words(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.lines.values().flat_map(|d| d.iter())
    }
}

/// The newest performed value of every word (volatile and persistent).
pub type CoherentMemory = WordStore;
/// What the NVM media holds.
pub type Nvm = WordStore;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every persist path copies this record; it must stay identities only.
    #[test]
    fn line_record_holds_identities_only() {
        assert_eq!(std::mem::size_of::<LineData>(), 80);
    }

    /// Each store's values are found by (word, gid); anything never stored reads as zero.
    #[test]
    fn values_are_found_by_word_and_store() {
        let mut v = WordValues::default();
        v.start(5, 2);
        v.push(0xa);
        v.push(0xb);
        v.start(3, 0);
        v.push(0xc);
        assert_eq!((v.get(0x110, 5), v.get(0x118, 5), v.get(0x100, 3)), (0xa, 0xb, 0xc));
        assert_eq!((v.get(0x108, 5), v.get(0x100, 4), v.get(0x100, pmsim_trace::INITIAL_ID)), (0, 0, 0));
        assert_eq!(v.val(0x118, 5), WordVal { id: 5, data: 0xb });
    }
}
