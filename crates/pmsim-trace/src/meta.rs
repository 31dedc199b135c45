//! Trace metadata: how a trace was made, and whether it is complete.
//!
//! Why it exists: a trace recorded from a real program (`pmsim trace record`) must say which
//! program, arguments and PM convention produced it, and a trace cut short by a crash of that
//! program must be recognisable so that `pmsim run` can refuse it. Binary traces carry this in
//! META records (tag `0x03`, see `docs/binary-trace.md`); text traces in comment lines
//! `# meta KEY=VALUE` (comments, so every text reader still accepts them).
//!
//! Guarantees: reading metadata never decodes a block (a binary file is scanned by seeking over
//! them), and a file without metadata yields an empty list.

use crate::binary::{is_binary, Cursor};
use crate::TraceError;
use std::io::BufRead;
use std::path::Path;

/// The `tool` value (its start) of the traces `pmsim trace record` writes (python/pmsim/tracer.py):
/// such a trace is a program's x86 code (`crate::dialect`).
pub const RECORDER: &str = "pmsim trace record";

/// Whether `meta` says the trace was recorded from a program by `pmsim trace record`.
pub fn recorded(meta: &[(String, String)]) -> bool {
    meta.iter().any(|(k, v)| k == "tool" && v.starts_with(RECORDER))
}

/// The `key=value` text of a text trace's metadata comment line (`# meta key=value`).
pub fn meta_line(comment: &str) -> Option<&str> {
    comment.strip_prefix("# meta ")
}

/// The key whose presence marks a trace as incomplete; its value says why.
pub const INCOMPLETE: &str = "incomplete";

/// `(key, value)` pairs of a trace's metadata, in file order. A line without `=` has an empty
/// value.
pub fn read_meta(path: &Path) -> Result<Vec<(String, String)>, TraceError> {
    let name = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
    let mut lines: Vec<String> = Vec::new();
    if is_binary(path) {
        let mut c = Cursor::open(&name, std::io::BufReader::new(f))?;
        while let Some(rec) = c.next(&|_| false)? {
            if matches!(rec, crate::binary::Record::End { .. }) {
                break;
            }
        }
        for text in &c.meta {
            lines.extend(text.lines().map(str::to_string));
        }
    } else {
        for line in std::io::BufReader::new(f).lines() {
            let line = line.map_err(|e| TraceError::io(&name, e))?;
            if let Some(rest) = line.strip_prefix("# meta ") {
                lines.push(rest.to_string());
            }
        }
    }
    Ok(pairs(lines.iter().map(String::as_str)))
}

/// `(key, value)` pairs of metadata lines (`key=value`; blank lines skipped, a line without `=`
/// has an empty value).
pub fn pairs<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    lines.into_iter().filter(|l| !l.trim().is_empty()).map(pair).collect()
}

fn pair(line: &str) -> (String, String) {
    match line.split_once('=') {
        Some((k, v)) => (k.trim().to_string(), v.to_string()),
        None => (line.trim().to_string(), String::new()),
    }
}

/// [`pairs`] of a binary trace's raw META records (each may hold several lines).
pub(crate) fn pairs_of_records(records: &[String]) -> Vec<(String, String)> {
    pairs(records.iter().flat_map(|r| r.lines()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_records_are_read_and_skipped_by_the_trace_reader() {
        let t = crate::text::parse_str("x", "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 2a\n").unwrap();
        let mut bytes = crate::binary::write(Vec::new(), &t, false).unwrap();
        // Insert a META record right after the header (36 bytes with one PM range).
        let text = b"program=./a.out\nincomplete=killed by signal 11";
        let mut rec = vec![3u8];
        rec.extend_from_slice(&(text.len() as u32).to_le_bytes());
        rec.extend_from_slice(text);
        bytes.splice(36..36, rec);
        let dir = std::env::temp_dir().join(format!("pmsim-meta-{}", std::process::id()));
        std::fs::write(&dir, &bytes).unwrap();
        let m = read_meta(&dir).unwrap();
        assert_eq!(m[0], ("program".to_string(), "./a.out".to_string()));
        assert_eq!(m[1].0, INCOMPLETE);
        let back = crate::binary::read_path(&dir).unwrap();
        assert_eq!(back.threads[0].events.len(), 1);
        // The trace read whole keeps it too (what a pipe's reader has to carry it on).
        assert_eq!(back.meta, m);
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn a_text_trace_read_whole_keeps_its_metadata_in_file_order() {
        let src = "# pmsim trace v1\nthreads 1\n# meta tool=pmsim trace record (x)\n# not meta=1\n\
                   T0 store 0x100000000 8 2a # meta inline=no\n# meta incomplete=killed\n# meta flag\n";
        let t = crate::text::parse_str("x", src).unwrap();
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(t.meta, vec![pair("tool", "pmsim trace record (x)"), pair(INCOMPLETE, "killed"), pair("flag", "")]);
        assert!(t.recorded());
        let plain = crate::text::parse_str("x", "# pmsim trace v1\nthreads 1\n# meta tool=other\n").unwrap();
        assert!(!plain.recorded());
        assert_eq!(plain.meta, vec![pair("tool", "other")]);
    }
}
