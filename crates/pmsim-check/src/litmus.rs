//! Litmus tests: tiny text traces annotated with hand-derived allowed and forbidden crash
//! images per model (format: `docs/litmus.md`).
//!
//! Annotations are trace comments starting with `#@`, so every litmus file is also a plain
//! trace. [`global_order_record`] builds the run record of the simplest run (every event
//! performed in global order, event `gid` at time `(gid + 1) * 1000` ps), against which the
//! expectations were derived.

use crate::model::Model;
use pmsim_trace::text::parse_num;
use pmsim_trace::{Access, Kind, MemImage, RunRecord, SyncPerform, Trace, WordAccess, WordVal, INITIAL_ID};
use rustc_hash::FxHashMap;
use std::path::Path;

/// What an expectation says about its image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Consistent and durable.
    Allow,
    /// Not consistent.
    Forbid,
    /// Consistent but not durable (a completed dfence's store is missing).
    NonDurable,
}

/// One `#@ expect` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// 1-based line in the file.
    pub line: usize,
    pub models: Vec<Model>,
    pub outcome: Outcome,
    /// Crash right after this event (gid) performed; `None` = after the whole trace.
    pub at: Option<u64>,
    /// The image: (word address, gid shown); unlisted words are initial.
    pub words: Vec<(u64, u64)>,
    pub reason: String,
}

impl Expectation {
    pub fn image(&self) -> MemImage {
        let mut m = MemImage::new();
        for &(w, id) in &self.words {
            m.set(w, WordVal { id, data: 0 });
        }
        m
    }

    /// The crash instant in the record built by [`global_order_record`].
    pub fn instant(&self, trace: &Trace) -> u64 {
        event_time(self.at.unwrap_or(trace.num_events() as u64))
    }
}

/// A parsed litmus file.
#[derive(Clone, Debug)]
pub struct Litmus {
    pub path: String,
    pub name: String,
    pub about: String,
    pub trace: Trace,
    pub expectations: Vec<Expectation>,
}

#[derive(Debug, thiserror::Error)]
pub enum LitmusError {
    #[error("{file}: cannot read: {err}")]
    Io { file: String, err: std::io::Error },
    #[error(transparent)]
    Trace(#[from] pmsim_trace::TraceError),
    #[error("{file}:{line}: {msg}")]
    Syntax { file: String, line: usize, msg: String },
}

/// Time (ps) at which event `gid` is performed in the global-order run.
pub fn event_time(gid: u64) -> u64 {
    (gid + 1) * 1000
}

fn words_of(addr: u64, size: u8) -> impl Iterator<Item = u64> {
    (addr & !7..addr + size.max(1) as u64).step_by(8)
}

/// The run record of performing every event in global order, one per 1000 ps.
pub fn global_order_record(trace: &Trace) -> RunRecord {
    let mut r = RunRecord::default();
    let mut last: FxHashMap<u64, u64> = FxHashMap::default();
    for (th, i) in trace.global_order() {
        let e = &trace.threads[th as usize].events[i as usize];
        let time = event_time(e.gid);
        if e.kind.has_addr() && e.kind.reads() {
            for w in words_of(e.addr, e.size) {
                let read = last.get(&w).copied().unwrap_or(INITIAL_ID);
                r.accesses.push(WordAccess { time, gid: e.gid, thread: th, word: w, kind: Access::Load { read } });
            }
        }
        if e.kind.writes() {
            for w in words_of(e.addr, e.size) {
                last.insert(w, e.gid);
                r.accesses.push(WordAccess { time, gid: e.gid, thread: th, word: w, kind: Access::Store });
            }
        }
        if e.kind.is_sync() {
            r.syncs.push(SyncPerform { time, gid: e.gid, thread: th, addr: e.addr });
        }
        match e.kind {
            Kind::Dfence => r.dfences.push((e.gid, time)),
            Kind::Sfence | Kind::Mfence => r.fences.push((e.gid, time)),
            _ => {}
        }
    }
    r
}

/// Reads a litmus file: the trace and its `#@` annotations.
pub fn parse_litmus(path: impl AsRef<Path>) -> Result<Litmus, LitmusError> {
    let path = path.as_ref();
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| LitmusError::Io { file: file.clone(), err })?;
    parse_litmus_str(&file, &text)
}

