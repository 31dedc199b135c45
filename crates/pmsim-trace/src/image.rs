//! Persistent-memory images: what NVM holds, word by word.
//!
//! Every 8-byte word carries the gid of the store that last wrote it (its *identity*) and its
//! data. The checker reasons about identities only, so it never has to trust values; workload
//! recovery reads the data.

use rustc_hash::FxHashMap;
use std::cell::RefCell;

/// One 8-byte word: the gid of the store that last wrote it and its little-endian data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WordVal {
    pub id: u64,
    pub data: u64,
}

/// Identity of a word never written since the start (initial contents, zero).
pub const INITIAL: u64 = u64::MAX;

/// A sparse NVM image keyed by word address (multiple of 8).
///
/// Code that must be memoisable by its reads (a workload's recovery, see [`ReadLog`]) reads the
/// image through the accessors below, never through `words` directly (a clone counts as reading
/// every word).
#[derive(Debug, Default)]
pub struct MemImage {
    pub words: FxHashMap<u64, WordVal>,
    /// Read tracking, when on ([`MemImage::track_reads`]).
    reads: Option<RefCell<ReadLog>>,
    /// A dense copy of the words' data, when on ([`MemImage::keep_dense`]).
    dense: Option<Box<DenseData>>,
    /// Copy-on-write words shadowing `words` ([`MemImage::cow_write`]), written through `&self`
    /// so a reader can patch its view (an undo-log rollback) without copying the image.
    cow: RefCell<FxHashMap<u64, WordVal>>,
    /// `cow` is not empty (checked on every read, so kept outside the `RefCell`).
    cow_on: std::cell::Cell<bool>,
    /// A 1024-bit Bloom filter of `cow`'s words: a read of a word the layer does not hold (all
    /// but a few) skips the map.
    cow_bloom: [std::cell::Cell<u64>; 16],
    /// Bumped by every change of the copy-on-write layer ([`MemImage::cow_version`]).
    cow_version: std::cell::Cell<u64>,
}

