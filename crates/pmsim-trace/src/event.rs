//! The event vocabulary of docs/design.md §3 as plain, copyable data.
//!
//! An [`Event`] is 32 bytes and never owns heap memory, so streams of them can be replayed in
//! tight loops. Values of up to 8 bytes live inline; longer values live in the [`Chunk`]'s byte
//! arena and `data` holds their offset there.
//!
//! [`Chunk`]: crate::Chunk

pub const WORD_BYTES: u64 = 8;
pub const LINE_BYTES: u64 = 64;
/// Largest `rdma_pwrite` region (1 MiB): one RDMA message, bounded so a region's lines fit the
/// server's buffers in a bounded number of steps.
pub const MAX_REGION_BYTES: u64 = 1 << 20;
/// The node id of the server in remote-persistence traces: the machine the engine simulates.
pub const SERVER_NODE: u32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    Compute = 0,
    Load = 1,
    Store = 2,
    NtStore = 3,
    Rmw = 4,
    Clwb = 5,
    ClflushOpt = 6,
    Clflush = 7,
    Sfence = 8,
    Mfence = 9,
    Ofence = 10,
    Dfence = 11,
    Acquire = 12,
    Release = 13,
    Strand = 14,
    Begin = 15,
    End = 16,
    RdmaPwrite = 17,
    RdmaWait = 18,
}

impl Kind {
    pub const ALL: [Kind; 19] = [
        Kind::Compute,
        Kind::Load,
        Kind::Store,
        Kind::NtStore,
        Kind::Rmw,
        Kind::Clwb,
        Kind::ClflushOpt,
        Kind::Clflush,
        Kind::Sfence,
        Kind::Mfence,
        Kind::Ofence,
        Kind::Dfence,
        Kind::Acquire,
        Kind::Release,
        Kind::Strand,
        Kind::Begin,
        Kind::End,
        Kind::RdmaPwrite,
        Kind::RdmaWait,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Compute => "compute",
            Kind::Load => "load",
            Kind::Store => "store",
            Kind::NtStore => "ntstore",
            Kind::Rmw => "rmw",
            Kind::Clwb => "clwb",
            Kind::ClflushOpt => "clflushopt",
            Kind::Clflush => "clflush",
            Kind::Sfence => "sfence",
            Kind::Mfence => "mfence",
            Kind::Ofence => "ofence",
            Kind::Dfence => "dfence",
            Kind::Acquire => "acquire",
            Kind::Release => "release",
            Kind::Strand => "strand",
            Kind::Begin => "begin",
            Kind::End => "end",
            Kind::RdmaPwrite => "rdma_pwrite",
            Kind::RdmaWait => "rdma_wait",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.name() == s)
    }

    pub fn from_u8(v: u8) -> Option<Kind> {
        Kind::ALL.get(v as usize).copied()
    }

    /// Does the event write memory (and so get a store identity)?
    pub fn writes(self) -> bool {
        matches!(self, Kind::Store | Kind::NtStore | Kind::Rmw | Kind::Release)
    }

    /// Does the event read memory?
    pub fn reads(self) -> bool {
        matches!(self, Kind::Load | Kind::Rmw | Kind::Acquire)
    }

    /// Synchronisation events are replayed in global order per address (docs/design.md §3).
    pub fn is_sync(self) -> bool {
        matches!(self, Kind::Acquire | Kind::Release | Kind::Rmw)
    }

    /// Events that take an address.
    pub fn has_addr(self) -> bool {
        matches!(
            self,
            Kind::Load
                | Kind::Store
                | Kind::NtStore
                | Kind::Rmw
                | Kind::Clwb
                | Kind::ClflushOpt
                | Kind::Clflush
                | Kind::Acquire
                | Kind::Release
        )
    }

    /// Persist barriers of the epoch and release models: split epochs.
    pub fn is_barrier(self) -> bool {
        matches!(self, Kind::Ofence | Kind::Dfence)
    }

    /// Remote persistence over RDMA (docs/design.md §9): a client thread's `rdma_pwrite`/`rdma_wait`.
    pub fn is_remote(self) -> bool {
        matches!(self, Kind::RdmaPwrite | Kind::RdmaWait)
    }
}

/// One trace event.
///
/// Field use by kind:
/// - `compute`: `addr` = instruction count.
/// - memory events: `addr`, `size` (bytes, 1..=64, within one 64 B line); `has_value` tells
///   whether `data` holds the value (inline little-endian for `size <= 8`, else the offset of
///   `size` bytes in the chunk's byte arena).
/// - `acquire`: `aux` = how many releasing events (`release`, `rmw`) on its address precede it in
///   global order; the engine performs it once that many have performed, so acquires between two
///   releases may perform in any order (they only read).
/// - `release`/`rmw`: `aux` = how many sync events of any kind on its address precede it in
///   global order; the engine performs it once all of them have, so every acquire still reads
///   the value the trace's order gives it.
/// - `begin`/`end`: `addr` = label id (index into the trace's label table).
/// - `rdma_pwrite`: `addr` = the region's first byte at the server, `data` = its length in bytes
///   (1..=[`MAX_REGION_BYTES`]), `aux` = the server node; `size` is 0 (a region is not a
///   line-sized access).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub gid: u64,
    pub addr: u64,
    pub data: u64,
    pub aux: u32,
    pub kind: Kind,
    pub size: u8,
    pub has_value: bool,
}

impl Event {
    pub fn new(kind: Kind) -> Event {
        Event { gid: 0, addr: 0, data: 0, aux: 0, kind, size: 0, has_value: false }
    }

    pub fn mem(kind: Kind, addr: u64, size: u8) -> Event {
        Event { addr, size, ..Event::new(kind) }
    }

    /// An `rdma_pwrite` of `len` bytes at `addr` on server `node`.
    pub fn rdma_pwrite(node: u32, addr: u64, len: u64) -> Event {
        Event { addr, data: len, aux: node, ..Event::new(Kind::RdmaPwrite) }
    }

    pub fn line(&self) -> u64 {
        self.addr & !(LINE_BYTES - 1)
    }
}
