//! The text trace format of docs/design.md §3.1, read and written exactly.
//!
//! ```text
//! # pmsim trace v1
//! threads 2
//! pm 0x100000000 0x40000000
//! T0 store 0x100000000 8 2a
//! T1 acquire 0x2000
//! ```
//! Line order is global order. VALUE is a hex number without `0x`, stored little-endian in SIZE
//! bytes. Extensions (documented in `docs/trace-format.md`): `acquire ADDR [SIZE]` and
//! `release ADDR [SIZE [VALUE]]` (default 8 bytes; a release writes VALUE, default 0), and
//! `begin`/`end` labels are single tokens.

use crate::event::{Event, Kind};
use crate::trace::PmRange;
use crate::trace::{value_of, EventSink, Trace, TraceBuilder};
use crate::validate::{access_error, Validator};
use crate::TraceError;
use std::io::{BufRead, Write};

pub const HEADER: &str = "# pmsim trace v1";

/// Parses a number: decimal or `0x` hex.
pub fn parse_num(s: &str) -> Option<u64> {
    // Digits only: Rust's parsers would also take a leading '+', which the format does not.
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() || !h.bytes().all(|c| c.is_ascii_hexdigit() || c == b'_') {
            return None;
        }
        u64::from_str_radix(&h.replace('_', ""), 16).ok()
    } else if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) {
        s.parse::<u64>().ok()
    } else {
        None
    }
}

/// Parses VALUE (hex digits, no `0x`) into `size` little-endian bytes.
fn parse_value(s: &str, size: usize) -> Result<Vec<u8>, String> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("value '{s}' is not hex digits"));
    }
    let trimmed = digits.trim_start_matches('0');
    if trimmed.len() > size * 2 {
        return Err(format!("value '{s}' does not fit in {size} bytes"));
    }
    let mut out = vec![0u8; size];
    let b = trimmed.as_bytes();
    for (i, chunk) in b.rchunks(2).enumerate() {
        let txt = std::str::from_utf8(chunk).unwrap_or("0");
        out[i] = u8::from_str_radix(txt, 16).map_err(|_| format!("value '{s}' is not hex"))?;
    }
    Ok(out)
}

fn format_value(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes.iter().rev() {
        s.push_str(&format!("{b:02x}"));
    }
    let t = s.trim_start_matches('0');
    if t.is_empty() {
        "0".to_string()
    } else {
        t.to_string()
    }
}

/// Reads a text trace. `file` names the source in error messages.
pub fn read<R: BufRead>(file: &str, r: R) -> Result<Trace, TraceError> {
    let mut b = TraceBuilder::new(0);
    read_into(file, r, &mut b)?;
    Ok(b.finish())
}

