//! Streaming replay: each simulated core pulls its own thread's events chunk by chunk.
//!
//! The engine never needs a whole trace in memory: [`BinarySource`] keeps one file cursor per
//! thread and decodes only that thread's blocks; [`VecSource`] serves an in-memory trace.

use crate::binary::{decode_block, Cursor, Record};
use crate::event::Event;
use crate::trace::{value_of, Trace};
use crate::TraceError;
use std::sync::Arc;

/// A run of one thread's events plus the arena holding their long values.
#[derive(Default, Debug)]
pub struct Chunk {
    pub events: Vec<Event>,
    pub bytes: Vec<u8>,
}

impl Chunk {
    pub fn value<'a>(&'a self, ev: &Event, buf: &'a mut [u8; 64]) -> Option<&'a [u8]> {
        value_of(ev, &self.bytes, buf)
    }
}

/// A thread's event stream.
pub trait EventSource: Send {
    /// Replaces `chunk`'s contents with the next events; `Ok(false)` at the end of the stream.
    fn next_chunk(&mut self, chunk: &mut Chunk) -> Result<bool, TraceError>;
}

/// Serves one thread of an in-memory trace in chunks of bounded size.
pub struct VecSource {
    trace: Arc<Trace>,
    thread: usize,
    pos: usize,
}

impl VecSource {
    pub fn new(trace: Arc<Trace>, thread: usize) -> VecSource {
        VecSource { trace, thread, pos: 0 }
    }

    /// One source per thread of `trace`.
    pub fn all(trace: &Arc<Trace>) -> Vec<Box<dyn EventSource>> {
        (0..trace.num_threads()).map(|t| Box::new(VecSource::new(trace.clone(), t)) as Box<dyn EventSource>).collect()
    }
}

/// Events per chunk: 512 x 32 B = 16 KiB, so a chunk copied in is still in the host's L1/L2 when
/// its core replays it (4096 cost eADR 5% in events per second; docs/performance.md).
const CHUNK_EVENTS: usize = 512;

impl EventSource for VecSource {
    fn next_chunk(&mut self, chunk: &mut Chunk) -> Result<bool, TraceError> {
        let s = &self.trace.threads[self.thread];
        chunk.events.clear();
        chunk.bytes.clear();
        if self.pos >= s.events.len() {
            return Ok(false);
        }
        let end = (self.pos + CHUNK_EVENTS).min(s.events.len());
        let mut buf = [0u8; 64];
        // One block copy, then the few events with an out-of-line value are pointed at the
        // chunk's own bytes (an event-by-event copy was 5% of an eADR run).
        let Chunk { events, bytes } = chunk;
        events.extend_from_slice(&s.events[self.pos..end]);
        for e in events.iter_mut() {
            if e.has_value && e.size > 8 {
                let v = value_of(e, &s.bytes, &mut buf).unwrap_or(&[]);
                let at = bytes.len() as u64;
                bytes.extend_from_slice(v);
                e.data = at;
            }
        }
        self.pos = end;
        Ok(true)
    }
}

/// Streams one thread of a binary trace file.
pub struct BinarySource {
    cursor: Cursor<std::io::BufReader<std::fs::File>>,
    thread: usize,
    done: bool,
}

impl BinarySource {
    /// The file's name, for error messages.
    pub fn file(&self) -> &str {
        &self.cursor.file
    }

    pub fn open(path: &std::path::Path, thread: usize) -> Result<BinarySource, TraceError> {
        let name = path.display().to_string();
        let f = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
        let cursor = Cursor::open(&name, std::io::BufReader::with_capacity(256 * 1024, f))?;
        Ok(BinarySource { cursor, thread, done: false })
    }

    /// The file's header (threads, PM ranges).
    pub fn header(&self) -> &crate::binary::Header {
        &self.cursor.header
    }

    /// All labels of the file, in id order (a separate scan; labels are small).
    pub fn labels(path: &std::path::Path) -> Result<Vec<String>, TraceError> {
        Ok(BinarySource::scan(path)?.0)
    }

    /// The labels (checked: ids in order, names a text trace can hold, no repeats) and the END
    /// record's event count, skipping blocks.
    pub(crate) fn scan(path: &std::path::Path) -> Result<(Vec<String>, u64), TraceError> {
        let mut s = BinarySource::open(path, usize::MAX)?;
        let file = s.cursor.file.clone();
        let mut labels: Vec<String> = Vec::new();
        let mut seen = rustc_hash::FxHashSet::default();
        loop {
            let at = s.cursor.offset;
            let bad = |m: String| TraceError::new(&file, 0, format!("label at byte {at}: {m}"));
            match s.cursor.next(&|_| false)? {
                Some(Record::Label { id, name }) => {
                    if id as usize != labels.len() {
                        return Err(bad(format!("id {id} out of order (expected {})", labels.len())));
                    }
                    if let Some(e) = crate::validate::label_error(&name) {
                        return Err(bad(e));
                    }
                    if !seen.insert(name.clone()) {
                        return Err(bad(format!("'{name}' defined twice")));
                    }
                    labels.push(name)
                }
                Some(Record::End { total_events, total_labels }) => {
                    if total_labels as usize != labels.len() {
                        return Err(TraceError::new(
                            &file,
                            0,
                            format!("END says {total_labels} labels, the file defines {}", labels.len()),
                        ));
                    }
                    return Ok((labels, total_events));
                }
                None => return Ok((labels, 0)),
                Some(Record::Block { .. }) => {}
            }
        }
    }
}

/// Checks a binary trace file without loading it: its records, its END totals, and every event
/// in global order through the shared [`Validator`](crate::validate::Validator), exactly as a
/// text trace is checked. Runs and conversions that stream a binary file call this first, so
/// they accept exactly what the in-memory reader accepts.
pub fn validate_binary(path: &std::path::Path) -> Result<(), TraceError> {
    validate_binary_dialect(path).map(|_| ())
}

/// [`validate_binary`], also telling the trace's [`Dialect`](crate::Dialect) from the same pass.
pub fn validate_binary_dialect(path: &std::path::Path) -> Result<crate::Dialect, TraceError> {
    let mut scan = crate::DialectScan::default();
    crate::ordered::GlobalOrderReader::open(path)?.for_each(|_, ev| scan.see(ev.kind))?;
    // A trace without any ordering event is x86 only if a program made it (its metadata).
    if scan.dialect() == crate::Dialect::Neutral
        && !scan.has_neutral()
        && crate::meta::recorded(&crate::meta::read_meta(path)?)
    {
        scan.recorded_program();
    }
    Ok(scan.dialect())
}

impl EventSource for BinarySource {
    fn next_chunk(&mut self, chunk: &mut Chunk) -> Result<bool, TraceError> {
        chunk.events.clear();
        chunk.bytes.clear();
        if self.done {
            return Ok(false);
        }
        let me = self.thread;
        loop {
            let at = self.cursor.offset;
            match self.cursor.next(&|t| t == me)? {
                Some(Record::Block { count, payload, .. }) => {
                    decode_block(&payload, count, &mut chunk.events, &mut chunk.bytes)
                        .map_err(|m| TraceError::new(&self.cursor.file, 0, format!("block at byte {at}: {m}")))?;
                    return Ok(true);
                }
                Some(Record::Label { .. }) => {}
                Some(Record::End { .. }) | None => {
                    self.done = true;
                    return Ok(false);
                }
            }
        }
    }
}
