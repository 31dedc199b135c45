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

    /// Forgets `word_addr` (it reads as never written again).
    pub fn remove(&mut self, word_addr: u64) {
        self.words.remove(&word_addr);
    }

    fn data_at(&self, word_addr: u64) -> u64 {
        self.words.get(&word_addr).map(|v| v.data).unwrap_or(0)
    }

    /// Reads `len` bytes at `addr` (any alignment); unwritten bytes read as zero.
    pub fn read_bytes(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let end = addr + len as u64;
        let mut a = addr;
        while a < end {
            let w = a & !7;
            let bytes = self.data_at(w).to_le_bytes();
            let hi = end.min(w + 8);
            out.extend_from_slice(&bytes[(a - w) as usize..(hi - w) as usize]);
            a = hi;
        }
        out
    }

    /// Reads a little-endian u64 at `addr` (any alignment).
    pub fn read_u64(&self, addr: u64) -> u64 {
        let w = addr & !7;
        let sh = (addr - w) * 8;
        if sh == 0 {
            return self.data_at(w);
        }
        (self.data_at(w) >> sh) | (self.data_at(w + 8) << (64 - sh))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_agree_with_a_byte_by_byte_model() {
        let mut img = MemImage::new();
        let mut bytes = [0u8; 64];
        for (i, w) in [0u64, 8, 24, 40].into_iter().enumerate() {
            let data = 0x0102_0304_0506_0708u64.wrapping_mul(i as u64 + 3);
            img.set(0x1000 + w, WordVal { id: i as u64, data });
            bytes[w as usize..w as usize + 8].copy_from_slice(&data.to_le_bytes());
        }
        for addr in 0..56u64 {
            let want = u64::from_le_bytes(bytes[addr as usize..addr as usize + 8].try_into().unwrap());
            assert_eq!(img.read_u64(0x1000 + addr), want, "read_u64 at +{addr}");
            for len in 0..(64 - addr as usize).min(20) {
                assert_eq!(img.read_bytes(0x1000 + addr, len), &bytes[addr as usize..addr as usize + len]);
            }
        }
        img.remove(0x1008);
        assert_eq!(img.read_u64(0x1008), 0);
        assert_eq!(img.id_at(0x1008), INITIAL);
    }
}
