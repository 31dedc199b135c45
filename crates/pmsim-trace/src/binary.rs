//! The binary trace format: compact, versioned, streamed, optionally LZ4-compressed.
//!
//! Why this layout: a trace larger than memory must replay. Events are written in global order
//! but buffered per thread and emitted as self-contained *blocks* of one thread's events, so a
//! replaying core opens its own cursor on the file and skips other threads' blocks without
//! decoding them. The full layout is documented in `docs/binary-trace.md`; summary:
//!
//! ```text
//! header:  "PMSIMTRB" | version u16 | flags u16 (bit0 = LZ4 blocks) | threads u32 | npm u32
//!          | npm × (base u64, size u64)                                  (all little-endian)
//! records: 0x01 BLOCK  thread u32 | count u32 | raw_len u32 | stored_len u32 | payload
//!          0x02 LABEL  id u32 | len u32 | utf-8 name      (always before its first use)
//!          0x00 END    total_events u64 | total_labels u32   (missing END = truncated file)
//! payload: count × event: varint gid delta | kind u8 (bit7 = has value) | fields by kind
//! ```

use crate::event::{Event, Kind};
use crate::trace::{EventSink, Sequencer, Trace};
use crate::{PmRange, TraceError};
use std::io::{Read, Seek, SeekFrom, Write};

pub const MAGIC: &[u8; 8] = b"PMSIMTRB";
/// Version 2: an acquire's `aux` counts the releasing events before it, not every sync event.
/// Kinds 17 (`rdma_pwrite`) and 18 (`rdma_wait`) were added within version 2: additive, so every
/// earlier version-2 file reads unchanged (see `docs/binary-trace.md`).
pub const VERSION: u16 = 2;
pub const FLAG_LZ4: u16 = 1;
pub(crate) const TAG_END: u8 = 0;
pub(crate) const TAG_BLOCK: u8 = 1;
pub(crate) const TAG_LABEL: u8 = 2;
/// Provenance and status text (`key=value` lines), e.g. from the tracer; see [`crate::meta`].
pub(crate) const TAG_META: u8 = 3;
/// PM ranges a header holds at most.
pub const MAX_PM_RANGES: usize = 1024;
/// Bytes of a label's name at most (1 MiB).
pub const MAX_LABEL_BYTES: usize = 1 << 20;
/// Raw payload bytes per block before it is emitted.
const BLOCK_BYTES: usize = 64 * 1024;

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift >= 64 {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
    }
}

/// The decoded file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    pub flags: u16,
    pub threads: usize,
    pub pm: Vec<PmRange>,
    /// Byte offset of the first record.
    pub records_at: u64,
}

