//! Streaming a whole trace in its *global order* (DESIGN.md §3), one event at a time.
//!
//! Why it exists: the replay sources ([`crate::EventSource`]) serve one thread each, which is
//! what a timing engine wants; analyses that define their semantics on the execution order (the
//! persist critical-path analysis of DESIGN.md §8) need every event in global order instead.
//! A binary trace stores each thread's events in blocks, written when a thread's block fills, so
//! the global order is recovered by a merge: blocks are decoded in file order into per-thread
//! queues and the event whose `gid` comes next is taken from the queue that holds it. Memory is
//! bounded by the blocks written out of order (about one block per thread), never the trace.
//! Gids are consecutive from 0 in every trace pmsim writes; if a trace skips some, the smallest
//! buffered gid is taken once the file is exhausted, so the order stays the gid order.
//! Every event passes the shared [`Validator`](crate::validate::Validator) as it is delivered,
//! so a streamed trace is held to exactly the rules of the text and in-memory readers.

use crate::binary::{decode_block, Cursor, Header, Record};
use crate::event::Event;
use crate::trace::Trace;
use crate::TraceError;
use std::io::BufReader;

/// One thread's decoded but not yet consumed events: `events[start..]`.
#[derive(Default)]
struct Queue {
    events: Vec<Event>,
    start: usize,
}

impl Queue {
    #[inline(always)]
    fn head_gid(&self) -> Option<u64> {
        self.events.get(self.start).map(|e| e.gid)
    }
}

/// Reads a binary trace file and yields its events in global order.
pub struct GlobalOrderReader {
    cursor: Cursor<BufReader<std::fs::File>>,
    queues: Vec<Queue>,
    bytes: Vec<u8>,
    labels: Vec<String>,
    next_gid: u64,
    last_thread: usize,
    eof: bool,
    delivered: u64,
    validator: crate::validate::Validator,
}

impl GlobalOrderReader {
    pub fn open(path: &std::path::Path) -> Result<GlobalOrderReader, TraceError> {
        let name = path.display().to_string();
        let f = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
        let cursor = Cursor::open(&name, BufReader::with_capacity(256 * 1024, f))?;
        let threads = cursor.header.threads;
        let pm = cursor.header.pm.clone();
        Ok(GlobalOrderReader {
            cursor,
            queues: (0..threads).map(|_| Queue::default()).collect(),
            bytes: Vec::new(),
            labels: Vec::new(),
            next_gid: 0,
            last_thread: 0,
            eof: false,
            delivered: 0,
            validator: {
                let mut v = crate::validate::Validator::new(threads);
                v.pm = pm;
                v
            },
        })
    }

    pub fn header(&self) -> &Header {
        &self.cursor.header
    }

    /// Labels seen so far (every label is written before its first use).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Reads the next record; `Ok(false)` once the END record is reached.
    fn read_record(&mut self) -> Result<bool, TraceError> {
        let at = self.cursor.offset;
        match self.cursor.next(&|_| true)? {
            Some(Record::Block { thread, count, payload }) => {
                let q = &mut self.queues[thread];
                // Drop what was consumed before appending, so a queue holds about one block.
                if q.start > 0 {
                    q.events.drain(..q.start);
                    q.start = 0;
                }
                self.bytes.clear();
                decode_block(&payload, count, &mut q.events, &mut self.bytes)
                    .map_err(|m| TraceError::new(&self.cursor.file, 0, format!("block at byte {at}: {m}")))?;
                Ok(true)
            }
            Some(Record::Label { name, .. }) => {
                if let Some(e) = crate::validate::label_error(&name) {
                    return Err(TraceError::new(&self.cursor.file, 0, format!("label at byte {at}: {e}")));
                }
                self.labels.push(name);
                self.validator.labels = self.labels.len();
                Ok(true)
            }
            Some(Record::End { total_events, total_labels }) => {
                if total_labels as usize != self.labels.len() {
                    return Err(TraceError::new(
                        &self.cursor.file,
                        0,
                        format!("END says {total_labels} labels, the file defines {}", self.labels.len()),
                    ));
                }
                let buffered: u64 = self.queues.iter().map(|q| (q.events.len() - q.start) as u64).sum();
                if self.delivered + buffered != total_events {
                    return Err(TraceError::new(
                        &self.cursor.file,
                        0,
                        format!("END says {total_events} events, blocks hold {}", self.delivered + buffered),
                    ));
                }
                Ok(false)
            }
            None => Ok(false),
        }
    }