/// Streams a text trace into any [`EventSink`] (e.g. the binary writer), line by line.
pub fn read_into<R: BufRead, S: EventSink>(file: &str, r: R, sink: &mut S) -> Result<(), TraceError> {
    let mut have_threads = false;
    let mut saw_header = false;
    let mut v = Validator::default();
    let mut pm: Vec<PmRange> = Vec::new();
    let mut r = r;
    let mut buf: Vec<u8> = Vec::new();
    let mut lineno = 0;
    loop {
        buf.clear();
        lineno += 1;
        let n =
            r.read_until(b'\n', &mut buf).map_err(|e| TraceError::new(file, lineno, format!("cannot read: {e}")))?;
        if n == 0 {
            break;
        }
        let mut bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let err = |msg: String| TraceError::new(file, lineno, msg);
        if !saw_header {
            // A byte-order mark, as some editors write at the start of a UTF-8 file, is not text.
            let head = std::str::from_utf8(bytes).map(|l| l.strip_prefix('\u{feff}').unwrap_or(l).trim_end());
            if head != Ok(HEADER) {
                return Err(err(format!("first line must be '{HEADER}'")));
            }
            saw_header = true;
            continue;
        }
        // Only what a line says must be UTF-8: a comment may hold any bytes (a name in
        // Latin-1, a pasted binary dump), as it may hold any text.
        let said = match bytes.iter().position(|&c| c == b'#') {
            Some(p) => {
                if let Some(line) = std::str::from_utf8(bytes).ok().filter(|_| p == 0).and_then(crate::meta::meta_line)
                {
                    sink.meta_line(line);
                }
                &bytes[..p]
            }
            None => bytes,
        };
        let content = std::str::from_utf8(said).map_err(|e| {
            let at = e.valid_up_to();
            err(format!("not UTF-8 text (byte 0x{:02x} at column {})", said[at], at + 1))
        })?;
        // A control character would hide inside a token and its message ("value '1' ...").
        if let Some((at, c)) = content.char_indices().find(|&(_, c)| c.is_control() && !c.is_whitespace()) {
            return Err(err(format!("control character U+{:04X} at column {}", c as u32, at + 1)));
        }
        let toks: Vec<&str> = content.split_whitespace().collect();
        if toks.is_empty() {
            continue;
        }
        match toks[0] {
            "threads" => {
                if have_threads {
                    return Err(err("'threads' given twice".into()));
                }
                if toks.len() != 2 {
                    return Err(err("expected 'threads N'".into()));
                }
                let n = parse_num(toks[1])
                    .filter(|&n| (1..=4096).contains(&n))
                    .ok_or_else(|| err(format!("thread count '{}' is not a number from 1 to 4096", toks[1])))?;
                sink.set_threads(n as usize).map_err(|e| err(format!("cannot write: {e}")))?;
                v = Validator::new(n as usize);
                have_threads = true;
            }
            "pm" => {
                if !have_threads {
                    return Err(err("'pm' before 'threads'".into()));
                }
                if toks.len() != 3 {
                    return Err(err("expected 'pm BASE SIZE'".into()));
                }
                let base = parse_num(toks[1]).ok_or_else(|| err(format!("bad PM base '{}'", toks[1])))?;
                let size = parse_num(toks[2]).ok_or_else(|| err(format!("bad PM size '{}'", toks[2])))?;
                if let Some(e) = crate::validate::pm_range_error(base, size) {
                    return Err(err(e));
                }
                // What the binary format holds (docs/binary-trace.md), so every text trace converts.
                if pm.len() == crate::binary::MAX_PM_RANGES {
                    return Err(err(format!("more than {} 'pm' ranges", crate::binary::MAX_PM_RANGES)));
                }
                if sink.num_events() > 0 {
                    return Err(err("'pm' after the first event".into()));
                }
                sink.add_pm_range(base, size).map_err(|e| err(format!("cannot write: {e}")))?;
                pm.push(PmRange { base, size });
            }
            t if t.starts_with('T') => {
                if !have_threads {
                    return Err(err("event before 'threads'".into()));
                }
                let thread = Some(&t[1..])
                    .filter(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
                    .and_then(|d| d.parse::<usize>().ok())
                    .ok_or_else(|| err(format!("bad thread '{t}' (expected T0, T1, ...)")))?;
                if thread >= sink.num_threads() {
                    return Err(err(format!("thread T{thread} but the trace has {} threads", sink.num_threads())));
                }
                if pm.is_empty() {
                    pm.push(crate::DEFAULT_PM);
                }
                if v.pm.is_empty() {
                    v.pm = pm.clone();
                }
                parse_event(sink, &mut v, thread, &toks[1..]).map_err(err)?;
            }
            other => return Err(err(format!("unknown directive '{other}'"))),
        }
    }
    if !saw_header {
        return Err(TraceError::new(file, 1, format!("empty file; first line must be '{HEADER}'")));
    }
    if !have_threads {
        return Err(TraceError::new(file, 0, "no 'threads' line"));
    }
    Ok(())
}

/// Checks `ev` with the shared validator, then appends it.
fn push<S: EventSink>(
    b: &mut S,
    v: &mut Validator,
    thread: usize,
    ev: Event,
    value: Option<&[u8]>,
) -> Result<(), String> {
    v.event(thread, &ev)?;
    b.push(thread, ev, value).map_err(|e| format!("cannot write: {e}"))?;
    Ok(())
}

fn parse_event<S: EventSink>(b: &mut S, v: &mut Validator, thread: usize, toks: &[&str]) -> Result<(), String> {
    let Some(&name) = toks.first() else {
        return Err("missing event after thread".into());
    };
    let kind = Kind::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown event '{name}' (valid: {})", names.join(", "))
    })?;
    let args = &toks[1..];
    let nargs = |lo: usize, hi: usize| -> Result<(), String> {
        if args.len() < lo || args.len() > hi {
            let takes = if lo == hi { format!("{lo}") } else { format!("{lo} to {hi}") };
            let s = if hi == 1 { "" } else { "s" };
            Err(format!("'{name}' takes {takes} argument{s}, got {}", args.len()))
        } else {
            Ok(())
        }
    };
    let addr_of = |s: &str| parse_num(s).ok_or_else(|| format!("bad address '{s}'"));
    let size_of = |s: &str, addr: u64| -> Result<u8, String> {
        let n =
            parse_num(s).filter(|&n| (1..=64).contains(&n)).ok_or_else(|| format!("size '{s}' is not from 1 to 64"))?;
        if let Some(e) = access_error(addr, n) {
            return Err(e);
        }
        Ok(n as u8)
    };
    match kind {
        Kind::Compute => {
            nargs(1, 1)?;
            let n = parse_num(args[0]).ok_or_else(|| format!("bad instruction count '{}'", args[0]))?;
            push(b, v, thread, Event { addr: n, ..Event::new(kind) }, None)?;
        }
        Kind::Load => {
            nargs(2, 2)?;
            let a = addr_of(args[0])?;
            let s = size_of(args[1], a)?;
            push(b, v, thread, Event::mem(kind, a, s), None)?;
        }
        Kind::Store | Kind::NtStore | Kind::Rmw => {
            nargs(2, 3)?;
            let a = addr_of(args[0])?;
            let s = size_of(args[1], a)?;
            let val = args.get(2).map(|x| parse_value(x, s as usize)).transpose()?;
            push(b, v, thread, Event::mem(kind, a, s), val.as_deref())?;
        }
        Kind::Acquire => {
            nargs(1, 2)?;
            let a = addr_of(args[0])?;
            let s = match args.get(1) {
                Some(t) => size_of(t, a)?,
                None => size_of("8", a)?,
            };
            push(b, v, thread, Event::mem(kind, a, s), None)?;
        }
        Kind::Release => {
            nargs(1, 3)?;
            let a = addr_of(args[0])?;
            let s = match args.get(1) {
                Some(t) => size_of(t, a)?,
                None => size_of("8", a)?,
            };
            let val = args.get(2).map(|x| parse_value(x, s as usize)).transpose()?;
            push(b, v, thread, Event::mem(kind, a, s), val.as_deref())?;
        }
        Kind::Clwb | Kind::ClflushOpt | Kind::Clflush => {
            nargs(1, 1)?;
            let a = addr_of(args[0])?;
            push(b, v, thread, Event::mem(kind, a, 1), None)?;
        }
        Kind::Sfence | Kind::Mfence | Kind::Ofence | Kind::Dfence | Kind::Strand => {
            nargs(0, 0)?;
            push(b, v, thread, Event::new(kind), None)?;
        }
        Kind::Begin | Kind::End => {
            nargs(1, 1)?;
            if args[0].len() > crate::binary::MAX_LABEL_BYTES {
                return Err(format!("label longer than {} bytes", crate::binary::MAX_LABEL_BYTES));
            }
            let id = b.label(args[0]).map_err(|e| format!("cannot write: {e}"))?;
            v.labels = v.labels.max(id as usize + 1);
            // The validator knows label ids; a text trace's reader knows the label by its name.
            push(b, v, thread, Event { addr: id as u64, ..Event::new(kind) }, None)
                .map_err(|e| e.replace(&format!("label id {id}"), &format!("label '{}'", args[0])))?;
        }
        Kind::RdmaPwrite => {
            nargs(3, 3)?;
            let node = parse_num(args[0])
                .filter(|&n| n <= u32::MAX as u64)
                .ok_or_else(|| format!("bad node '{}'", args[0]))?;
            let a = addr_of(args[1])?;
            let len = parse_num(args[2]).ok_or_else(|| format!("bad size '{}'", args[2]))?;
            push(b, v, thread, Event::rdma_pwrite(node as u32, a, len), None)?;
        }
        Kind::RdmaWait => {
            nargs(0, 0)?;
            push(b, v, thread, Event::new(kind), None)?;
        }
    }
    Ok(())
}

