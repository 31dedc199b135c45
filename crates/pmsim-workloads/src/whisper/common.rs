//! Helpers shared by the WHISPER-like and Atlas workloads: self-checking key/value bytes and a
//! per-word write history for recovery checks.
//!
//! Why: recovery must tell "a value some operation wrote" from "garbage", and "at least as new as
//! the last durable write" from "lost". Keys and values are therefore derived from a tag (their
//! first word) so a torn or invented value is detected, and every committed write to a PM word
//! is recorded in commit order ([`History`]) so an image word can be placed in that order.

use crate::ctx::Heap;
use crate::recovery::{piece, OpLog, PieceCache, RecoveryError};
use pmsim_trace::MemImage;
use rustc_hash::FxHashMap;

/// Owner index of writes made by the initial (setup) population.
pub const SETUP: u32 = u32::MAX;

/// Operation code of operations that write nothing (reads, empty dequeues).
pub const OP_READ: u8 = 3;

fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Bytes that are neither zero nor a well-formed tagged key/value (torn or invented).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// `len` bytes whose first word is `tag` (non-zero) and the rest a function of it.
pub fn tagged_bytes(tag: u64, salt: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    out.extend_from_slice(&tag.to_le_bytes());
    let mut i = 1u64;
    while out.len() < len {
        out.extend_from_slice(&mix(tag ^ salt, i).to_le_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// The tag of bytes made by [`tagged_bytes`]: `Ok(None)` if all zero (never written),
/// `Err` if they are neither zero nor a well-formed tagged value (torn or invented).
pub fn tag_of(bytes: &[u8], salt: u64) -> Result<Option<u64>, Malformed> {
    if bytes.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let mut w = [0u8; 8];
    let n = bytes.len().min(8);
    w[..n].copy_from_slice(&bytes[..n]);
    let tag = u64::from_le_bytes(w);
    if tag != 0 && tagged_bytes(tag, salt, bytes.len()) == bytes {
        Ok(Some(tag))
    } else {
        Err(Malformed)
    }
}

/// Salt of keys (values use [`VALUE_SALT`]) so a key can never pass as a value.
pub const KEY_SALT: u64 = 0x006b_6579;
pub const VALUE_SALT: u64 = 0x0076_616c;

/// Key `k` (0-based) as `len` bytes: first word `k + 1`.
pub fn key_bytes(k: u64, len: usize) -> Vec<u8> {
    tagged_bytes(k + 1, KEY_SALT, len)
}

/// Inverse of [`key_bytes`]; `Ok(None)` for all-zero bytes.
pub fn key_of(bytes: &[u8]) -> Result<Option<u64>, Malformed> {
    tag_of(bytes, KEY_SALT).map(|t| t.map(|t| t - 1))
}

pub fn value_bytes(tag: u64, len: usize) -> Vec<u8> {
    tagged_bytes(tag, VALUE_SALT, len)
}

pub fn value_of(bytes: &[u8]) -> Result<Option<u64>, Malformed> {
    tag_of(bytes, VALUE_SALT)
}

/// Rounds up to a multiple of 8.
pub fn r8(n: usize) -> u64 {
    (n as u64).div_ceil(8) * 8
}

/// Writes `bytes` into an image's copy-on-write layer (recovery's own writes, e.g. rolling back
/// an undo log; [`MemImage::cow_write`]): the image itself, shared with the crash checker, is
/// untouched.
pub fn image_write(img: &MemImage, addr: u64, bytes: &[u8]) {
    for (i, b) in bytes.iter().enumerate() {
        let a = addr + i as u64;
        let w = a & !7;
        let sh = (a - w) * 8;
        let mut cur = img.get(w).unwrap_or_default();
        cur.data = (cur.data & !(0xffu64 << sh)) | ((*b as u64) << sh);
        img.cow_write(w, cur);
    }
}

/// Every committed write to every PM word, in commit order, with the operation that made it.
#[derive(Default)]
pub struct History {
    words: FxHashMap<u64, Vec<(u32, u64)>>,
    /// What a check walks, built once on the first check (a crash checker checks thousands of
    /// images): the words in address order with their writes, flat, and the distinct operations.
    table: std::sync::OnceLock<HistoryTable>,
}

/// [`History`] laid out for checking: no hash look-up per word, and the count of verified
/// operations from the distinct operations instead of a set built per check.
struct HistoryTable {
    /// (word, end of its writes in `writes`), by address.
    words: Vec<(u64, u32)>,
    writes: Vec<(u32, u64)>,
    /// Every operation (not [`SETUP`]) that wrote a recorded word, once, ascending.
    ops: Vec<u32>,
}

impl History {
    /// Records the current heap value of each word in `words` as written by operation `op`
    /// (an index into the op log, or [`SETUP`]). Call at commit, in commit order.
    pub fn record(&mut self, op: u32, words: impl IntoIterator<Item = u64>, heap: &Heap) {
        self.table = Default::default();
        for w in words {
            let v = heap.read_u64(w, 8);
            let h = self.words.entry(w).or_default();
            if h.last() != Some(&(op, v)) {
                h.push((op, v));
            }
        }
    }

    fn table(&self) -> &HistoryTable {
        self.table.get_or_init(|| {
            let mut addrs: Vec<u64> = self.words.keys().copied().collect();
            addrs.sort_unstable();
            let mut t = HistoryTable { words: Vec::with_capacity(addrs.len()), writes: Vec::new(), ops: Vec::new() };
            for w in addrs {
                t.writes.extend_from_slice(&self.words[&w]);
                t.words.push((w, t.writes.len() as u32));
            }
            t.ops = t.writes.iter().map(|&(op, _)| op).filter(|&op| op != SETUP).collect();
            t.ops.sort_unstable();
            t.ops.dedup();
            t
        })
    }

    /// Checks every recorded word of `img`: it holds zero or a value written to it (nothing
    /// invented), and nothing older than the last write by a durable operation (nothing lost).
    /// Returns how many distinct durable writing operations were verified.
    pub fn check(
        &self,
        img: &MemImage,
        log: &OpLog,
        setup_dfence: Option<u64>,
        dfence_done: &dyn Fn(u64) -> bool,
    ) -> Result<u64, RecoveryError> {
        self.check_with(img, log, setup_dfence, &mut crate::recovery::Uncached { dfence_done })
    }

    /// [`History::check`] in pieces of [`HISTORY_PIECE_WORDS`] words (in address order, so the
    /// first failure is the same) and one piece counting the verified operations (it reads no
    /// word: it is reused until a dfence it saw pending completes). Every dfence answer comes
    /// from the pieces' own `dfence_done`, which the cache tracks.
    pub fn check_with(
        &self,
        img: &MemImage,
        log: &OpLog,
        setup_dfence: Option<u64>,
        pieces: &mut dyn PieceCache,
    ) -> Result<u64, RecoveryError> {
        let t = self.table();
        for (i, chunk) in t.words.chunks(HISTORY_PIECE_WORDS).enumerate() {
            let start = if i == 0 { 0 } else { t.words[i * HISTORY_PIECE_WORDS - 1].1 as usize };
            let out = piece(pieces, &[i as u64], |_, d| {
                HistoryPiece(check_words(chunk, &t.writes[start..], start, img, &|op| {
                    durable(op, log, setup_dfence, d)
                }))
            });
            if let Err(e) = &out.0 {
                return Err(e.clone());
            }
        }
        let n = piece(pieces, &[], |_, d| {
            VerifiedOps(t.ops.iter().filter(|&&op| durable(op, log, setup_dfence, d)).count() as u64)
        });
        Ok(n.0)
    }
}

/// Words of a [`History`] checked in one recovery piece.
pub const HISTORY_PIECE_WORDS: usize = 256;

/// A history piece's verdict (a type of its own: piece keys are per output type).
struct HistoryPiece(Result<(), RecoveryError>);

/// How many durable operations a history verified.
struct VerifiedOps(u64);

/// Whether operation `op` (or [`SETUP`]) was made durable by a completed dfence.
fn durable(op: u32, log: &OpLog, setup_dfence: Option<u64>, dfence_done: &dyn Fn(u64) -> bool) -> bool {
    if op == SETUP {
        setup_dfence.is_some_and(dfence_done)
    } else {
        log.ops.get(op as usize).and_then(|o| o.durable_at).is_some_and(dfence_done)
    }
}

/// Checks `words` ((word, end of its writes), ends counted from `base`) against `writes`
/// (starting at `base`): see [`History::check`].
fn check_words(
    words: &[(u64, u32)],
    writes: &[(u32, u64)],
    base: usize,
    img: &MemImage,
    durable: &dyn Fn(u32) -> bool,
) -> Result<(), RecoveryError> {
    let mut start = 0;
    for &(w, end) in words {
        let end = end as usize - base;
        let hist = &writes[start..end];
        start = end;
        let v = img.read_u64(w);
        // Repeated values are ambiguous: the newest occurrence is the generous reading.
        let pos = hist.iter().rposition(|&(_, x)| x == v);
        if pos.is_none() && v != 0 {
            return Err(RecoveryError::new(format!("word {w:#x} holds {v:#x}, which was never written there")));
        }
        if let Some(need) = hist.iter().rposition(|&(op, _)| durable(op)) {
            if pos.is_none_or(|p| p < need) {
                let op = hist[need].0;
                let who = if op == SETUP { "the initial population".to_string() } else { format!("operation #{op}") };
                return Err(RecoveryError::new(format!(
                    "word {w:#x}: {who} wrote {:#x} and was made durable by a completed dfence, but the recovered image holds {v:#x}",
                    hist[need].1
                )));
            }
        }
    }
    Ok(())
}
