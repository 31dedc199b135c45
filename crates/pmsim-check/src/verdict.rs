//! What a check returns: a verdict and, when it fails, violations a person can follow.

use serde::{Serialize, Serializer};
use std::fmt;

/// At most this many violations are reported per check (the first ones, deterministically).
pub const MAX_VIOLATIONS: usize = 5;

/// The rule that puts one access before the next in persist order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeRule {
    /// Same thread, separated by an `ofence`/`dfence` (EP, RP).
    Barrier,
    /// Same word, different threads, at least one a store, in performed order (EP, strict).
    Conflict,
    /// A release (or rmw) and the acquire (or rmw) that synchronises with it (RP).
    Sync,
    /// Strong persist atomicity: stores to one word in performed order (all models).
    Spa,
    /// Same thread, program order (strict).
    ProgramOrder,
    /// A store before a release of the same epoch, and that release (RP).
    Release,
    /// An acquire and a store after it in the same epoch (RP).
    Acquire,
    /// x86: the latest store to a line that a thread flushed, and that thread's next fence
    /// (sfence, mfence, locked rmw, release).
    Flush,
    /// x86: a fence, acquire or locked rmw and its thread's later stores and fences.
    Fence,
    /// x86: stores to one cache line in performed order (whole-line write-back).
    Line,
}

impl EdgeRule {
    pub fn name(self) -> &'static str {
        match self {
            EdgeRule::Barrier => "barrier",
            EdgeRule::Conflict => "conflict",
            EdgeRule::Sync => "sync",
            EdgeRule::Spa => "spa",
            EdgeRule::ProgramOrder => "program-order",
            EdgeRule::Release => "release",
            EdgeRule::Acquire => "acquire",
            EdgeRule::Flush => "flush",
            EdgeRule::Fence => "fence-order",
            EdgeRule::Line => "same-line",
        }
    }
}

impl Serialize for EdgeRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ViolationKind {
    /// A store that must precede a visible store is not durable; its word shows the initial
    /// contents.
    MissingPredecessor,
    /// As above, but the word shows an older store: that older value should have been shadowed
    /// by the missing store, which the closure requires.
    Shadowed,
    /// A word shows an id that is not a store to that word performed by the crash instant.
    NeverWritten,
    /// A store before a completed `dfence` of its thread is not durable, or (x86) a store that a
    /// completed fence (sfence, mfence, locked rmw, release) made persistent is not.
    NotDurable,
}

/// A store (or, for `NeverWritten`, the id shown) at one word.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreRef {
    pub gid: u64,
    /// `None` when the gid is not an event of the trace.
    pub thread: Option<u16>,
    pub word: u64,
}

/// The store the closure requires and the image lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MissingStore {
    pub gid: u64,
    pub thread: u16,
    /// The first of its words that does not show it (or a later store).
    pub word: u64,
    /// What that word shows instead: a store's gid, or `None` for the initial contents.
    pub shows: Option<u64>,
}

/// One step of a persist-order path; `edge` links it to the next step (`None` on the last).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathStep {
    pub gid: u64,
    pub thread: u16,
    pub kind: &'static str,
    pub edge: Option<EdgeRule>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    /// The crash instant (ps).
    pub at: u64,
    /// The visible store that requires `missing` (for `NeverWritten`: the id shown).
    pub visible: Option<StoreRef>,
    pub missing: Option<MissingStore>,
    /// For `NotDurable`: the completed dfence (x86: the completed fence point); `None` when the
    /// store had performed under a design that promises every performed store survives.
    pub dfence: Option<u64>,
    /// Persist-order path from `missing` to `visible` (or to the dfence).
    pub path: Vec<PathStep>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shows = |m: &MissingStore| match m.shows {
            Some(g) => format!("store {g}"),
            None => "the initial value".to_string(),
        };
        match (&self.kind, &self.visible, &self.missing) {
            (ViolationKind::NeverWritten, Some(v), _) => write!(
                f,
                "at t={}: word {:#x} shows id {} which is not a store to that word performed by then",
                self.at, v.word, v.gid
            )?,
            (ViolationKind::NotDurable, _, Some(m)) if self.dfence.is_none() => write!(
                f,
                "at t={}: store {} (T{}) had performed{}, but word {:#x} shows {}: the design promises every \
                 performed store survives",
                self.at,
                m.gid,
                m.thread,
                match self.path.last() {
                    Some(s) if s.gid != m.gid => format!(" (as had store {} after it in program order)", s.gid),
                    _ => String::new(),
                },
                m.word,
                shows(m)
            )?,
            (ViolationKind::NotDurable, _, Some(m)) => write!(
                f,
                "at t={}: store {} (T{}) precedes completed {} {} but word {:#x} shows {}",
                self.at,
                m.gid,
                m.thread,
                self.path.last().map_or("dfence", |s| s.kind),
                self.dfence.unwrap_or(0),
                m.word,
                shows(m)
            )?,
            (k, Some(v), Some(m)) => write!(
                f,
                "at t={}: {:?}: visible store {} (T{}, word {:#x}) requires store {} (T{}) but word {:#x} shows {}",
                self.at,
                k,
                v.gid,
                v.thread.unwrap_or(0),
                v.word,
                m.gid,
                m.thread,
                m.word,
                shows(m)
            )?,
            (k, _, _) => write!(f, "at t={}: {k:?}", self.at)?,
        }
        if !self.path.is_empty() {
            write!(f, "; path:")?;
            for s in &self.path {
                write!(f, " {}(T{} {})", s.gid, s.thread, s.kind)?;
                if let Some(e) = s.edge {
                    write!(f, " -{}->", e.name())?;
                }
            }
        }
        Ok(())
    }
}

/// The result of checking one crash image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub consistent: bool,
    pub durable: bool,
    pub at: u64,
    pub violations: Vec<Violation>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.consistent && self.durable
    }
}
