//! Streaming a whole trace in its *global order* (docs/design.md §3), one event at a time.
//!
//! Why it exists: the replay sources ([`crate::EventSource`]) serve one thread each, which is
//! what a timing engine wants; analyses that define their semantics on the execution order (the
//! persist critical-path analysis of docs/design.md §8) need every event in global order instead.
//! A binary trace stores each thread's events in blocks, written when a thread's block fills, so
//! a thread that runs rarely may have its early events written at the very end of the file.
//! The reader therefore keeps one cursor per thread (a [`BinarySource`], which skips other
//! threads' blocks by seeking) and merges them on `gid`: memory is one decoded block per thread,
//! whatever the interleaving, never the trace. Gids are consecutive from 0 in every trace pmsim
//! writes; if a trace skips some, the smallest pending gid is taken, so the order stays the gid
//! order. Every event passes the shared [`Validator`](crate::validate::Validator) as it is
//! delivered, so a streamed trace is held to exactly the rules of the text and in-memory readers
//! (and [`crate::validate_binary`] is this reader run to the end).

use crate::binary::Header;
use crate::event::Event;
use crate::source::{BinarySource, Chunk, EventSource};
use crate::trace::Trace;
use crate::TraceError;

/// One thread's cursor and its current decoded block (also the streaming cut of
/// [`crate::binary::write_to_first_gap`]).
pub(crate) struct Lane {
    src: BinarySource,
    pub(crate) chunk: Chunk,
    /// The lane's next event's index in `chunk`.
    pub(crate) pos: usize,
    done: bool,
}

impl Lane {
    pub(crate) fn new(src: BinarySource) -> Lane {
        Lane { src, chunk: Chunk::default(), pos: 0, done: false }
    }

    /// The gid of the lane's next event, decoding its next block when the current one is used up.
    pub(crate) fn head_gid(&mut self) -> Result<Option<u64>, TraceError> {
        while self.pos == self.chunk.events.len() {
            if self.done {
                return Ok(None);
            }
            self.pos = 0;
            if !self.src.next_chunk(&mut self.chunk)? {
                self.done = true;
            }
        }
        Ok(Some(self.chunk.events[self.pos].gid))
    }
}

/// Reads a binary trace file and yields its events in global order.
pub struct GlobalOrderReader {
    header: Header,
    lanes: Vec<Lane>,
    next_gid: u64,
    last: usize,
    validator: crate::validate::Validator,
    /// Events delivered, and the END record's count they must reach.
    delivered: u64,
    total: u64,
}

impl GlobalOrderReader {
    pub fn open(path: &std::path::Path) -> Result<GlobalOrderReader, TraceError> {
        let first = BinarySource::open(path, 0)?;
        let header = first.header().clone();
        let mut lanes = Vec::with_capacity(header.threads);
        if header.threads > 0 {
            lanes.push(Lane::new(first));
        }
        for t in 1..header.threads {
            lanes.push(Lane::new(BinarySource::open(path, t)?));
        }
        let (labels, total) = BinarySource::scan(path)?;
        let mut validator = crate::validate::Validator::new(header.threads);
        validator.labels = labels.len();
        validator.pm = header.pm.clone();
        Ok(GlobalOrderReader { header, lanes, next_gid: 0, last: 0, validator, delivered: 0, total })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The lane holding the next event in global order; `None` at the end of the trace.
    fn next_lane(&mut self) -> Result<Option<usize>, TraceError> {
        let lane = self.pick_lane()?;
        if lane.is_none() && self.delivered != self.total {
            return Err(TraceError::new(
                self.lanes.first().map_or("", |l| l.src.file()),
                0,
                format!("END says {} events, blocks hold {}", self.total, self.delivered),
            ));
        }
        Ok(lane)
    }

    fn pick_lane(&mut self) -> Result<Option<usize>, TraceError> {
        if self.lanes.is_empty() {
            return Ok(None);
        }
        if self.lanes[self.last].head_gid()? == Some(self.next_gid) {
            return Ok(Some(self.last));
        }
        let mut best: Option<(u64, usize)> = None;
        for t in 0..self.lanes.len() {
            if let Some(g) = self.lanes[t].head_gid()? {
                if g == self.next_gid {
                    return Ok(Some(t));
                }
                if best.is_none_or(|(b, _)| g < b) {
                    best = Some((g, t));
                }
            }
        }
        Ok(best.map(|(_, t)| t))
    }

    /// The next event in global order with its thread, or `None` at the end of the trace.
    /// (Values longer than 8 bytes are not kept: global-order consumers look at addresses.)
    pub fn next_event(&mut self) -> Result<Option<(usize, Event)>, TraceError> {
        let Some(t) = self.next_lane()? else { return Ok(None) };
        let lane = &mut self.lanes[t];
        let ev = lane.chunk.events[lane.pos];
        check(&mut self.validator, lane.src.file(), t, &ev)?;
        lane.pos += 1;
        self.last = t;
        self.next_gid = ev.gid + 1;
        self.delivered += 1;
        Ok(Some((t, ev)))
    }

    /// Calls `f(thread, event)` for every remaining event in global order: runs of one thread's
    /// consecutive events are handed over in a tight loop.
    pub fn for_each(&mut self, mut f: impl FnMut(usize, &Event)) -> Result<(), TraceError> {
        while let Some(t) = self.next_lane()? {
            let lane = &mut self.lanes[t];
            let evs = &lane.chunk.events;
            let mut i = lane.pos;
            // The first event is taken even if gids have gaps (next_lane chose it).
            let gid = loop {
                let ev = &evs[i];
                check(&mut self.validator, lane.src.file(), t, ev)?;
                f(t, ev);
                i += 1;
                if i == evs.len() || evs[i].gid != ev.gid + 1 {
                    break ev.gid + 1;
                }
            };
            self.delivered += (i - lane.pos) as u64;
            lane.pos = i;
            self.next_gid = gid;
            self.last = t;
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
        // Thread 2 runs once at the start and once at the end: its first block is written last.
        b.push(2, Event::mem(Kind::Load, 0x2000, 8), None);
        for i in 0..60_000u64 {
            let th = if i % 7 == 0 { 1 } else { 0 };
            b.push(th, Event::mem(Kind::Store, 0x1_0000_0000 + i * 8, 8), None);
        }
        b.push(2, Event::mem(Kind::Load, 0x2000, 8), None);
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
        assert_eq!(want.len(), 60_002);
        assert!(want.windows(2).all(|w| w[0].1 + 1 == w[1].1));
        assert_eq!(seen, want);
    }
}