/// As [`parse_litmus`], from a string; `file` names it in errors.
pub fn parse_litmus_str(file: &str, text: &str) -> Result<Litmus, LitmusError> {
    let trace = pmsim_trace::text::parse_str(file, text)?;
    let mut by_gid: FxHashMap<u64, (Kind, u64, u8)> = FxHashMap::default();
    for s in &trace.threads {
        for e in &s.events {
            by_gid.insert(e.gid, (e.kind, e.addr, e.size));
        }
    }
    let mut lit =
        Litmus { path: file.to_string(), name: String::new(), about: String::new(), trace, expectations: vec![] };
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let Some(body) = raw.trim_start().strip_prefix("#@") else { continue };
        let err = |msg: String| LitmusError::Syntax { file: file.to_string(), line, msg };
        let body = body.trim();
        let (key, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        match key {
            "name" => lit.name = rest.trim().to_string(),
            "about" => {
                if !lit.about.is_empty() {
                    lit.about.push(' ');
                }
                lit.about.push_str(rest.trim());
            }
            "expect" => {
                let (spec, reason) =
                    rest.split_once(" -- ").ok_or_else(|| err("expect line needs ' -- REASON' at the end".into()))?;
                let toks: Vec<&str> = spec.split_whitespace().collect();
                if toks.len() < 3 {
                    return Err(err("expected 'expect MODELS OUTCOME IMAGE... -- REASON'".into()));
                }
                let models = if toks[0] == "all" {
                    Model::ALL.to_vec()
                } else {
                    toks[0]
                        .split(',')
                        .map(|m| {
                            Model::from_name(m).ok_or_else(|| err(format!("unknown model '{m}' (ep, rp, strict, all)")))
                        })
                        .collect::<Result<Vec<_>, _>>()?
                };
                let outcome = match toks[1] {
                    "allow" => Outcome::Allow,
                    "forbid" => Outcome::Forbid,
                    "nondurable" => Outcome::NonDurable,
                    o => return Err(err(format!("unknown outcome '{o}' (allow, forbid, nondurable)"))),
                };
                let mut at = None;
                let mut words: Vec<(u64, u64)> = Vec::new();
                for &tok in &toks[2..] {
                    if tok == "none" {
                        continue;
                    }
                    if let Some(g) = tok.strip_prefix("at=g") {
                        let g = parse_num(g).ok_or_else(|| err(format!("bad instant '{tok}'")))?;
                        if !by_gid.contains_key(&g) {
                            return Err(err(format!("'{tok}': no event g{g}")));
                        }
                        at = Some(g);
                        continue;
                    }
                    let (g, only) = match tok.split_once('@') {
                        Some((g, w)) => (g, Some(parse_num(w).ok_or_else(|| err(format!("bad word in '{tok}'")))?)),
                        None => (tok, None),
                    };
                    let gid = g
                        .strip_prefix('g')
                        .and_then(parse_num)
                        .ok_or_else(|| err(format!("bad image token '{tok}' (gN, gN@0xWORD, none, at=gN)")))?;
                    let &(kind, addr, size) =
                        by_gid.get(&gid).ok_or_else(|| err(format!("'{tok}': no event g{gid}")))?;
                    if !kind.writes() {
                        return Err(err(format!("'{tok}': g{gid} is a '{}', not a store", kind.name())));
                    }
                    let ws: Vec<u64> = words_of(addr, size).collect();
                    let chosen: Vec<u64> = match only {
                        Some(w) if ws.contains(&w) => vec![w],
                        Some(w) => return Err(err(format!("'{tok}': g{gid} does not write word {w:#x}"))),
                        None => ws,
                    };
                    for w in chosen {
                        if words.iter().any(|&(x, _)| x == w) {
                            return Err(err(format!("'{tok}': word {w:#x} given twice")));
                        }
                        words.push((w, gid));
                    }
                }
                lit.expectations.push(Expectation {
                    line,
                    models,
                    outcome,
                    at,
                    words,
                    reason: reason.trim().to_string(),
                });
            }
            k => return Err(err(format!("unknown annotation '#@ {k}' (name, about, expect)"))),
        }
    }
    if lit.expectations.is_empty() {
        return Err(LitmusError::Syntax { file: file.to_string(), line: 0, msg: "no '#@ expect' lines".into() });
    }
    Ok(lit)
}
