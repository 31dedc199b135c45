//! In-memory traces and the builder that assigns global order and sync ordinals.
//!
//! Everything that produces a trace (the text parser, the binary reader, the workload
//! generators) goes through [`TraceBuilder`], so `gid`s and sync ordinals are assigned in one
//! place and mean the same thing whatever the source.

use crate::event::{Event, Kind};
use rustc_hash::FxHashMap;

/// A persistent-memory address range `[base, base + size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmRange {
    pub base: u64,
    pub size: u64,
}

impl PmRange {
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }
}

/// docs/design.md §3: one range at 0x1_0000_0000 of 16 GiB when a trace names none.
pub const DEFAULT_PM: PmRange = PmRange { base: 0x1_0000_0000, size: 16 << 30 };

/// One thread's events in program order, with the byte arena holding values longer than 8 bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadStream {
    pub events: Vec<Event>,
    pub bytes: Vec<u8>,
}

impl ThreadStream {
    /// The value an event writes, little-endian, `size` bytes; `None` when the trace gave none.
    pub fn value<'a>(&'a self, ev: &Event, buf: &'a mut [u8; 64]) -> Option<&'a [u8]> {
        value_of(ev, &self.bytes, buf)
    }
}

pub(crate) fn value_of<'a>(ev: &Event, arena: &'a [u8], buf: &'a mut [u8; 64]) -> Option<&'a [u8]> {
    if !ev.has_value {
        return None;
    }
    let n = ev.size as usize;
    if n <= 8 {
        buf[..8].copy_from_slice(&ev.data.to_le_bytes());
        Some(&buf[..n])
    } else {
        let off = ev.data as usize;
        arena.get(off..off + n)
    }
}

/// A whole trace in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    pub pm: Vec<PmRange>,
    pub labels: Vec<String>,
    pub threads: Vec<ThreadStream>,
    /// Its metadata, `(key, value)` in file order (`crate::meta`): how it was made and whether
    /// it is complete, so a copy written from memory says what the original does.
    pub meta: Vec<(String, String)>,
}

impl Trace {
    pub fn num_threads(&self) -> usize {
        self.threads.len()
    }

    /// Recorded from a program by `pmsim trace record` (its metadata says so): the program's
    /// x86 code, whatever events it holds (`crate::dialect`).
    pub fn recorded(&self) -> bool {
        crate::meta::recorded(&self.meta)
    }

    pub fn num_events(&self) -> usize {
        self.threads.iter().map(|t| t.events.len()).sum()
    }

    pub fn pm_ranges(&self) -> &[PmRange] {
        &self.pm
    }

    pub fn is_pm(&self, addr: u64) -> bool {
        is_pm(&self.pm, addr)
    }

    /// All events in global order as (thread, index in thread).
    pub fn global_order(&self) -> Vec<(u16, u32)> {
        let mut all: Vec<(u64, u16, u32)> = Vec::with_capacity(self.num_events());
        for (t, s) in self.threads.iter().enumerate() {
            for (i, e) in s.events.iter().enumerate() {
                all.push((e.gid, t as u16, i as u32));
            }
        }
        all.sort_unstable();
        all.into_iter().map(|(_, t, i)| (t, i)).collect()
    }
}

pub fn is_pm(ranges: &[PmRange], addr: u64) -> bool {
    ranges.iter().any(|r| r.contains(addr))
}

/// Receives a trace event by event in global order: the in-memory [`TraceBuilder`] and the
/// streaming binary writer both implement it, so every reader can feed either.
pub trait EventSink {
    /// Called once, before anything else.
    fn set_threads(&mut self, n: usize) -> std::io::Result<()>;
    /// Called before the first event.
    fn add_pm_range(&mut self, base: u64, size: u64) -> std::io::Result<()>;
    /// The id of a `begin`/`end` label, interning it on first use.
    fn label(&mut self, name: &str) -> std::io::Result<u32>;
    /// Appends `ev` (gid and sync ordinal are assigned here) with its value bytes, if any.
    fn push(&mut self, thread: usize, ev: Event, value: Option<&[u8]>) -> std::io::Result<u64>;
    fn num_threads(&self) -> usize;
    fn num_events(&self) -> u64;
    /// One metadata line (`key=value`) of the source, in file order.
    fn meta_line(&mut self, _line: &str) {}
}

/// Assigns global ids and per-address sync ordinals: the one place they are defined.
#[derive(Default)]
pub struct Sequencer {
    next_gid: u64,
    /// Per sync address: (sync events so far, releasing events — release or rmw — so far).
    sync_counts: FxHashMap<u64, (u32, u32)>,
}

