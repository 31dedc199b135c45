//! pmsim traces: the data every other part of pmsim reads or writes.
//!
//! A trace is one event stream per thread plus a *global order* over all events (the order in
//! which they happened in the run that produced the trace). Every event carries its position in
//! that order (`gid`), which is also the identity of the store it performs: the crash checker
//! names stores by `gid`, and every 8-byte word in the simulated machine carries the `gid` of the
//! store that last wrote it.
//!
//! This crate owns the vocabulary ([`Event`], [`Kind`]), the two on-disk formats (the text format
//! fixed by docs/design.md §3.1 and the streamed binary format documented in `docs/binary-trace.md`),
//! streaming replay ([`EventSource`]), persistent-memory images ([`MemImage`]) and the engine's
//! record of a run ([`RunRecord`]) that the checker reads.

pub mod binary;
mod dialect;
mod error;
mod event;
mod image;
pub mod lint;
pub mod meta;
mod ordered;
mod record;
mod source;
mod stats;
pub mod text;
mod trace;
pub mod validate;

pub use dialect::{Dialect, DialectScan};
pub use error::TraceError;
pub use event::{Event, Kind, LINE_BYTES, MAX_REGION_BYTES, SERVER_NODE, WORD_BYTES};
pub use image::{MemImage, ReadLog, ReadMark, WordVal, INITIAL as INITIAL_ID};
pub use ordered::{for_each_in_global_order, GlobalOrderReader};
pub use record::{Access, RunRecord, SyncPerform, WordAccess};
pub use source::{validate_binary, validate_binary_dialect, BinarySource, Chunk, EventSource, VecSource};
pub use stats::TraceStats;
pub use trace::{is_pm, EventSink, PmRange, Sequencer, ThreadStream, Trace, TraceBuilder, DEFAULT_PM};