/// The Bloom filter word and bit of `word_addr` in [`MemImage`]'s copy-on-write filter.
#[inline]
fn cow_bit(word_addr: u64) -> (usize, u64) {
    let h = (word_addr >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54;
    ((h >> 6) as usize, 1 << (h & 63))
}

/// A position in the read log ([`MemImage::read_mark`]).
#[derive(Clone, Copy, Debug)]
pub struct ReadMark {
    len: usize,
    all: bool,
}

/// Word data in blocks of 64 neighbouring words: a reader walking a structure finds neighbouring
/// words in one cache line, where the hash map scatters them (an image of 10^5 words exceeds the
/// caches, and a recovery's reads are then one miss each).
#[derive(Clone, Debug, Default)]
struct DenseData {
    block_of: FxHashMap<u64, u32>,
    blocks: Vec<[u64; 64]>,
}

impl DenseData {
    fn set(&mut self, word_addr: u64, data: u64) {
        let DenseData { block_of, blocks } = self;
        let b = *block_of.entry(word_addr >> 9).or_insert_with(|| {
            blocks.push([0; 64]);
            (blocks.len() - 1) as u32
        });
        blocks[b as usize][((word_addr >> 3) & 63) as usize] = data;
    }

    #[inline]
    fn get(&self, word_addr: u64) -> u64 {
        self.block_of.get(&(word_addr >> 9)).map_or(0, |&b| self.blocks[b as usize][((word_addr >> 3) & 63) as usize])
    }
}

/// The words a reader of an image looked at, recorded while tracking is on: a function of the
/// image that reads only through the accessors returns the same result on any image that agrees
/// on these words (the crash driver reuses a recovery's verdict on that ground).
#[derive(Clone, Debug, Default)]
pub struct ReadLog {
    /// Word addresses read, in order; consecutive repeats are recorded once.
    pub words: Vec<u64>,
    /// The reader looked at the image as a whole (its size, or every word).
    pub all: bool,
}

impl Clone for MemImage {
    /// The clone copies every word, so a tracked image records a whole-image read; the clone
    /// itself is not tracked.
    fn clone(&self) -> MemImage {
        self.note_all();
        let mut copy = MemImage { words: self.words.clone(), dense: self.dense.clone(), ..MemImage::default() };
        for (&w, &v) in self.cow.borrow().iter() {
            copy.set(w, v);
        }
        copy
    }
}

impl PartialEq for MemImage {
    fn eq(&self, other: &MemImage) -> bool {
        if self.cow_on.get() || other.cow_on.get() {
            return self.sorted() == other.sorted();
        }
        self.words == other.words
    }
}

impl Eq for MemImage {}

impl MemImage {
    pub fn new() -> MemImage {
        MemImage::default()
    }

    /// Keeps a dense copy of the data from now on, for faster reads by [`MemImage::read_u64`] and
    /// [`MemImage::read_bytes`]. Only [`MemImage::set`] and [`MemImage::remove`] keep it in step:
    /// an image written through `words` directly must not have it.
    pub fn keep_dense(&mut self) {
        let mut d = DenseData::default();
        for (&w, v) in &self.words {
            d.set(w, v.data);
        }
        self.dense = Some(Box::new(d));
    }

    /// Starts recording the words read through the accessors into `log` (cleared first; passing
    /// the last record back reuses its memory).
    pub fn track_reads(&mut self, mut log: ReadLog) {
        log.words.clear();
        log.all = false;
        self.reads = Some(RefCell::new(log));
    }

    /// Stops recording; returns what was read since [`MemImage::track_reads`].
    pub fn take_reads(&mut self) -> Option<ReadLog> {
        self.reads.take().map(RefCell::into_inner)
    }

    /// The current end of the read log (`None`: not tracking).
    pub fn read_mark(&self) -> Option<ReadMark> {
        self.reads.as_ref().map(|r| {
            let r = r.borrow();
            ReadMark { len: r.words.len(), all: r.all }
        })
    }

    /// Moves the words read since `mark` out of the log into `into`, leaving the log as it was at
    /// `mark`; returns whether the image was read as a whole since. A nested reader (a piece of a
    /// recovery) so takes its own reads, and the log keeps its caller's.
    pub fn split_reads(&self, mark: ReadMark, into: &mut Vec<u64>) -> bool {
        let Some(r) = &self.reads else { return true };
        let mut r = r.borrow_mut();
        let from = mark.len.min(r.words.len());
        into.extend(r.words.drain(from..));
        let all = r.all;
        r.all = mark.all;
        all
    }

    /// Writes `v` at `word_addr` in a copy-on-write layer over the image: reads through the
    /// accessors see it until [`MemImage::cow_clear`]; the image's own words are untouched.
    pub fn cow_write(&self, word_addr: u64, v: WordVal) {
        self.cow.borrow_mut().insert(word_addr, v);
        self.cow_on.set(true);
        self.cow_version.set(self.cow_version.get() + 1);
        let (i, bit) = cow_bit(word_addr);
        self.cow_bloom[i].set(self.cow_bloom[i].get() | bit);
    }

    /// Whether a copy-on-write layer is active.
    pub fn cow_active(&self) -> bool {
        self.cow_on.get()
    }

    /// Drops the copy-on-write layer.
    pub fn cow_clear(&self) {
        if self.cow_on.get() {
            self.cow_version.set(self.cow_version.get() + 1);
        }
        self.cow.borrow_mut().clear();
        self.cow_on.set(false);
        self.cow_bloom.iter().for_each(|b| b.set(0));
    }

    /// A number that changes whenever the copy-on-write layer does (a reader that memoises by
    /// the words it read compares layers only when this moved).
    pub fn cow_version(&self) -> u64 {
        self.cow_version.get()
    }

    /// Calls `f` with every word of the copy-on-write layer (in no particular order). Reads
    /// nothing of the image, so it is not a tracked read.
    pub fn cow_for_each(&self, mut f: impl FnMut(u64, WordVal)) {
        for (&w, &v) in self.cow.borrow().iter() {
            f(w, v);
        }
    }

    #[inline]
    fn cow_get(&self, word_addr: u64) -> Option<WordVal> {
        if self.cow_on.get() {
            let (i, bit) = cow_bit(word_addr);
            if self.cow_bloom[i].get() & bit != 0 {
                return self.cow.borrow().get(&word_addr).copied();
            }
        }
        None
    }

    #[inline]
    fn note(&self, word_addr: u64) {
        if let Some(r) = &self.reads {
            let mut r = r.borrow_mut();
            if r.words.last() != Some(&word_addr) {
                r.words.push(word_addr);
            }
        }
    }

    fn note_all(&self) {
        if let Some(r) = &self.reads {
            r.borrow_mut().all = true;
        }
    }

    pub fn get(&self, word_addr: u64) -> Option<WordVal> {
        self.note(word_addr);
        self.cow_get(word_addr).or_else(|| self.words.get(&word_addr).copied())
    }

    /// The identity of the store visible at `word_addr`, or `INITIAL`.
    pub fn id_at(&self, word_addr: u64) -> u64 {
        self.note(word_addr);
        self.cow_get(word_addr).or_else(|| self.words.get(&word_addr).copied()).map(|w| w.id).unwrap_or(INITIAL)
    }

    pub fn set(&mut self, word_addr: u64, v: WordVal) {
        if let Some(d) = &mut self.dense {
            d.set(word_addr, v.data);
        }
        self.words.insert(word_addr, v);
    }

    /// Forgets `word_addr` (it reads as never written again).
    pub fn remove(&mut self, word_addr: u64) {
        if let Some(d) = &mut self.dense {
            d.set(word_addr, 0);
        }
        self.words.remove(&word_addr);
    }

    fn data_at(&self, word_addr: u64) -> u64 {
        self.note(word_addr);
        if let Some(v) = self.cow_get(word_addr) {
            return v.data;
        }
        if let Some(d) = &self.dense {
            return d.get(word_addr);
        }
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
        self.note_all();
        if self.cow_on.get() {
            let cow = self.cow.borrow();
            return self.words.len() + cow.keys().filter(|w| !self.words.contains_key(w)).count();
        }
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Words sorted by address (deterministic output).
    pub fn sorted(&self) -> Vec<(u64, WordVal)> {
        self.note_all();
        let cow = self.cow.borrow();
        let mut v: Vec<_> = self.words.iter().filter(|(a, _)| !cow.contains_key(a)).map(|(a, w)| (*a, *w)).collect();
        v.extend(cow.iter().map(|(a, w)| (*a, *w)));
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

    #[test]
    fn a_dense_image_reads_as_the_sparse_one() {
        let (mut sparse, mut dense) = (MemImage::new(), MemImage::new());
        dense.set(0x40, WordVal { id: 1, data: 7 });
        dense.keep_dense();
        sparse.set(0x40, WordVal { id: 1, data: 7 });
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..4000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Clustered and far-apart words, across block boundaries.
            let w = if i.is_multiple_of(3) { (x % 4096) * 8 } else { 0x7000_0000 + (x % 300) * 8 };
            if x.is_multiple_of(5) {
                sparse.remove(w);
                dense.remove(w);
            } else {
                sparse.set(w, WordVal { id: i, data: x });
                dense.set(w, WordVal { id: i, data: x });
            }
        }
        assert_eq!(sparse, dense);
        for a in (0..4096 * 8).step_by(5).chain(0x7000_0000 - 16..0x7000_0000 + 2500) {
            assert_eq!(sparse.read_u64(a), dense.read_u64(a), "{a:#x}");
            assert_eq!(sparse.read_bytes(a, 11), dense.read_bytes(a, 11), "{a:#x}");
        }
    }

    #[test]
    fn read_tracking_records_the_words_read() {
        let mut img = MemImage::new();
        img.set(0x10, WordVal { id: 1, data: 1 });
        assert!(img.take_reads().is_none());
        img.track_reads(ReadLog::default());
        img.read_u64(0x0c); // spans 0x08 and 0x10
        img.read_bytes(0x10, 9); // 0x10 (repeat, recorded once) and 0x18
        img.id_at(0x40);
        let log = img.take_reads().unwrap();
        assert_eq!(log.words, vec![0x08, 0x10, 0x18, 0x40]);
        assert!(!log.all);
        img.track_reads(ReadLog::default());
        let _ = img.len();
        assert!(img.take_reads().unwrap().all);
        // A copy reads every word; it is not tracked itself.
        img.track_reads(ReadLog::default());
        let mut copy = img.clone();
        assert!(img.take_reads().unwrap().all);
        assert!(copy.take_reads().is_none());
        // Off again: nothing is recorded.
        img.read_u64(0x10);
        assert!(img.take_reads().is_none());
    }

    #[test]
    fn a_nested_reader_takes_its_own_reads_and_leaves_its_callers() {
        let mut img = MemImage::new();
        img.track_reads(ReadLog::default());
        img.read_u64(0x10);
        let m = img.read_mark().unwrap();
        img.read_u64(0x20);
        img.read_u64(0x28);
        let mut inner = Vec::new();
        assert!(!img.split_reads(m, &mut inner));
        assert_eq!(inner, vec![0x20, 0x28]);
        let m = img.read_mark().unwrap();
        let _ = img.len();
        assert!(img.split_reads(m, &mut inner), "the nested reader looked at everything");
        img.read_u64(0x30);
        let log = img.take_reads().unwrap();
        assert_eq!(log.words, vec![0x10, 0x30]);
        assert!(!log.all, "the caller itself did not");
    }

    #[test]
    fn a_copy_on_write_layer_shadows_the_image_until_cleared() {
        let mut img = MemImage::new();
        img.set(0x10, WordVal { id: 1, data: 5 });
        img.keep_dense();
        img.cow_write(0x10, WordVal { id: 1, data: 6 });
        img.cow_write(0x18, WordVal { id: 0, data: 7 });
        let mut want = MemImage::new();
        want.set(0x10, WordVal { id: 1, data: 6 });
        want.set(0x18, WordVal { id: 0, data: 7 });
        assert_eq!((img.read_u64(0x10), img.read_u64(0x14), img.id_at(0x18)), (6, 7 << 32, 0));
        assert_eq!((img.len(), img.sorted()), (2, want.sorted()));
        assert_eq!(img.clone(), want);
        img.cow_clear();
        assert_eq!((img.read_u64(0x10), img.read_u64(0x18), img.id_at(0x18), img.len()), (5, 0, INITIAL, 1));
    }
}
