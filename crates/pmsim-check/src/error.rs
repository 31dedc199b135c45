//! Why a trace and a run record cannot be checked together.

/// A run record that does not match its trace. Every variant names the record entry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CheckError {
    #[error("record {list}[{index}]: gid {gid} is not an event of the trace")]
    UnknownGid { list: &'static str, index: usize, gid: u64 },
    #[error("record {list}[{index}]: gid {gid} is on thread T{trace_thread} in the trace but the record says T{record_thread}")]
    ThreadMismatch { list: &'static str, index: usize, gid: u64, trace_thread: usize, record_thread: u16 },
    #[error("record {list}[{index}]: gid {gid} is a '{kind}' event, which cannot perform {what}")]
    KindMismatch { list: &'static str, index: usize, gid: u64, kind: &'static str, what: &'static str },
    #[error("record accesses[{index}]: gid {gid} accesses word {word:#x} outside its bytes [{addr:#x}, +{size})")]
    WordOutside { index: usize, gid: u64, word: u64, addr: u64, size: u8 },
    #[error("record accesses[{index}]: store gid {gid} performed word {word:#x} twice")]
    DuplicateStore { index: usize, gid: u64, word: u64 },
    #[error("record {list}[{index}]: time {time} is before the previous entry's {prev} (must be in performed order)")]
    TimeNotMonotone { list: &'static str, index: usize, time: u64, prev: u64 },
    #[error("record syncs[{index}]: gid {gid} syncs on {addr:#x} but the trace event is on {trace_addr:#x}")]
    SyncAddr { index: usize, gid: u64, addr: u64, trace_addr: u64 },
    #[error("trace has {0} threads; the checker supports at most 65535")]
    TooManyThreads(usize),
    #[error("trace event gid {gid} appears twice")]
    DuplicateGid { gid: u64 },
}
