//! The one set of rules every trace must satisfy, whichever format it came in.
//!
//! Why one validator: the text reader and the binary reader used to check different things, so
//! a binary file could hold what no text file can say (an access crossing a line, a label id
//! with no label, duplicate ids) and `convert` then wrote text the text reader refused. Both
//! readers now call [`Validator`]: per event ([`Validator::event`]) the rules the text grammar
//! implies, and, for formats that carry their own global ids and sync ordinals (binary),
//! [`Validator::order`] checks them against what the [`Sequencer`] would assign. A trace that
//! passes is exactly one the text format can express, so text ↔ binary round trips are exact.

use crate::event::{Event, Kind, LINE_BYTES, MAX_REGION_BYTES, SERVER_NODE};
use crate::trace::{PmRange, Sequencer, Trace};
use rustc_hash::FxHashMap;

/// The last 64 B line of the 64-bit address space. Its end, 2^64, is not a `u64`, so the line
/// arithmetic of the engine and the checker (an access's end, the next line) cannot name it; no
/// program address is there (x86-64 user space ends far below), so traces may not use it.
pub const LAST_LINE: u64 = !(LINE_BYTES - 1);

/// Why an address cannot appear in a trace (the last line of the address space), or `None`.
pub fn address_error(addr: u64) -> Option<String> {
    (addr >= LAST_LINE).then(|| {
        format!(
            "address {addr:#x} is in the last 64 B line of the address space, which pmsim does not model \
             (the line's end, 2^64, is not a 64-bit address)"
        )
    })
}

/// Why `pm BASE SIZE` is not a valid PM range, or `None`. A range is whole cache lines (a line
/// is persistent or not: every part of the engine, the checker and the analysis asks it of a
/// line or of an access in one line, which must agree), not empty, and below the last line.
pub fn pm_range_error(base: u64, size: u64) -> Option<String> {
    if size == 0 {
        return Some(format!("PM range {base:#x}+{size:#x} is empty"));
    }
    if base.checked_add(size).is_none_or(|end| end > LAST_LINE) {
        return Some(format!(
            "PM range {base:#x}+{size:#x} overflows the address space (it must end at or below {LAST_LINE:#x}, \
             where the last 64 B line begins)"
        ));
    }
    if !base.is_multiple_of(LINE_BYTES) || !size.is_multiple_of(LINE_BYTES) {
        return Some(format!(
            "PM range {base:#x}+{size:#x} is not whole 64 B lines: base and size must be multiples of 64 \
             (a cache line is persistent or not)"
        ));
    }
    None
}

/// Why an access is not a valid one (size, line crossing, the last line), or `None`.
pub fn access_error(addr: u64, size: u64) -> Option<String> {
    if let Some(e) = address_error(addr) {
        return Some(e);
    }
    if !(1..=LINE_BYTES).contains(&size) {
        return Some(format!("size {size} is not from 1 to 64"));
    }
    if (addr % LINE_BYTES) + size > LINE_BYTES {
        return Some(format!("access of {size} bytes at {addr:#x} crosses a 64 B line"));
    }
    None
}

/// Why a label name cannot appear in a text trace (where labels are single tokens), or `None`.
pub fn label_error(name: &str) -> Option<String> {
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '#') {
        Some(format!("label {name:?} is not a single token (no spaces or '#')"))
    } else {
        None
    }
}

/// Checks an `rdma_pwrite`'s target: the server node, and a region inside one of its PM ranges
/// (`pm` empty means the default range).
pub fn region_error(node: u64, addr: u64, len: u64, pm: &[PmRange]) -> Option<String> {
    if node != SERVER_NODE as u64 {
        return Some(format!(
            "rdma_pwrite to node {node}, which does not exist: node {SERVER_NODE} is the server (the simulated \
             machine) and client nodes hold no PM"
        ));
    }
    if len == 0 || len > MAX_REGION_BYTES {
        return Some(format!("rdma_pwrite size {len} is not from 1 to {MAX_REGION_BYTES}"));
    }
    let Some(end) = addr.checked_add(len).filter(|&end| end <= LAST_LINE) else {
        return Some(format!(
            "rdma_pwrite region at {addr:#x} overflows (or reaches the last line of the address space)"
        ));
    };
    let default = [crate::DEFAULT_PM];
    let pm = if pm.is_empty() { &default[..] } else { pm };
    if !pm.iter().any(|r| addr >= r.base && end <= r.base + r.size) {
        return Some(format!(
            "rdma_pwrite region [{addr:#x}, {end:#x}) is not inside one of the server's PM ranges ({})",
            pm.iter().map(|r| format!("[{:#x}, {:#x})", r.base, r.base + r.size)).collect::<Vec<_>>().join(", ")
        ));
    }
    None
}