    /// The thread whose queue holds the next event in global order, reading blocks as needed;
    /// `None` at the end of the trace.
    fn next_thread(&mut self) -> Result<Option<usize>, TraceError> {
        loop {
            if self.queues[self.last_thread].head_gid() == Some(self.next_gid) {
                return Ok(Some(self.last_thread));
            }
            if let Some(t) = (0..self.queues.len()).find(|&t| self.queues[t].head_gid() == Some(self.next_gid)) {
                return Ok(Some(t));
            }
            if self.eof {
                // Gids with gaps: the smallest buffered one comes next.
                return Ok((0..self.queues.len())
                    .filter_map(|t| self.queues[t].head_gid().map(|g| (g, t)))
                    .min()
                    .map(|(_, t)| t));
            }
            if !self.read_record()? {
                self.eof = true;
            }
        }
    }

    /// The next event in global order with its thread, or `None` at the end of the trace.
    /// (Values longer than 8 bytes are not kept: global-order consumers look at addresses.)
    pub fn next_event(&mut self) -> Result<Option<(usize, Event)>, TraceError> {
        let Some(t) = self.next_thread()? else { return Ok(None) };
        let q = &mut self.queues[t];
        let ev = q.events[q.start];
        q.start += 1;
        self.last_thread = t;
        self.next_gid = ev.gid + 1;
        self.delivered += 1;
        check(&mut self.validator, &self.cursor.file, t, &ev)?;
        Ok(Some((t, ev)))
    }

    /// Calls `f(thread, event)` for every remaining event in global order: runs of one thread's
    /// consecutive events are handed over in a tight loop.
    pub fn for_each(&mut self, mut f: impl FnMut(usize, &Event)) -> Result<(), TraceError> {
        while let Some(t) = self.next_thread()? {
            let q = &mut self.queues[t];
            let mut i = q.start;
            // The first event is taken even if gids have gaps (next_thread chose it).
            let gid = loop {
                let ev = &q.events[i];
                check(&mut self.validator, &self.cursor.file, t, ev)?;
                f(t, ev);
                i += 1;
                if i == q.events.len() || q.events[i].gid != ev.gid + 1 {
                    break ev.gid + 1;
                }
            };
            self.delivered += (i - q.start) as u64;
            q.start = i;
            self.next_gid = gid;
            self.last_thread = t;
        }
        Ok(())
    }
}

/// The shared trace rules on one event delivered in global order.
#[inline]
fn check(v: &mut crate::validate::Validator, file: &str, t: usize, ev: &Event) -> Result<(), TraceError> {
    v.order(ev)
        .and_then(|_| v.event(t, ev))
        .map_err(|m| TraceError::new(file, 0, format!("T{t} event {}: {m}", ev.gid)))
}

/// Calls `f(thread, event)` for every event of an in-memory trace in global order, by merging
/// the per-thread streams on `gid` (no sorted copy of the trace).
pub fn for_each_in_global_order(trace: &Trace, mut f: impl FnMut(usize, &Event)) {
    let n = trace.threads.len();
    let mut pos = vec![0usize; n];
    let mut last = 0usize;
    let head = |pos: &[usize], t: usize| trace.threads[t].events.get(pos[t]).map(|e| e.gid);
    let mut next_gid = 0u64;
    loop {
        let t = if n > 0 && head(&pos, last) == Some(next_gid) {
            last
        } else {
            match (0..n).filter_map(|t| head(&pos, t).map(|g| (g, t))).min() {
                Some((_, t)) => t,
                None => return,
            }
        };
        let ev = &trace.threads[t].events[pos[t]];
        pos[t] += 1;
        next_gid = ev.gid + 1;
        last = t;
        f(t, ev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, TraceBuilder};

    #[test]
    fn binary_stream_recovers_the_global_order() {
        let mut b = TraceBuilder::new(3);
        // Thread 0 writes far more than the others, so its blocks are emitted out of order.
        for i in 0..60_000u64 {
            let th = if i % 7 == 0 { 1 + (i % 2) as usize } else { 0 };
            b.push(th, Event::mem(Kind::Store, 0x1_0000_0000 + i * 8, 8), None);
        }
        let t = b.finish();
        let dir = std::env::temp_dir().join(format!("pmsim-ordered-{}.bin", std::process::id()));
        let f = std::fs::File::create(&dir).unwrap();
        crate::binary::write(std::io::BufWriter::new(f), &t, true).unwrap();
        let mut r = GlobalOrderReader::open(&dir).unwrap();
        let mut seen = Vec::new();
        while let Some((th, ev)) = r.next_event().unwrap() {
            seen.push((th, ev.gid, ev.addr));
        }
        let mut batched = Vec::new();
        GlobalOrderReader::open(&dir).unwrap().for_each(|th, ev| batched.push((th, ev.gid, ev.addr))).unwrap();
        assert_eq!(batched, seen);
        let mut want = Vec::new();
        for_each_in_global_order(&t, |th, ev| want.push((th, ev.gid, ev.addr)));
        std::fs::remove_file(&dir).ok();
        assert_eq!(want.len(), 60_000);
        assert!(want.windows(2).all(|w| w[0].1 + 1 == w[1].1));
        assert_eq!(seen, want);
    }
}