/// Formats one event's text line (without thread prefix).
pub fn format_event(ev: &Event, arena: &[u8], labels: &[String]) -> String {
    let mut buf = [0u8; 64];
    let name = ev.kind.name();
    match ev.kind {
        Kind::Compute => format!("{name} {}", ev.addr),
        Kind::Load => format!("{name} {:#x} {}", ev.addr, ev.size),
        Kind::Store | Kind::NtStore | Kind::Rmw => match value_of(ev, arena, &mut buf) {
            Some(v) => format!("{name} {:#x} {} {}", ev.addr, ev.size, format_value(v)),
            None => format!("{name} {:#x} {}", ev.addr, ev.size),
        },
        Kind::Acquire => {
            if ev.size == 8 {
                format!("{name} {:#x}", ev.addr)
            } else {
                format!("{name} {:#x} {}", ev.addr, ev.size)
            }
        }
        Kind::Release => match value_of(ev, arena, &mut buf) {
            Some(v) => format!("{name} {:#x} {} {}", ev.addr, ev.size, format_value(v)),
            None if ev.size == 8 => format!("{name} {:#x}", ev.addr),
            None => format!("{name} {:#x} {}", ev.addr, ev.size),
        },
        Kind::Clwb | Kind::ClflushOpt | Kind::Clflush => format!("{name} {:#x}", ev.addr),
        Kind::Sfence | Kind::Mfence | Kind::Ofence | Kind::Dfence | Kind::Strand | Kind::RdmaWait => name.to_string(),
        Kind::RdmaPwrite => format!("{name} {} {:#x} {}", ev.aux, ev.addr, ev.data),
        Kind::Begin | Kind::End => {
            let l = labels.get(ev.addr as usize).map(String::as_str).unwrap_or("?");
            format!("{name} {l}")
        }
    }
}