/// Streaming writer. Events arrive in global order through [`EventSink`].
pub struct Writer<W: Write> {
    out: W,
    compress: bool,
    seq: Sequencer,
    pending: Vec<(Vec<u8>, u32, u64)>, // per thread: raw payload, count, previous gid
    pm: Vec<PmRange>,
    header_written: bool,
    threads: usize,
    labels: rustc_hash::FxHashMap<String, u32>,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W, compress: bool) -> Writer<W> {
        Writer {
            out,
            compress,
            seq: Sequencer::default(),
            pending: Vec::new(),
            pm: Vec::new(),
            header_written: false,
            threads: 0,
            labels: Default::default(),
        }
    }

    fn ensure_header(&mut self) -> std::io::Result<()> {
        if self.header_written {
            return Ok(());
        }
        if self.pm.is_empty() {
            self.pm.push(crate::DEFAULT_PM);
        }
        self.out.write_all(MAGIC)?;
        self.out.write_all(&VERSION.to_le_bytes())?;
        let flags = if self.compress { FLAG_LZ4 } else { 0 };
        self.out.write_all(&flags.to_le_bytes())?;
        self.out.write_all(&(self.threads as u32).to_le_bytes())?;
        self.out.write_all(&(self.pm.len() as u32).to_le_bytes())?;
        for r in &self.pm {
            self.out.write_all(&r.base.to_le_bytes())?;
            self.out.write_all(&r.size.to_le_bytes())?;
        }
        self.header_written = true;
        Ok(())
    }

    fn flush_block(&mut self, thread: usize) -> std::io::Result<()> {
        let (raw, count, _) = &mut self.pending[thread];
        if *count == 0 {
            return Ok(());
        }
        let stored: Vec<u8> = if self.compress { lz4_flex::compress(raw) } else { std::mem::take(raw) };
        let raw_len = if self.compress { raw.len() } else { stored.len() };
        self.out.write_all(&[TAG_BLOCK])?;
        self.out.write_all(&(thread as u32).to_le_bytes())?;
        self.out.write_all(&count.to_le_bytes())?;
        self.out.write_all(&(raw_len as u32).to_le_bytes())?;
        self.out.write_all(&(stored.len() as u32).to_le_bytes())?;
        self.out.write_all(&stored)?;
        raw.clear();
        *count = 0;
        Ok(())
    }

    /// Writes one META record: `key=value` lines (docs/binary-trace.md); nothing if empty.
    pub fn meta(&mut self, text: &str) -> std::io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.ensure_header()?;
        self.out.write_all(&[TAG_META])?;
        self.out.write_all(&(text.len() as u32).to_le_bytes())?;
        self.out.write_all(text.as_bytes())
    }

    /// Flushes every pending block and writes the END record. Without it the file reads as
    /// truncated.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.ensure_header()?;
        for t in 0..self.pending.len() {
            self.flush_block(t)?;
        }
        self.out.write_all(&[TAG_END])?;
        self.out.write_all(&self.seq.next_gid().to_le_bytes())?;
        self.out.write_all(&(self.labels.len() as u32).to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> EventSink for Writer<W> {
    fn set_threads(&mut self, n: usize) -> std::io::Result<()> {
        self.threads = n;
        self.pending = vec![(Vec::new(), 0, 0); n];
        Ok(())
    }
    fn add_pm_range(&mut self, base: u64, size: u64) -> std::io::Result<()> {
        if self.pm.len() == MAX_PM_RANGES {
            let msg = format!("more than {MAX_PM_RANGES} PM ranges");
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, msg));
        }
        self.pm.push(PmRange { base, size });
        Ok(())
    }
    fn label(&mut self, name: &str) -> std::io::Result<u32> {
        if let Some(&id) = self.labels.get(name) {
            return Ok(id);
        }
        self.ensure_header()?;
        let id = self.labels.len() as u32;
        self.labels.insert(name.to_string(), id);
        self.out.write_all(&[TAG_LABEL])?;
        self.out.write_all(&id.to_le_bytes())?;
        self.out.write_all(&(name.len() as u32).to_le_bytes())?;
        self.out.write_all(name.as_bytes())?;
        Ok(id)
    }
    fn push(&mut self, thread: usize, mut ev: Event, value: Option<&[u8]>) -> std::io::Result<u64> {
        self.ensure_header()?;
        self.seq.stamp(&mut ev);
        let (raw, count, prev) = &mut self.pending[thread];
        // First event of a block stores its absolute gid so blocks decode independently.
        let delta = if *count == 0 { ev.gid } else { ev.gid - *prev - 1 };
        *prev = ev.gid;
        put_varint(raw, delta);
        let has_value = value.is_some() || ev.has_value;
        raw.push(ev.kind as u8 | if has_value { 0x80 } else { 0 });
        encode_fields(raw, &ev);
        if let Some(v) = value {
            raw.extend_from_slice(v);
        } else if ev.has_value {
            // Inline value already in ev.data (only possible for size <= 8 from in-memory traces).
            raw.extend_from_slice(&ev.data.to_le_bytes()[..ev.size as usize]);
        }
        *count += 1;
        if raw.len() >= BLOCK_BYTES {
            self.flush_block(thread)?;
        }
        Ok(ev.gid)
    }
    fn num_threads(&self) -> usize {
        self.threads
    }
    fn num_events(&self) -> u64 {
        self.seq.next_gid()
    }
}

pub(crate) fn encode_fields(raw: &mut Vec<u8>, ev: &Event) {
    match ev.kind {
        Kind::Compute | Kind::Begin | Kind::End => put_varint(raw, ev.addr),
        Kind::Sfence | Kind::Mfence | Kind::Ofence | Kind::Dfence | Kind::Strand | Kind::RdmaWait => {}
        Kind::RdmaPwrite => {
            put_varint(raw, ev.addr);
            put_varint(raw, ev.data);
            put_varint(raw, ev.aux as u64);
        }
        _ => {
            put_varint(raw, ev.addr);
            raw.push(ev.size);
            if ev.kind.is_sync() {
                put_varint(raw, ev.aux as u64);
            }
        }
    }
}

/// Writes an in-memory trace in binary form.
pub fn write<W: Write>(out: W, t: &Trace, compress: bool) -> std::io::Result<W> {
    write_with_meta(out, t, compress, "")
}

/// [`write`], with a META record of `meta` (`key=value` lines) before END.
pub fn write_with_meta<W: Write>(out: W, t: &Trace, compress: bool, meta: &str) -> std::io::Result<W> {
    let mut w = Writer::new(out, compress);
    w.set_threads(t.num_threads())?;
    for r in &t.pm {
        w.add_pm_range(r.base, r.size)?;
    }
    let mut buf = [0u8; 64];
    for (th, i) in t.global_order() {
        let s = &t.threads[th as usize];
        let ev = s.events[i as usize];
        if matches!(ev.kind, Kind::Begin | Kind::End) {
            // Labels are re-interned in first-use order, so ids may be renumbered; names survive.
            let name = &t.labels[ev.addr as usize];
            let id = w.label(name)?;
            w.push(th as usize, Event { addr: id as u64, ..ev }, None)?;
            continue;
        }
        let v = s.value(&ev, &mut buf).map(|v| v.to_vec());
        w.push(th as usize, Event { has_value: false, ..ev }, v.as_deref())?;
    }
    w.meta(meta)?;
    w.finish()
}