impl Sequencer {
    pub fn stamp(&mut self, ev: &mut Event) {
        ev.gid = self.next_gid;
        self.next_gid += 1;
        if ev.kind.is_sync() {
            let (all, releases) = self.sync_counts.entry(ev.addr).or_insert((0, 0));
            if ev.kind == Kind::Acquire {
                ev.aux = *releases;
            } else {
                ev.aux = *all;
                *releases += 1;
            }
            *all += 1;
        }
    }
    pub fn next_gid(&self) -> u64 {
        self.next_gid
    }
}

/// Builds a [`Trace`] event by event in global order.
pub struct TraceBuilder {
    meta: Vec<(String, String)>,
    pm: Vec<PmRange>,
    labels: Vec<String>,
    label_ids: FxHashMap<String, u32>,
    threads: Vec<ThreadStream>,
    seq: Sequencer,
}

impl TraceBuilder {
    pub fn new(threads: usize) -> TraceBuilder {
        TraceBuilder {
            meta: Vec::new(),
            pm: Vec::new(),
            labels: Vec::new(),
            label_ids: FxHashMap::default(),
            threads: vec![ThreadStream::default(); threads],
            seq: Sequencer::default(),
        }
    }

    pub fn num_threads(&self) -> usize {
        self.threads.len()
    }

    pub fn add_pm_range(&mut self, base: u64, size: u64) {
        self.pm.push(PmRange { base, size });
    }

    /// The id of a `begin`/`end` label, interning it on first use.
    pub fn label(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.label_ids.get(name) {
            return id;
        }
        let id = self.labels.len() as u32;
        self.labels.push(name.to_string());
        self.label_ids.insert(name.to_string(), id);
        id
    }

    /// The gid the next pushed event will get.
    pub fn next_gid(&self) -> u64 {
        self.seq.next_gid()
    }

    /// Appends an event to `thread` as the next in global order. `value` (little-endian, exactly
    /// `ev.size` bytes) overrides `ev.data`/`ev.has_value` when given. Returns its gid.
    ///
    /// Panics if `thread` is out of range: callers validate thread numbers of untrusted input.
    pub fn push(&mut self, thread: usize, mut ev: Event, value: Option<&[u8]>) -> u64 {
        self.seq.stamp(&mut ev);
        let stream = &mut self.threads[thread];
        if let Some(v) = value {
            debug_assert_eq!(v.len(), ev.size as usize);
            ev.has_value = true;
            if v.len() <= 8 {
                let mut b = [0u8; 8];
                b[..v.len()].copy_from_slice(v);
                ev.data = u64::from_le_bytes(b);
            } else {
                ev.data = stream.bytes.len() as u64;
                stream.bytes.extend_from_slice(v);
            }
        }
        stream.events.push(ev);
        ev.gid
    }

    /// Convenience for generators: a store-like event with an integer value (size <= 8).
    pub fn store_u64(&mut self, thread: usize, kind: Kind, addr: u64, size: u8, value: u64) -> u64 {
        let bytes = value.to_le_bytes();
        self.push(thread, Event::mem(kind, addr, size), Some(&bytes[..size.min(8) as usize]))
    }

    pub fn finish(self) -> Trace {
        let pm = if self.pm.is_empty() { vec![crate::DEFAULT_PM] } else { self.pm };
        Trace { pm, labels: self.labels, threads: self.threads, meta: self.meta }
    }
}

impl EventSink for TraceBuilder {
    fn set_threads(&mut self, n: usize) -> std::io::Result<()> {
        self.threads = vec![ThreadStream::default(); n];
        Ok(())
    }
    fn add_pm_range(&mut self, base: u64, size: u64) -> std::io::Result<()> {
        TraceBuilder::add_pm_range(self, base, size);
        Ok(())
    }
    fn label(&mut self, name: &str) -> std::io::Result<u32> {
        Ok(TraceBuilder::label(self, name))
    }
    fn push(&mut self, thread: usize, ev: Event, value: Option<&[u8]>) -> std::io::Result<u64> {
        Ok(TraceBuilder::push(self, thread, ev, value))
    }
    fn num_threads(&self) -> usize {
        self.threads.len()
    }
    fn num_events(&self) -> u64 {
        self.seq.next_gid()
    }
    fn meta_line(&mut self, line: &str) {
        self.meta.extend(crate::meta::pairs([line]));
    }
}