/// Writes the header lines (header, threads, pm ranges).
pub fn write_header<W: Write>(w: &mut W, threads: usize, pm: &[crate::PmRange]) -> std::io::Result<()> {
    writeln!(w, "{HEADER}")?;
    writeln!(w, "threads {threads}")?;
    for r in pm {
        writeln!(w, "pm {:#x} {:#x}", r.base, r.size)?;
    }
    Ok(())
}

/// Writes a whole trace in global order.
pub fn write<W: Write>(w: &mut W, t: &Trace) -> std::io::Result<()> {
    write_with_meta(w, t, &[])
}

/// Metadata as `# meta key=value` comment lines (trace-format.md).
pub fn write_meta<W: Write>(w: &mut W, meta: &[(String, String)]) -> std::io::Result<()> {
    for (k, v) in meta {
        writeln!(w, "# meta {k}={v}")?;
    }
    Ok(())
}

/// [`write`], with `meta` after the header.
pub fn write_with_meta<W: Write>(w: &mut W, t: &Trace, meta: &[(String, String)]) -> std::io::Result<()> {
    write_header(w, t.num_threads(), &t.pm)?;
    write_meta(w, meta)?;
    for (th, i) in t.global_order() {
        let s = &t.threads[th as usize];
        writeln!(w, "T{th} {}", format_event(&s.events[i as usize], &s.bytes, &t.labels))?;
    }
    Ok(())
}