/// Reads the header of a binary trace.
pub fn read_header<R: Read>(file: &str, r: &mut R) -> Result<Header, TraceError> {
    let bad = |m: &str| TraceError::new(file, 0, m.to_string());
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic).map_err(|_| bad("not a pmsim binary trace (too short)"))?;
    if &magic != MAGIC {
        return Err(bad("not a pmsim binary trace (bad magic)"));
    }
    let mut b2 = [0u8; 2];
    let mut b4 = [0u8; 4];
    let mut b8 = [0u8; 8];
    r.read_exact(&mut b2).map_err(|_| bad("truncated header"))?;
    let version = u16::from_le_bytes(b2);
    if version != VERSION {
        return Err(bad(&format!("binary trace version {version}, this pmsim reads version {VERSION}")));
    }
    r.read_exact(&mut b2).map_err(|_| bad("truncated header"))?;
    let flags = u16::from_le_bytes(b2);
    r.read_exact(&mut b4).map_err(|_| bad("truncated header"))?;
    let threads = u32::from_le_bytes(b4) as usize;
    if threads == 0 || threads > 4096 {
        return Err(bad(&format!("thread count {threads} is not from 1 to 4096")));
    }
    r.read_exact(&mut b4).map_err(|_| bad("truncated header"))?;
    let npm = u32::from_le_bytes(b4) as usize;
    if npm == 0 || npm > MAX_PM_RANGES {
        return Err(bad(&format!("PM range count {npm} is not from 1 to {MAX_PM_RANGES}")));
    }
    let mut pm = Vec::with_capacity(npm);
    for _ in 0..npm {
        r.read_exact(&mut b8).map_err(|_| bad("truncated header"))?;
        let base = u64::from_le_bytes(b8);
        r.read_exact(&mut b8).map_err(|_| bad("truncated header"))?;
        let size = u64::from_le_bytes(b8);
        // The rules of the text format's `pm BASE SIZE` line.
        if let Some(e) = crate::validate::pm_range_error(base, size) {
            return Err(bad(&e));
        }
        pm.push(PmRange { base, size });
    }
    Ok(Header { version, flags, threads, pm, records_at: 20 + 16 * npm as u64 })
}

/// One record as seen by a cursor.
pub(crate) enum Record {
    Block { thread: usize, count: u32, payload: Vec<u8> },
    Label { id: u32, name: String },
    End { total_events: u64, total_labels: u32 },
}

/// A cursor over the records of a binary trace; `want` filters the blocks it decodes (others are
/// skipped with a seek).
pub(crate) struct Cursor<R: Read + Seek> {
    pub file: String,
    pub r: R,
    pub header: Header,
    pub offset: u64,
    /// The stream's length: a skipped block must end within it (a seek past the end succeeds,
    /// and the error would name a byte the file does not have).
    len: u64,
    /// META records passed so far (their text), in file order.
    pub meta: Vec<String>,
}

impl<R: Read + Seek> Cursor<R> {
    pub fn open(file: &str, mut r: R) -> Result<Cursor<R>, TraceError> {
        let header = read_header(file, &mut r)?;
        let offset = header.records_at;
        let io = |e: std::io::Error| TraceError::new(file, 0, format!("cannot read: {e}"));
        let len = r.seek(SeekFrom::End(0)).map_err(io)?;
        r.seek(SeekFrom::Start(offset)).map_err(io)?;
        Ok(Cursor { file: file.to_string(), r, header, offset, len, meta: Vec::new() })
    }

    fn bad(&self, m: &str) -> TraceError {
        TraceError::new(&self.file, 0, format!("at byte {}: {m}", self.offset))
    }

    fn read_u32(&mut self) -> Result<u32, TraceError> {
        let mut b = [0u8; 4];
        self.r.read_exact(&mut b).map_err(|_| self.bad("truncated file (no END record)"))?;
        self.offset += 4;
        Ok(u32::from_le_bytes(b))
    }

