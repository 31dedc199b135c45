//! ASAP's recovery table at a memory controller: undo and delay records (ASAP §V-A, Table I).
//!
//! Records are per 64 B line. An *undo* record keeps the line's safe contents while memory holds
//! speculative (early) writes of one epoch; `spec` marks the words those early writes touched, and
//! only those are restored at a crash. A *delay* record holds an early write that arrived while an
//! undo record for its line existed; it is applied when its epoch commits. The table is inside the
//! ADR domain; a crash writes undo records back after the WPQ and discards delay records. A
//! counting Bloom filter remembers NACKed lines (§V-F).
//!
//! A safe write an undo record absorbs takes effect at once when every older write of its line
//! is persistent, as Table I assumes (an ADR write queue that accepts writes in order). When one
//! is not (it waits for a WPQ entry, or the queue is outside the persistence domain), the write
//! becomes a [`Layer`] over the record: it counts at a crash, and is acknowledged, only once those
//! older writes are, or the record would make it durable ahead of them.

use crate::machine::DesignEv;
use crate::mem::nvm::LineData;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Undo,
    Delay,
}

#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub kind: RecordKind,
    pub line: u64,
    pub core: u16,
    pub epoch: u64,
    /// Undo: the safe contents (all 8 words once the read returns). Delay: the early write.
    pub data: LineData,
    /// Undo: words memory holds speculatively.
    pub spec: u8,
    /// Undo: the PM read of the old contents has not returned yet.
    pub reading: bool,
    /// Undo: speculative words whose safe value a safe write gave the record (the read must
    /// not overwrite them; a crash restores them whatever became of the speculative write).
    pub fresh: u8,
    /// Undo: the speculative write waiting for the read.
    pub pending_write: Option<LineData>,
    /// The PB entry to acknowledge when the speculative write is accepted (none if the flush
    /// was acknowledged when the record took it).
    pub ack_entry: u64,
    /// Undo: the WPQ has taken the speculative write.
    pub accepted: bool,
    /// Undo: its epoch's commit arrived while the record still held the write; the record goes
    /// (and the commit completes) once the WPQ takes it.
    pub commit_pending: bool,
    /// Undo: words of a safe write split between this record and memory whose memory part
    /// waits for the WPQ; the record (ADR domain) holds them (`data`) until the WPQ takes them,
    /// so a crash never keeps one part of that line write without the other.
    pub held: u8,
    /// Undo: the speculative write's number at its MC (`Mc::offered`, set once the read
    /// returned). Until it is persistent (`Mc::write_persistent`: out of the waiting queue, and
    /// under media persistence written to the media) the old contents the record read may
    /// include writes still pending ahead of it (a read sees them), which a crash would lose:
    /// only what safe writes gave the record is restored.
    pub spec_seq: u64,
}

impl Record {
    /// Applies a safe write to an undo record: words memory holds speculatively take the safe
    /// value (`absorbed`, which never went to memory); the others keep the record's copy current
    /// so a crash write-back never restores an older value, and the read in flight must not
    /// overwrite them.
    pub fn absorb(&mut self, data: &LineData, absorbed: u8, held: u8) {
        for i in 0..8 {
            if data.mask & (1 << i) == 0 {
                continue;
            }
            self.data.set(i, data.ids[i]);
            if absorbed & (1 << i) != 0 || self.reading {
                self.fresh |= 1 << i;
            }
        }
        self.held |= held;
    }
}

/// A safe write absorbed by an undo record behind an older write of its line that was not
/// persistent yet. Layers of a line apply to their record in arrival order.
#[derive(Clone, Copy, Debug)]
pub struct Layer {
    pub line: u64,
    /// The undo record's (core, epoch).
    pub owner: (u16, u64),
    /// It counts once its line's write number `after` is persistent (`Mc::write_persistent`).
    pub after: u64,
    pub data: LineData,
    /// Words the record took instead of memory.
    pub absorbed: u8,
    /// Words of the memory part the record holds while it waits (`Record::held`).
    pub held: u8,
    /// The write's reply, sent when the layer applies.
    pub reply: Option<DesignEv>,
    /// The split slot of its memory part, until that part is acknowledged (its reply then moves
    /// here).
    pub split: Option<usize>,
}

pub struct RecoveryTable {
    pub records: Vec<Record>,
    /// Safe writes waiting to apply to their undo record, oldest first.
    pub layers: Vec<Layer>,
    pub cap: usize,
    pub max_occupancy: usize,
    bloom: Vec<u8>,
}

impl RecoveryTable {
    pub fn new(cap: usize, bloom_counters: usize) -> RecoveryTable {
        RecoveryTable {
            records: Vec::with_capacity(cap),
            layers: Vec::new(),
            cap,
            max_occupancy: 0,
            bloom: vec![0; bloom_counters.max(1)],
        }
    }

    pub fn full(&self) -> bool {
        self.records.len() >= self.cap
    }

    pub fn push(&mut self, r: Record) {
        self.records.push(r);
        self.max_occupancy = self.max_occupancy.max(self.records.len());
    }

    pub fn undo_for(&mut self, line: u64) -> Option<&mut Record> {
        self.records.iter_mut().find(|r| r.kind == RecordKind::Undo && r.line == line)
    }

    /// The undo record a layer belongs to, if it still exists.
    pub fn owner_of(&mut self, l: &Layer) -> Option<&mut Record> {
        self.records.iter_mut().find(|r| r.kind == RecordKind::Undo && r.line == l.line && (r.core, r.epoch) == l.owner)
    }

    pub fn has_undo(&self, line: u64) -> bool {
        self.records.iter().any(|r| r.kind == RecordKind::Undo && r.line == line)
    }

    fn hashes(&self, line: u64) -> [usize; 2] {
        let n = self.bloom.len() as u64;
        let h = (line >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        [(h % n) as usize, ((h >> 32) % n) as usize]
    }

    pub fn bloom_insert(&mut self, line: u64) {
        for i in self.hashes(line) {
            self.bloom[i] = self.bloom[i].saturating_add(1);
        }
    }

    pub fn bloom_remove(&mut self, line: u64) {
        if self.bloom_contains(line) {
            for i in self.hashes(line) {
                self.bloom[i] = self.bloom[i].saturating_sub(1);
            }
        }
    }

    pub fn bloom_contains(&self, line: u64) -> bool {
        self.hashes(line).iter().all(|&i| self.bloom[i] > 0)
    }
}
