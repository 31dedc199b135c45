//! The engine's record of a run, kept independently of any design, for the checker.
//!
//! docs/design.md §6: the checker builds the persist order from the trace *and* from the order in
//! which accesses to each word were actually performed in the simulated run (coherence order),
//! never from a design's own dependency tracking. This is that order.

/// What an access did to a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The store with this record's gid became visible (performed) at the word.
    Store,
    /// A load read the word; `read` is the gid of the store whose value it saw
    /// ([`crate::INITIAL_ID`] for the initial contents). Loads forwarded from the thread's own
    /// store buffer are recorded too (they read the thread's own store).
    Load { read: u64 },
}

/// One access to one 8-byte word (an access covering several words appears once per word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordAccess {
    /// Simulated time (ps) at which it was performed.
    pub time: u64,
    pub gid: u64,
    pub thread: u16,
    pub word: u64,
    pub kind: Access,
}

/// A synchronisation event (acquire, release, rmw) as performed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPerform {
    pub time: u64,
    pub gid: u64,
    pub thread: u16,
    pub addr: u64,
}

/// Everything the checker needs to know about one run, in perform order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRecord {
    /// Word accesses in the order performed (non-decreasing `time`).
    pub accesses: Vec<WordAccess>,
    /// Sync events in the order performed.
    pub syncs: Vec<SyncPerform>,
    /// (gid, time) at which each dfence completed (returned to the core).
    pub dfences: Vec<(u64, u64)>,
    /// (gid, time) at which each `sfence`/`mfence` completed (left the store buffer): under x86
    /// persistency, what its thread flushed before it is durable from then on.
    pub fences: Vec<(u64, u64)>,
}

impl RunRecord {
    pub fn clear(&mut self) {
        self.accesses.clear();
        self.syncs.clear();
        self.dfences.clear();
        self.fences.clear();
    }
}