    /// The next record, decoding blocks only for threads where `want(thread)`.
    pub fn next(&mut self, want: &dyn Fn(usize) -> bool) -> Result<Option<Record>, TraceError> {
        loop {
            let mut tag = [0u8; 1];
            self.r.read_exact(&mut tag).map_err(|_| self.bad("truncated file (no END record)"))?;
            self.offset += 1;
            match tag[0] {
                TAG_END => {
                    let mut b8 = [0u8; 8];
                    self.r.read_exact(&mut b8).map_err(|_| self.bad("truncated END record"))?;
                    self.offset += 8;
                    let total_labels = self.read_u32()?;
                    // Nothing may follow END: a file with more is not one pmsim wrote.
                    if self.r.read(&mut tag).map_err(|e| self.bad(&format!("cannot read: {e}")))? != 0 {
                        return Err(self.bad("data after the END record"));
                    }
                    return Ok(Some(Record::End { total_events: u64::from_le_bytes(b8), total_labels }));
                }
                TAG_LABEL => {
                    let id = self.read_u32()?;
                    let len = self.read_u32()? as usize;
                    if len > MAX_LABEL_BYTES {
                        return Err(self.bad("label longer than 1 MiB"));
                    }
                    let mut name = vec![0u8; len];
                    self.r.read_exact(&mut name).map_err(|_| self.bad("truncated label"))?;
                    self.offset += len as u64;
                    let name = String::from_utf8(name).map_err(|_| self.bad("label is not UTF-8"))?;
                    return Ok(Some(Record::Label { id, name }));
                }
                TAG_META => {
                    let len = self.read_u32()? as usize;
                    if len > 1 << 20 {
                        return Err(self.bad("META record longer than 1 MiB"));
                    }
                    let mut text = vec![0u8; len];
                    self.r.read_exact(&mut text).map_err(|_| self.bad("truncated META record"))?;
                    self.offset += len as u64;
                    self.meta.push(String::from_utf8(text).map_err(|_| self.bad("META record is not UTF-8"))?);
                }
                TAG_BLOCK => {
                    let thread = self.read_u32()? as usize;
                    let count = self.read_u32()?;
                    let raw_len = self.read_u32()? as usize;
                    let stored_len = self.read_u32()? as usize;
                    if thread >= self.header.threads {
                        return Err(self.bad(&format!("block for thread {thread} of {}", self.header.threads)));
                    }
                    if stored_len > 64 << 20 || raw_len > 256 << 20 {
                        return Err(self.bad("block larger than this format allows"));
                    }
                    let lz4 = self.header.flags & FLAG_LZ4 != 0;
                    if !lz4 && raw_len != stored_len {
                        return Err(self.bad(&format!(
                            "uncompressed block with raw length {raw_len} but stored length {stored_len}"
                        )));
                    }
                    if !want(thread) {
                        if self.offset + stored_len as u64 > self.len {
                            return Err(self.bad("truncated block"));
                        }
                        self.r.seek(SeekFrom::Current(stored_len as i64)).map_err(|_| self.bad("truncated block"))?;
                        self.offset += stored_len as u64;
                        continue;
                    }
                    let mut stored = vec![0u8; stored_len];
                    self.r.read_exact(&mut stored).map_err(|_| self.bad("truncated block"))?;
                    self.offset += stored_len as u64;
                    let payload = if lz4 {
                        let p = lz4_flex::decompress(&stored, raw_len)
                            .map_err(|e| self.bad(&format!("corrupt block: {e}")))?;
                        if p.len() != raw_len {
                            let msg = format!("corrupt block: {} bytes decompressed, raw length {raw_len}", p.len());
                            return Err(self.bad(&msg));
                        }
                        p
                    } else {
                        stored
                    };
                    return Ok(Some(Record::Block { thread, count, payload }));
                }
                t => return Err(self.bad(&format!("unknown record tag {t:#x}"))),
            }
        }
    }
}

/// Decodes one block's payload, appending events to `events` and long values to `bytes`.
pub(crate) fn decode_block(
    payload: &[u8],
    count: u32,
    events: &mut Vec<Event>,
    bytes: &mut Vec<u8>,
) -> Result<(), String> {
    let mut pos = 0usize;
    let mut prev: Option<u64> = None;
    for _ in 0..count {
        let d = get_varint(payload, &mut pos).ok_or("truncated event")?;
        let gid = match prev {
            None => d,
            Some(p) => p.checked_add(1).and_then(|x| x.checked_add(d)).ok_or("event id overflows")?,
        };
        prev = Some(gid);
        let kb = *payload.get(pos).ok_or("truncated event")?;
        pos += 1;
        let kind = Kind::from_u8(kb & 0x7f).ok_or_else(|| format!("unknown event kind {}", kb & 0x7f))?;
        let mut ev = Event { gid, ..Event::new(kind) };
        match kind {
            Kind::Compute | Kind::Begin | Kind::End => {
                ev.addr = get_varint(payload, &mut pos).ok_or("truncated event")?
            }
            Kind::Sfence | Kind::Mfence | Kind::Ofence | Kind::Dfence | Kind::Strand | Kind::RdmaWait => {}
            Kind::RdmaPwrite => {
                ev.addr = get_varint(payload, &mut pos).ok_or("truncated event")?;
                ev.data = get_varint(payload, &mut pos).ok_or("truncated event")?;
                let node = get_varint(payload, &mut pos).ok_or("truncated event")?;
                // Node and region are checked by the shared validator, like the text reader's.
                ev.aux = u32::try_from(node).map_err(|_| format!("rdma_pwrite node {node} out of range"))?;
                if kb & 0x80 != 0 {
                    return Err("rdma_pwrite carries no value".into());
                }
            }
            _ => {
                ev.addr = get_varint(payload, &mut pos).ok_or("truncated event")?;
                ev.size = *payload.get(pos).ok_or("truncated event")?;
                pos += 1;
                if ev.size == 0 || ev.size > 64 {
                    return Err(format!("event size {} not from 1 to 64", ev.size));
                }
                if kind.is_sync() {
                    ev.aux = get_varint(payload, &mut pos).ok_or("truncated event")? as u32;
                }
            }
        }
        if kb & 0x80 != 0 {
            let n = ev.size as usize;
            let v = payload.get(pos..pos + n).ok_or("truncated value")?;
            pos += n;
            ev.has_value = true;
            if n <= 8 {
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(v);
                ev.data = u64::from_le_bytes(b);
            } else {
                ev.data = bytes.len() as u64;
                bytes.extend_from_slice(v);
            }
        }
        events.push(ev);
    }
    if pos != payload.len() {
        return Err("block has trailing bytes".into());
    }
    Ok(())
}