/// Which side of remote persistence a thread is on, as far as its events so far tell: a thread
/// that issues `rdma_pwrite`/`rdma_wait` is a client (its own client node, docs/design.md §9); one
/// that touches memory or fences runs on the server. No thread may be both.
#[derive(Clone, Copy, Default)]
struct ThreadRole {
    client: bool,
    /// The thread's first local memory or fence event.
    local: Option<Kind>,
}

impl ThreadRole {
    fn note(&mut self, thread: usize, kind: Kind) -> Result<(), String> {
        if matches!(kind, Kind::Compute | Kind::Begin | Kind::End) {
            return Ok(());
        }
        if kind.is_remote() {
            self.client = true;
        } else {
            self.local.get_or_insert(kind);
        }
        match (self.client, self.local) {
            (true, Some(k)) => Err(format!(
                "T{thread} mixes remote persistence (rdma_pwrite/rdma_wait) with local '{}'; a client thread may \
                 contain only compute, begin, end, rdma_pwrite and rdma_wait",
                k.name()
            )),
            _ => Ok(()),
        }
    }
}

/// Checks events in global order; per-thread state (open operations) lives here.
#[derive(Default)]
pub struct Validator {
    /// Labels defined so far (ids `0..labels` are valid).
    pub labels: usize,
    /// The trace's PM ranges (empty: the default range), for `rdma_pwrite` regions.
    pub pm: Vec<PmRange>,
    /// Per thread: open `begin`s per label id.
    open: Vec<FxHashMap<u32, u32>>,
    roles: Vec<ThreadRole>,
    seq: Sequencer,
}

impl Validator {
    pub fn new(threads: usize) -> Validator {
        Validator {
            labels: 0,
            pm: Vec::new(),
            open: vec![FxHashMap::default(); threads],
            roles: vec![ThreadRole::default(); threads],
            seq: Sequencer::default(),
        }
    }

    /// The rules on one event of `thread` (its gid and sync ordinal aside).
    pub fn event(&mut self, thread: usize, ev: &Event) -> Result<(), String> {
        let name = ev.kind.name();
        let no_value = |what: &str| -> Result<(), String> {
            if ev.has_value {
                Err(format!("'{name}' {what} carries a value"))
            } else {
                Ok(())
            }
        };
        if let Some(role) = self.roles.get_mut(thread) {
            role.note(thread, ev.kind)?;
        }
        if !ev.kind.is_sync() && ev.kind != Kind::RdmaPwrite && ev.aux != 0 {
            return Err(format!("'{name}' carries a sync ordinal ({})", ev.aux));
        }
        match ev.kind {
            Kind::Compute => {
                no_value("")?;
                if ev.size != 0 {
                    return Err(format!("'compute' carries a size ({})", ev.size));
                }
            }
            Kind::Load | Kind::Acquire | Kind::Store | Kind::NtStore | Kind::Rmw | Kind::Release => {
                if let Some(e) = access_error(ev.addr, ev.size as u64) {
                    return Err(e);
                }
                if matches!(ev.kind, Kind::Load | Kind::Acquire) {
                    no_value("(a read)")?;
                }
            }
            Kind::Clwb | Kind::ClflushOpt | Kind::Clflush => {
                no_value("")?;
                if ev.size != 1 {
                    return Err(format!("'{name}' has size {} (a flush names one address: size 1)", ev.size));
                }
                if let Some(e) = address_error(ev.addr) {
                    return Err(e);
                }
            }
            Kind::RdmaPwrite => {
                no_value("")?;
                if ev.size != 0 {
                    return Err(format!("'rdma_pwrite' carries an access size ({}); its length is separate", ev.size));
                }
                if let Some(e) = region_error(ev.aux as u64, ev.addr, ev.data, &self.pm) {
                    return Err(e);
                }
            }
            Kind::Sfence | Kind::Mfence | Kind::Ofence | Kind::Dfence | Kind::Strand | Kind::RdmaWait => {
                no_value("")?;
                if ev.addr != 0 || ev.size != 0 {
                    return Err(format!("'{name}' carries an address or size"));
                }
            }
            Kind::Begin | Kind::End => {
                no_value("")?;
                if ev.size != 0 {
                    return Err(format!("'{name}' carries a size ({})", ev.size));
                }
                if ev.addr >= self.labels as u64 {
                    return Err(format!("'{name}' names label id {} but {} labels are defined", ev.addr, self.labels));
                }
                let id = ev.addr as u32;
                let open = self.open.get_mut(thread).ok_or_else(|| format!("thread {thread} out of range"))?;
                if ev.kind == Kind::Begin {
                    *open.entry(id).or_insert(0) += 1;
                } else {
                    match open.get_mut(&id) {
                        Some(n) if *n > 0 => *n -= 1,
                        _ => return Err(format!("'end' of label id {id} without a 'begin' of it on T{thread}")),
                    }
                }
            }
        }
        Ok(())
    }