/// Parses a text trace held in a string (tests, Python).
pub fn parse_str(file: &str, s: &str) -> Result<Trace, TraceError> {
    read(file, std::io::Cursor::new(s))
}

/// Reads a text trace from a path.
pub fn read_path(path: &std::path::Path) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    read(&name, std::io::BufReader::new(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# pmsim trace v1\nthreads 2\npm 0x100000000 0x40000000\nT0 store 0x100000000 8 2a\nT0 ofence\nT1 acquire 0x2000\nT1 load 0x100000000 8\n# comment\n\nT1 release 0x2000\nT0 rmw 0x2000 8 1\nT0 begin op\nT0 compute 10\nT0 store 0x100000040 64 0102030405060708090a0b0c0d0e0f101112\nT0 end op\n";

    #[test]
    fn parses_the_design_example() {
        let t = parse_str("x", SAMPLE).unwrap();
        assert_eq!(t.num_threads(), 2);
        assert_eq!(t.pm.len(), 1);
        assert_eq!(t.pm[0].size, 0x4000_0000);
        let t0 = &t.threads[0].events;
        assert_eq!(t0[0].kind, Kind::Store);
        assert_eq!(t0[0].data, 0x2a);
        assert_eq!(t0[0].gid, 0);
        assert_eq!(t.threads[1].events[0].gid, 2);
        // sync ordinals on 0x2000 in global order: acquire (no release before it), release (one
        // sync event before it), rmw (two before it)
        assert_eq!(t.threads[1].events[0].aux, 0);
        assert_eq!(t.threads[1].events[2].aux, 1);
        assert_eq!(t0[2].aux, 2);
        let mut buf = [0u8; 64];
        let v = t.threads[0].value(&t0[5], &mut buf).unwrap();
        assert_eq!(v.len(), 64);
        assert_eq!(v[0], 0x12);
        assert_eq!(v[17], 0x01);
        assert_eq!(v[18], 0);
    }

    #[test]
    fn what_the_binary_format_cannot_hold_is_refused_at_its_line() {
        // Every text trace the reader accepts must convert to binary and read back.
        let mut many = String::from("# pmsim trace v1\nthreads 1\n");
        for i in 0..crate::binary::MAX_PM_RANGES as u64 {
            many.push_str(&format!("pm {:#x} 0x40\n", 0x1_0000_0000u64 + i * 0x1000));
        }
        let ok = format!("{many}T0 store 0x100000000 8 1\n");
        let t = parse_str("ok", &ok).unwrap();
        let bin = crate::binary::write(Vec::new(), &t, false).unwrap();
        assert_eq!(crate::binary::read("ok.bin", std::io::Cursor::new(bin)).unwrap().pm.len(), 1024);
        let e = parse_str("x", &format!("{many}pm 0x200000000 0x40\n")).unwrap_err().to_string();
        assert!(e.contains("x:1027") && e.contains("more than 1024 'pm' ranges"), "{e}");
        let long = "l".repeat(crate::binary::MAX_LABEL_BYTES + 1);
        let e = parse_str("y", &format!("# pmsim trace v1\nthreads 1\nT0 begin {long}\n")).unwrap_err().to_string();
        assert!(e.contains("y:3") && e.contains("label longer than 1048576 bytes"), "{e}");
        let fits = "l".repeat(crate::binary::MAX_LABEL_BYTES);
        let t = parse_str("z", &format!("# pmsim trace v1\nthreads 1\nT0 begin {fits}\nT0 end {fits}\n")).unwrap();
        let bin = crate::binary::write(Vec::new(), &t, true).unwrap();
        assert_eq!(crate::binary::read("z.bin", std::io::Cursor::new(bin)).unwrap().labels[0].len(), fits.len());
    }

    #[test]
    fn round_trips_through_text() {
        let t = parse_str("x", SAMPLE).unwrap();
        let mut out = Vec::new();
        write(&mut out, &t).unwrap();
        let t2 = parse_str("y", std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(t, t2);
    }

    fn err_of(s: &str) -> String {
        parse_str("f.trace", s).unwrap_err().to_string()
    }

    #[test]
    fn pm_ranges_are_whole_lines_below_the_last_one() {
        for (range, why) in [
            ("0x100000004 0x40", "not whole 64 B lines"),
            ("0x100000000 0x44", "not whole 64 B lines"),
            ("0x100000000 0", "is empty"),
            ("0xffffffffffff0000 0x10000", "overflows the address space"),
            ("0xffffffffffffff00 0x100", "overflows the address space"),
        ] {
            let e = err_of(&format!("# pmsim trace v1\nthreads 1\npm {range}\n"));
            assert!(e.starts_with("f.trace:3: ") && e.contains(why), "{range}: {e}");
        }
        let t = parse_str("f.trace", "# pmsim trace v1\nthreads 1\npm 0x0 0x40\npm 0xffffffffffffff00 0xc0\n");
        assert_eq!(t.unwrap().pm.len(), 2);
    }

    #[test]
    fn the_last_line_of_the_address_space_is_refused_the_one_before_it_is_not() {
        let pm = "# pmsim trace v1\nthreads 1\npm 0xffffffffffff0000 0xffc0\n";
        for ev in ["T0 store 0xffffffffffffffc0 8 1", "T0 load 0xffffffffffffffff 1", "T0 clwb 0xffffffffffffffe0"] {
            let e = err_of(&format!("{pm}{ev}\n"));
            assert!(e.starts_with("f.trace:4: ") && e.contains("last 64 B line of the address space"), "{e}");
        }
        let t = parse_str("f.trace", &format!("{pm}T0 store 0xffffffffffffff80 64 1\nT0 clwb 0xffffffffffffffbf\n"));
        assert_eq!(t.unwrap().num_events(), 2);
    }

    #[test]
    fn comments_may_hold_any_bytes_but_what_a_line_says_is_utf8() {
        let t = read("f.trace", &b"# pmsim trace v1\n# caf\xe9\nthreads 1 # \xff\xfe\nT0 store 0x100000000 8 1\n"[..]);
        assert_eq!(t.unwrap().num_events(), 1);
        let e = read("f.trace", &b"# pmsim trace v1\nthreads 1\nT0 label caf\xe9\n"[..]).unwrap_err().to_string();
        assert_eq!(e, "f.trace:3: not UTF-8 text (byte 0xe9 at column 13)");
        let e = read("f.trace", &b"# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\x00\n"[..])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "f.trace:3: control character U+0000 at column 25");
        let e = read("f.trace", &b"\xff\xfe# pmsim trace v1\n"[..]).unwrap_err().to_string();
        assert_eq!(e, "f.trace:1: first line must be '# pmsim trace v1'");
    }

    #[test]
    fn errors_name_file_line_and_problem() {
        assert_eq!(err_of("hello\n"), "f.trace:1: first line must be '# pmsim trace v1'");
        // Windows editors: a byte-order mark and CRLF line ends are accepted.
        let t = parse_str("f.trace", "\u{feff}# pmsim trace v1\r\nthreads 1\r\nT0 store 0x100000000 8 2a\r\n").unwrap();
        assert_eq!(t.threads[0].events.len(), 1);
        assert_eq!(err_of("\u{feff}hello\n"), "f.trace:1: first line must be '# pmsim trace v1'");
        let e = err_of("# pmsim trace v1\nthreads 1\nT0 store 0x100000038 16\n");
        assert!(e.starts_with("f.trace:3: ") && e.contains("crosses a 64 B line"), "{e}");
        let e = err_of("# pmsim trace v1\nthreads 1\nT3 ofence\n");
        assert!(e.starts_with("f.trace:3: ") && e.contains("has 1 threads"), "{e}");
        let e = err_of("# pmsim trace v1\nthreads 1\nT0 frobnicate\n");
        assert!(e.contains("unknown event 'frobnicate'") && e.contains("ofence"), "{e}");
        let e = err_of("# pmsim trace v1\nT0 ofence\n");
        assert!(e.starts_with("f.trace:2: event before 'threads'"), "{e}");
        let e = err_of("# pmsim trace v1\nthreads 1\nT0 store 0x100000000 2 12345\n");
        assert!(e.contains("does not fit in 2 bytes"), "{e}");
        let e = err_of("# pmsim trace v1\nthreads 1\nT0 load zz 8\n");
        assert!(e.contains("bad address 'zz'"), "{e}");
        // Numbers are digits: a sign is not part of the format (Rust's parsers would take it).
        let e = err_of("# pmsim trace v1\nthreads 2\nT+1 ofence\n");
        assert!(e.contains("bad thread 'T+1'"), "{e}");
        let e = err_of("# pmsim trace v1\nthreads 1\nT0 load 0x100000000 +8\n");
        assert!(e.starts_with("f.trace:3: "), "{e}");
        let e = err_of("# pmsim trace v1\nthreads 1\nT0 load 0x+100000000 8\n");
        assert!(e.contains("bad address"), "{e}");
        // A value may carry 0x or 0X, like every other number.
        let t = parse_str("f.trace", "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 0X2a\n").unwrap();
        assert_eq!(t.threads[0].events[0].data, 0x2a);
    }

    const REMOTE: &str = "# pmsim trace v1\nthreads 2\npm 0x100000000 0x100000\nT0 store 0x100000000 8 1\nT1 begin tx\nT1 rdma_pwrite 0 0x100000100 300\nT1 rdma_pwrite 0 0x100001000 64\nT1 rdma_wait\nT1 end tx\n";

    #[test]
    fn remote_events_round_trip() {
        let t = parse_str("x", REMOTE).unwrap();
        let e = t.threads[1].events[1];
        assert_eq!((e.kind, e.aux, e.addr, e.data), (Kind::RdmaPwrite, 0, 0x1_0000_0100, 300));
        let mut out = Vec::new();
        write(&mut out, &t).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("T1 rdma_pwrite 0 0x100000100 300\nT1 rdma_pwrite 0 0x100001000 64\nT1 rdma_wait"));
        assert_eq!(parse_str("y", &text).unwrap(), t);
    }

    #[test]
    fn remote_errors_name_the_line() {
        let head = "# pmsim trace v1\nthreads 2\npm 0x100000000 0x100000\n";
        let e = err_of(&format!("{head}T1 rdma_pwrite 3 0x100000000 64\n"));
        assert!(e.starts_with("f.trace:4: ") && e.contains("node 3, which does not exist"), "{e}");
        let e = err_of(&format!("{head}T1 rdma_pwrite 0 0x1000fffc0 128\n"));
        assert!(e.starts_with("f.trace:4: ") && e.contains("not inside one of the server's PM ranges"), "{e}");
        let e = err_of(&format!("{head}T1 rdma_pwrite 0 0x100000000 0\n"));
        assert!(e.contains("size 0 is not from 1 to"), "{e}");
        let e = err_of(&format!("{head}T1 rdma_wait\nT1 store 0x100000000 8\n"));
        assert!(e.starts_with("f.trace:5: ") && e.contains("T1 mixes remote persistence"), "{e}");
        let e = err_of(&format!("{head}T0 ofence\nT0 rdma_pwrite 0 0x100000000 8\n"));
        assert!(e.starts_with("f.trace:5: ") && e.contains("local 'ofence'"), "{e}");
    }
}