/// Reads a whole binary trace into memory.
pub fn read<R: Read + Seek>(file: &str, r: R) -> Result<Trace, TraceError> {
    let mut c = Cursor::open(file, r)?;
    let mut threads = vec![crate::ThreadStream::default(); c.header.threads];
    let mut labels: Vec<String> = Vec::new();
    loop {
        let at = c.offset;
        match c.next(&|_| true)? {
            Some(Record::Block { thread, count, payload }) => {
                let s = &mut threads[thread];
                decode_block(&payload, count, &mut s.events, &mut s.bytes)
                    .map_err(|m| TraceError::new(file, 0, format!("block at byte {at}: {m}")))?;
            }
            Some(Record::Label { id, name }) => {
                if id as usize != labels.len() {
                    return Err(TraceError::new(file, 0, format!("label at byte {at} out of order")));
                }
                if let Some(e) = crate::validate::label_error(&name) {
                    return Err(TraceError::new(file, 0, format!("label at byte {at}: {e}")));
                }
                if labels.contains(&name) {
                    return Err(TraceError::new(file, 0, format!("label at byte {at}: '{name}' defined twice")));
                }
                labels.push(name);
            }
            Some(Record::End { total_events, total_labels }) => {
                let n: usize = threads.iter().map(|t| t.events.len()).sum();
                if n as u64 != total_events {
                    return Err(TraceError::new(file, 0, format!("END says {total_events} events, blocks hold {n}")));
                }
                if total_labels as usize != labels.len() {
                    return Err(TraceError::new(
                        file,
                        0,
                        format!("END says {total_labels} labels, the file defines {}", labels.len()),
                    ));
                }
                break;
            }
            None => break,
        }
    }
    let meta = crate::meta::pairs_of_records(&c.meta);
    let t = Trace { pm: c.header.pm.clone(), labels, threads, meta };
    crate::validate::check_trace(&t).map_err(|m| TraceError::new(file, 0, m))?;
    Ok(t)
}

/// Reads what a writer that died left (`pmsim trace record` repairs a killed program's trace
/// with it): every whole block, cut at the first event id no thread holds. Each thread's events
/// up to its last written block are there, but an id a thread took and never wrote (its buffer
/// died with the process) leaves a gap; the events before the first gap are a prefix of the
/// global order, which is a valid trace (sync ordinals count in that order too). Returns the
/// trace and how many events after the gap were dropped.
pub fn read_to_first_gap(path: &std::path::Path) -> Result<(Trace, u64), TraceError> {
    let file = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(&file, e))?;
    let mut c = Cursor::open(&file, std::io::BufReader::new(f))?;
    let mut threads = vec![crate::ThreadStream::default(); c.header.threads];
    let mut labels: Vec<String> = Vec::new();
    loop {
        let at = c.offset;
        match c.next(&|_| true)? {
            Some(Record::Block { thread, count, payload }) => {
                let s = &mut threads[thread];
                decode_block(&payload, count, &mut s.events, &mut s.bytes)
                    .map_err(|m| TraceError::new(&file, 0, format!("block at byte {at}: {m}")))?;
            }
            Some(Record::Label { name, .. }) => labels.push(name),
            Some(Record::End { .. }) | None => break,
        }
    }
    let mut gids: Vec<u64> = threads.iter().flat_map(|t| t.events.iter().map(|e| e.gid)).collect();
    gids.sort_unstable();
    let cut = gids.iter().enumerate().find(|&(i, &g)| g != i as u64).map_or(gids.len(), |(i, _)| i) as u64;
    for t in &mut threads {
        let keep = t.events.partition_point(|e| e.gid < cut);
        t.events.truncate(keep);
    }
    let meta = crate::meta::pairs_of_records(&c.meta);
    let t = Trace { pm: c.header.pm.clone(), labels, threads, meta };
    crate::validate::check_trace(&t).map_err(|m| TraceError::new(&file, 0, m))?;
    Ok((t, gids.len() as u64 - cut))
}