    /// For formats that store gids and sync ordinals: `ev` must be the next event in global
    /// order (no gap, no duplicate) with the ordinal the sequencer assigns.
    pub fn order(&mut self, ev: &Event) -> Result<(), String> {
        let want = self.seq.next_gid();
        if ev.gid != want {
            return Err(if ev.gid < want {
                format!("event id {} repeats or goes back (expected {want})", ev.gid)
            } else {
                format!("event ids jump from {} to {} (missing events)", want.wrapping_sub(1), ev.gid)
            });
        }
        let mut stamped = *ev;
        self.seq.stamp(&mut stamped);
        if stamped.aux != ev.aux {
            return Err(format!(
                "event {}: '{}' at {:#x} has sync ordinal {}, its position in global order gives {}",
                ev.gid,
                ev.kind.name(),
                ev.addr,
                ev.aux,
                stamped.aux
            ));
        }
        Ok(())
    }
}

/// Checks a whole in-memory trace whose gids and ordinals came from a file.
pub fn check_trace(t: &Trace) -> Result<(), String> {
    let mut v = Validator::new(t.num_threads());
    v.labels = t.labels.len();
    v.pm = t.pm.clone();
    for (th, i) in t.global_order() {
        let ev = &t.threads[th as usize].events[i as usize];
        v.order(ev).and_then(|_| v.event(th as usize, ev)).map_err(|m| format!("T{th} event {}: {m}", ev.gid))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Hand-built binary files holding what the text format cannot say: both binary readers
    //! (in memory and streaming) must refuse each with the same rule the text reader applies.
    use crate::binary::{encode_fields, put_varint, MAGIC, TAG_BLOCK, TAG_END, TAG_LABEL, VERSION};
    use crate::{Event, Kind};

    struct Raw {
        threads: u32,
        labels: Vec<&'static str>,
        /// (thread, gid, event, value): each in its own block.
        events: Vec<(u32, u64, Event, Option<Vec<u8>>)>,
        end_total: Option<u64>,
        trailing: Vec<u8>,
    }

    fn encode(r: &Raw) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&r.threads.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&0x1_0000_0000u64.to_le_bytes());
        out.extend_from_slice(&(1u64 << 30).to_le_bytes());
        for (id, l) in r.labels.iter().enumerate() {
            out.push(TAG_LABEL);
            out.extend_from_slice(&(id as u32).to_le_bytes());
            out.extend_from_slice(&(l.len() as u32).to_le_bytes());
            out.extend_from_slice(l.as_bytes());
        }
        for (th, gid, ev, val) in &r.events {
            let mut p = Vec::new();
            put_varint(&mut p, *gid);
            p.push(ev.kind as u8 | if val.is_some() { 0x80 } else { 0 });
            encode_fields(&mut p, ev);
            if let Some(v) = val {
                p.extend_from_slice(v);
            }
            out.push(TAG_BLOCK);
            for x in [*th, 1, p.len() as u32, p.len() as u32] {
                out.extend_from_slice(&x.to_le_bytes());
            }
            out.extend_from_slice(&p);
        }
        out.push(TAG_END);
        out.extend_from_slice(&r.end_total.unwrap_or(r.events.len() as u64).to_le_bytes());
        out.extend_from_slice(&(r.labels.len() as u32).to_le_bytes());
        out.extend_from_slice(&r.trailing);
        out
    }

    fn store(addr: u64, size: u8) -> Event {
        Event::mem(Kind::Store, addr, size)
    }

    fn ok_raw() -> Raw {
        Raw {
            threads: 2,
            labels: vec!["op"],
            events: vec![
                (0, 0, Event { addr: 0, ..Event::new(Kind::Begin) }, None),
                (0, 1, store(0x1_0000_0000, 8), Some(vec![1; 8])),
                (1, 2, Event::new(Kind::Ofence), None),
                (0, 3, Event { addr: 0, ..Event::new(Kind::End) }, None),
            ],
            end_total: None,
            trailing: vec![],
        }
    }

    /// Both readers' verdicts on `bytes`: (in-memory, streaming).
    fn verdicts(bytes: &[u8]) -> (Result<(), String>, Result<(), String>) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mem = crate::binary::read("t.bin", std::io::Cursor::new(bytes)).map(|_| ()).map_err(|e| e.to_string());
        let path = std::env::temp_dir().join(format!(
            "pmsim-validate-{}-{}.bin",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::write(&path, bytes).unwrap();
        let streamed = crate::validate_binary(&path).map_err(|e| e.to_string());
        let _ = std::fs::remove_file(&path);
        (mem, streamed)
    }

    fn refused(r: Raw, mentions: &str) {
        let (mem, streamed) = verdicts(&encode(&r));
        for (which, v) in [("in-memory", mem), ("streaming", streamed)] {
            let e = v.expect_err(which);
            assert!(e.contains(mentions), "{which}: {e} (wanted '{mentions}')");
        }
    }

    #[test]
    fn block_lengths_are_checked_before_the_block_is_read() {
        // ok_raw's first block: header 36 B, its label record 11 B, then tag, thread, count,
        // raw length (byte 56), stored length (byte 60).
        let good = encode(&ok_raw());
        assert_eq!(good[47], TAG_BLOCK);
        let mut raw = good.clone();
        raw[56] ^= 1;
        let mut huge = good.clone();
        huge[60..64].copy_from_slice(&u32::MAX.to_le_bytes());
        for (bytes, mentions) in [(raw, "raw length"), (huge, "larger than this format allows")] {
            let (mem, streamed) = verdicts(&bytes);
            for (which, v) in [("in-memory", mem), ("streaming", streamed)] {
                let e = v.expect_err(which);
                assert!(e.contains(mentions) && e.contains("byte 6"), "{which}: {e}");
            }
        }
    }

    #[test]
    fn a_dead_writers_file_is_cut_at_its_first_missing_event() {
        // T1's event 2 never reached the file (its buffer died with the program): the readers
        // refuse the gap; the repair keeps the events before it and reads as a valid trace.
        let mut r = ok_raw();
        r.events.push((1, 4, Event { aux: 0, ..Event::mem(Kind::Release, 0x2000, 8) }, None));
        r.events.remove(2);
        r.end_total = Some(4);
        let bytes = encode(&r);
        let (mem, _) = verdicts(&bytes);
        assert!(mem.unwrap_err().contains("missing events"));
        let path = std::env::temp_dir().join(format!("pmsim-gap-{}.bin", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let (t, dropped) = crate::binary::read_to_first_gap(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(dropped, 2);
        let kept: Vec<(usize, u64)> =
            (0..2).flat_map(|th| t.threads[th].events.iter().map(move |e| (th, e.gid))).collect();
        assert_eq!(kept, vec![(0, 0), (0, 1)]);
        // Without a gap nothing is dropped.
        let path = std::env::temp_dir().join(format!("pmsim-nogap-{}.bin", std::process::id()));
        std::fs::write(&path, encode(&ok_raw())).unwrap();
        let (t, dropped) = crate::binary::read_to_first_gap(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!((dropped, t.threads[0].events.len() + t.threads[1].events.len()), (0, 4));
    }

    #[test]
    fn a_valid_file_passes_both_readers() {
        let (mem, streamed) = verdicts(&encode(&ok_raw()));
        mem.unwrap();
        streamed.unwrap();
    }

    #[test]
    fn binary_access_crossing_a_line_is_refused() {
        let mut r = ok_raw();
        r.events[1] = (0, 1, store(0x1_0000_0038, 16), Some(vec![2; 16]));
        refused(r, "crosses a 64 B line");
    }

    #[test]
    fn binary_label_id_out_of_range_is_refused() {
        let mut r = ok_raw();
        r.events[0].2.addr = 7;
        refused(r, "label id 7");
    }

    #[test]
    fn binary_wrong_end_count_is_refused() {
        let mut r = ok_raw();
        r.end_total = Some(9);
        refused(r, "END says 9 events");
    }

    #[test]
    fn binary_duplicate_ids_are_refused() {
        let mut r = ok_raw();
        r.events[2].1 = 1;
        refused(r, "repeats");
    }

    #[test]
    fn binary_garbage_after_end_is_refused() {
        let mut r = ok_raw();
        r.trailing = b"junk".to_vec();
        refused(r, "data after the END record");
    }

    #[test]
    fn end_without_begin_is_refused_in_both_formats() {
        let mut r = ok_raw();
        r.events.remove(0);
        for (i, e) in r.events.iter_mut().enumerate() {
            e.1 = i as u64;
        }
        refused(r, "without a 'begin'");
        let e = crate::text::parse_str("t.trace", "# pmsim trace v1\nthreads 1\nT0 end op\n").unwrap_err();
        assert!(e.to_string().starts_with("t.trace:3: 'end' of label 'op' without a 'begin'"), "{e}");
    }

    #[test]
    fn binary_wrong_sync_ordinal_is_refused() {
        let mut r = ok_raw();
        let mut acq = Event::mem(Kind::Acquire, 0x2000, 8);
        acq.aux = 3;
        r.events.push((1, 4, acq, None));
        refused(r, "sync ordinal 3");
    }
}
