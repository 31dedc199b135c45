//! The MESI directory at the LLC: who holds each line, and who last wrote and read it.
//!
//! Besides the usual owner and sharer sets, every entry remembers the line's *last writer* and
//! the cores that read it since that write. These survive evictions (they describe history, not
//! presence) and are the hook where cross-thread persist dependencies are detected: an access
//! whose line was last written by another core (read-after-write, write-after-write) or a store
//! to a line other cores have read since its last write (write-after-read) is a *conflict*, and
//! the designs that track epoch persistency get told about it.

use rustc_hash::FxHashMap;

pub const NO_CORE: u8 = u8::MAX;

#[derive(Clone, Copy, Debug)]
pub struct DirEntry {
    /// Core holding the line in M (or E) state, or NO_CORE.
    pub owner: u8,
    /// Cores holding a copy (bit per core), including the owner.
    pub sharers: u64,
    /// Core whose store most recently performed on the line, or NO_CORE.
    pub last_writer: u8,
    /// Cores that read the line since its last write.
    pub readers: u64,
    /// Some cache holds the line dirty (newer than memory).
    pub dirty: bool,
    /// When the line's data is on chip (a fill from memory in progress until then).
    pub ready_at: u64,
    /// The stamp ([`super::hierarchy::Hierarchy::stamp`]) of the last write.
    pub written_seq: u64,
    /// The stamp of the latest read since that write.
    pub read_seq: u64,
}

impl Default for DirEntry {
    fn default() -> Self {
        DirEntry {
            owner: NO_CORE,
            sharers: 0,
            last_writer: NO_CORE,
            readers: 0,
            dirty: false,
            ready_at: 0,
            written_seq: 0,
            read_seq: 0,
        }
    }
}

/// A cross-core conflict seen at the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The core whose earlier access the requester's access is ordered after.
    pub source: usize,
    pub line: u64,
    /// Source wrote the line (RAW/WAW) rather than only read it (WAR).
    pub source_wrote: bool,
    /// The requester is storing (WAW/WAR) rather than loading (RAW).
    pub requester_wrote: bool,
    /// The stamp ([`super::hierarchy::Hierarchy::stamp`]) of the source's access, or a later
    /// one: the last write's, or for a WAR the latest read of the line since that write. The
    /// source's access belongs to the epoch it had open then or to an earlier one, so a design
    /// can tell an access whose epoch has already persisted (nothing to order) from one still in
    /// flight, even when an epoch opened within the same picosecond.
    pub seq: u64,
}

#[derive(Default)]
pub struct Directory {
    pub lines: FxHashMap<u64, DirEntry>,
    pub forwards: u64,
    pub invalidations: u64,
}

impl Directory {
    #[inline]
    pub fn entry(&mut self, line: u64) -> &mut DirEntry {
        self.lines.entry(line).or_default()
    }

    pub fn get(&self, line: u64) -> Option<&DirEntry> {
        self.lines.get(&line)
    }

    /// Conflicts a load by `core` has with earlier accesses.
    #[inline]
    pub fn load_conflicts(e: &DirEntry, core: usize, out: &mut Vec<Conflict>, line: u64) {
        if e.last_writer != NO_CORE && e.last_writer as usize != core {
            out.push(Conflict {
                source: e.last_writer as usize,
                line,
                source_wrote: true,
                requester_wrote: false,
                seq: e.written_seq,
            });
        }
    }

    /// Conflicts a store by `core` has with earlier accesses.
    #[inline]
    pub fn store_conflicts(e: &DirEntry, core: usize, out: &mut Vec<Conflict>, line: u64) {
        if e.last_writer != NO_CORE && e.last_writer as usize != core {
            // One conflict covers the writer's write and any read of its own since (the later).
            let read_since = e.readers & (1u64 << e.last_writer) != 0;
            out.push(Conflict {
                source: e.last_writer as usize,
                line,
                source_wrote: true,
                requester_wrote: true,
                seq: if read_since { e.read_seq.max(e.written_seq) } else { e.written_seq },
            });
        }
        let mut r = e.readers & !(1u64 << core);
        if e.last_writer != NO_CORE {
            r &= !(1u64 << e.last_writer);
        }
        while r != 0 {
            let c = r.trailing_zeros() as usize;
            r &= r - 1;
            out.push(Conflict { source: c, line, source_wrote: false, requester_wrote: true, seq: e.read_seq });
        }
    }
}