/// The streaming [`read_to_first_gap`], for `pmsim trace record`'s repair of a killed program's
/// trace (which may be larger than memory): how many events come before the first event id no
/// block holds (`kept`), and how many the blocks hold in all (`total`; `kept == total` when none
/// is missing). Memory is a bit per event plus a decoded block per thread, never the trace. The
/// prefix is checked as [`read_to_first_gap`] checks its trace (ids, sync ordinals, events,
/// label ids): here when nothing is missing, else by [`write_to_first_gap`] as it writes it.
pub fn first_gap(path: &std::path::Path) -> Result<(u64, u64), TraceError> {
    let file = path.display().to_string();
    let open = || -> Result<Cursor<std::io::BufReader<std::fs::File>>, TraceError> {
        let f = std::fs::File::open(path).map_err(|e| TraceError::io(&file, e))?;
        Cursor::open(&file, std::io::BufReader::with_capacity(256 * 1024, f))
    };
    // The events the blocks hold: the first missing id is at most that, which sizes the bitmap.
    let mut c = open()?;
    let mut total = 0u64;
    while let Some(r) = c.next(&|_| true)? {
        match r {
            Record::Block { count, .. } => total += count as u64,
            Record::End { .. } => break,
            Record::Label { .. } => {}
        }
    }
    // A bit per event id below `total`: the first clear one is the cut.
    let words = usize::try_from(total.div_ceil(64)).map_err(|_| TraceError::new(&file, 0, "too many events"))?;
    let mut seen = vec![0u64; words];
    let mut c = open()?;
    let (mut events, mut bytes) = (Vec::new(), Vec::new());
    loop {
        let at = c.offset;
        match c.next(&|_| true)? {
            Some(Record::Block { count, payload, .. }) => {
                events.clear();
                bytes.clear();
                decode_block(&payload, count, &mut events, &mut bytes)
                    .map_err(|m| TraceError::new(&file, 0, format!("block at byte {at}: {m}")))?;
                for e in events.iter().filter(|e| e.gid < total) {
                    seen[(e.gid / 64) as usize] |= 1 << (e.gid % 64);
                }
            }
            Some(Record::Label { .. }) => {}
            Some(Record::End { .. }) | None => break,
        }
    }
    let kept = match seen.iter().position(|&w| w != u64::MAX) {
        Some(i) => (i as u64 * 64 + seen[i].trailing_ones() as u64).min(total),
        None => total,
    };
    drop(seen);
    if kept == total {
        stream_prefix::<std::io::Sink>(path, kept, None, "")?;
    }
    Ok((kept, total))
}

/// Writes the events of the binary trace `path` before event id `kept` (from [`first_gap`]) to
/// `out` as an uncompressed binary trace, as [`write`] writes [`read_to_first_gap`]'s trace
/// (labels renumbered in first-use order; META is not carried), streaming. A failed write is an
/// error naming `out_name`.
pub fn write_to_first_gap<W: Write>(
    path: &std::path::Path,
    kept: u64,
    out: W,
    out_name: &str,
) -> Result<W, TraceError> {
    let mut w = Writer::new(out, false);
    stream_prefix(path, kept, Some(&mut w), out_name)?;
    w.finish().map_err(|e| TraceError::new(out_name, 0, e.to_string()))
}

/// Streams the events before id `kept` in global order (a cursor and a decoded block per
/// thread), checks each as [`crate::validate::check_trace`] does, and pushes them to `w`, if
/// given (its errors name `out_name`).
fn stream_prefix<W: Write>(
    path: &std::path::Path,
    kept: u64,
    mut w: Option<&mut Writer<W>>,
    out_name: &str,
) -> Result<(), TraceError> {
    use crate::source::BinarySource;
    let file = path.display().to_string();
    let wrote = |e: std::io::Error| TraceError::new(out_name, 0, e.to_string());
    let (labels, _) = BinarySource::scan(path)?;
    let first = BinarySource::open(path, 0)?;
    let header = first.header().clone();
    let mut v = crate::validate::Validator::new(header.threads);
    v.labels = labels.len();
    v.pm = header.pm.clone();
    if let Some(w) = w.as_deref_mut() {
        w.set_threads(header.threads).map_err(wrote)?;
        for r in &header.pm {
            w.add_pm_range(r.base, r.size).map_err(wrote)?;
        }
    }
    let lane = crate::ordered::Lane::new;
    let mut lanes = Vec::with_capacity(header.threads);
    lanes.push(lane(first));
    for t in 1..header.threads {
        lanes.push(lane(BinarySource::open(path, t)?));
    }
    let mut buf = [0u8; 64];
    let mut last = 0usize;
    for gid in 0..kept {
        // The lane whose next event is `gid`, else the one with the smallest next event (which
        // the order check refuses, naming the ids).
        let t = if lanes[last].head_gid()? == Some(gid) {
            last
        } else {
            let mut best: Option<(u64, usize)> = None;
            for (t, l) in lanes.iter_mut().enumerate() {
                if let Some(g) = l.head_gid()? {
                    if best.is_none_or(|(b, _)| g < b) {
                        best = Some((g, t));
                    }
                    if g == gid {
                        break;
                    }
                }
            }
            let Some((_, t)) = best else {
                return Err(TraceError::new(&file, 0, format!("no block holds event {gid}")));
            };
            t
        };
        let l = &mut lanes[t];
        let ev = l.chunk.events[l.pos];
        l.pos += 1;
        last = t;
        v.order(&ev)
            .and_then(|_| v.event(t, &ev))
            .map_err(|m| TraceError::new(&file, 0, format!("T{t} event {}: {m}", ev.gid)))?;
        let Some(w) = w.as_deref_mut() else { continue };
        if matches!(ev.kind, Kind::Begin | Kind::End) {
            // Labels are re-interned in first-use order, as `write` does.
            let id = w.label(&labels[ev.addr as usize]).map_err(wrote)?;
            w.push(t, Event { addr: id as u64, ..ev }, None).map_err(wrote)?;
        } else {
            w.push(t, Event { has_value: false, ..ev }, l.chunk.value(&ev, &mut buf)).map_err(wrote)?;
        }
    }
    Ok(())
}

/// Reads a binary trace from a path.
pub fn read_path(path: &std::path::Path) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    read(&name, std::io::BufReader::new(f))
}

/// Is this file a binary trace (by its magic)?
pub fn is_binary(path: &std::path::Path) -> bool {
    let mut m = [0u8; 8];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut m)).is_ok() && &m == MAGIC
}

/// Reads either format, deciding by content. A pipe or device (`/dev/stdin`) can be read only
/// once: its first bytes decide; a binary trace is then read whole (its reader seeks), a text
/// one streamed, and anything else refused at once rather than after reading it all (a
/// `/dev/zero` never ends).
pub fn read_any(path: &std::path::Path) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    let regular = std::fs::metadata(path).map_err(|e| TraceError::io(&name, e))?.is_file();
    if !regular {
        const TEXT_HEADER: &[u8] = b"# pmsim trace v1";
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        let mut f = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
        let mut head = Vec::with_capacity(BOM.len() + TEXT_HEADER.len());
        (&mut f)
            .take((BOM.len() + TEXT_HEADER.len()) as u64)
            .read_to_end(&mut head)
            .map_err(|e| TraceError::io(&name, e))?;
        if head.starts_with(MAGIC) {
            f.read_to_end(&mut head).map_err(|e| TraceError::io(&name, e))?;
            return read(&name, std::io::Cursor::new(head));
        }
        let text = head.strip_prefix(BOM).unwrap_or(&head);
        let n = text.len().min(TEXT_HEADER.len());
        if text[..n] != TEXT_HEADER[..n] {
            // Not a trace: the text reader names what the first line must be, from these bytes.
            return crate::text::read(&name, std::io::Cursor::new(head));
        }
        return crate::text::read(&name, std::io::BufReader::new(std::io::Cursor::new(head).chain(f)));
    }
    if is_binary(path) {
        read_path(path)
    } else {
        crate::text::read_path(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceBuilder;

    fn sample() -> Trace {
        let mut b = TraceBuilder::new(4);
        b.add_pm_range(0x1_0000_0000, 1 << 30);
        let l = b.label("op");
        for i in 0..5000u64 {
            // Thread 3 is a remote-persistence client: regions of many lengths, and waits.
            if i % 50 == 0 {
                b.push(3, Event::rdma_pwrite(0, 0x1_0000_0000 + i * 4096, 1 + i * 37), None);
                if i % 500 == 0 {
                    b.push(3, Event::new(Kind::RdmaWait), None);
                }
            }
            let th = (i % 3) as usize;
            b.push(th, Event { addr: l as u64, ..Event::new(Kind::Begin) }, None);
            b.store_u64(th, Kind::Store, 0x1_0000_0000 + i * 8, 8, i * 7);
            let long: Vec<u8> = (0..64).map(|k| (k as u64 + i) as u8).collect();
            b.push(th, Event::mem(Kind::Store, 0x1_0000_0000 + i * 64, 64), Some(&long));
            b.push(th, Event::mem(Kind::Acquire, 0x2000 + (i % 4) * 8, 8), None);
            b.push(th, Event::new(Kind::Ofence), None);
            b.push(th, Event { addr: i, ..Event::new(Kind::Compute) }, None);
            b.push(th, Event { addr: l as u64, ..Event::new(Kind::End) }, None);
        }
        b.finish()
    }

    #[test]
    fn round_trips_plain_and_compressed() {
        let t = sample();
        for compress in [false, true] {
            let bytes = write(Vec::new(), &t, compress).unwrap();
            let back = read("mem", std::io::Cursor::new(&bytes)).unwrap();
            assert_eq!(back, t, "compress={compress}");
        }
    }

    #[test]
    fn a_region_outside_the_pm_ranges_is_reported() {
        let mut b = TraceBuilder::new(1);
        b.add_pm_range(0x1_0000_0000, 4096);
        b.push(0, Event::rdma_pwrite(0, 0x1_0000_0f00, 512), None);
        let bytes = write(Vec::new(), &b.finish(), false).unwrap();
        let e = read("r.bin", std::io::Cursor::new(&bytes)).unwrap_err().to_string();
        assert!(e.starts_with("r.bin") && e.contains("not inside one of the server's PM ranges"), "{e}");
    }

    #[test]
    fn truncated_and_corrupt_files_are_reported() {
        let bytes = write(Vec::new(), &sample(), true).unwrap();
        let cut = &bytes[..bytes.len() - 20];
        let e = read("t.bin", std::io::Cursor::new(cut)).unwrap_err().to_string();
        assert!(e.starts_with("t.bin: at byte") && e.contains("trunc"), "{e}");
        let e = read("t.bin", std::io::Cursor::new(b"hello world, this is text".to_vec())).unwrap_err().to_string();
        assert!(e.contains("bad magic"), "{e}");
        let mut bad = bytes.clone();
        bad[8] = 9; // version
        let e = read("t.bin", std::io::Cursor::new(bad)).unwrap_err().to_string();
        assert!(e.contains("version 9"), "{e}");
    }

    /// The byte ranges of a binary trace's records (after its header).
    fn records(bytes: &[u8]) -> Vec<(u8, std::ops::Range<usize>)> {
        let npm = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) as usize;
        let (mut pos, mut out) = (20 + 16 * npm, Vec::new());
        let u32_at = |p: usize| u32::from_le_bytes(bytes[p..p + 4].try_into().unwrap()) as usize;
        while pos < bytes.len() {
            let end = match bytes[pos] {
                TAG_BLOCK => pos + 17 + u32_at(pos + 13),
                TAG_LABEL => pos + 9 + u32_at(pos + 5),
                TAG_META => pos + 5 + u32_at(pos + 1),
                _ => pos + 13,
            };
            out.push((bytes[pos], pos..end));
            pos = end;
        }
        out
    }

    #[test]
    fn the_streaming_cut_at_the_first_gap_writes_what_the_in_memory_one_does() {
        let t = sample();
        let dir = std::env::temp_dir().join(format!("pmsim-gapstream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for compress in [false, true] {
            let bytes = write(Vec::new(), &t, compress).unwrap();
            let recs = records(&bytes);
            let blocks: Vec<_> = recs.iter().filter(|r| r.0 == TAG_BLOCK).map(|r| r.1.clone()).collect();
            assert!(blocks.len() >= 4, "{}", blocks.len());
            // Without a gap: all kept, nothing to write.
            let whole = dir.join(format!("whole-{compress}.bin"));
            std::fs::write(&whole, &bytes).unwrap();
            assert_eq!(first_gap(&whole).unwrap(), (t.num_events() as u64, t.num_events() as u64));
            // A block lost from the middle, and one at the start (nothing is kept).
            for lost in [blocks[blocks.len() / 2].clone(), blocks[0].clone()] {
                let mut cut = bytes[..lost.start].to_vec();
                cut.extend_from_slice(&bytes[lost.end..]);
                let path = dir.join(format!("gap-{compress}.bin"));
                std::fs::write(&path, &cut).unwrap();
                let (mem, dropped) = read_to_first_gap(&path).unwrap();
                let want = write(Vec::new(), &mem, false).unwrap();
                let (kept, total) = first_gap(&path).unwrap();
                assert_eq!((total - kept, kept), (dropped, mem.num_events() as u64));
                assert!(dropped > 0);
                let got = write_to_first_gap(&path, kept, Vec::new(), "out.bin").unwrap();
                assert!(got == want, "compress={compress}: the streamed prefix differs");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_skipped_block_cut_short_is_reported_at_a_byte_the_file_has() {
        // A tester's finding: seeking over a block succeeds past the end, so the error named a
        // byte beyond the file (13047 of a 3000 B file).
        let bytes = write(Vec::new(), &sample(), false).unwrap();
        let cut = &bytes[..bytes.len() / 3];
        let mut c = Cursor::open("t.bin", std::io::Cursor::new(cut)).unwrap();
        let e = loop {
            match c.next(&|_| false) {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("a cut file read to its END"),
                Err(e) => break e.to_string(),
            }
        };
        let at: usize = e.split("at byte ").nth(1).and_then(|r| r.split(':').next()).unwrap().parse().unwrap();
        assert!(e.contains("truncated block") && at <= cut.len(), "{e} (file of {} B)", cut.len());
    }
}
