//! Helpers shared by the WHISPER-like and Atlas workloads: self-checking key/value bytes and a
//! per-word write history for recovery checks.
//!
//! Why: recovery must tell "a value some operation wrote" from "garbage", and "at least as new as
//! the last durable write" from "lost". Keys and values are therefore derived from a tag (their
//! first word) so a torn or invented value is detected, and every committed write to a PM word
//! is recorded in commit order ([`History`]) so an image word can be placed in that order.

use crate::ctx::Heap;
use crate::recovery::{OpLog, RecoveryError};
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
    /// The recorded words in address order (sorted once, on the first check; a crash checker
    /// checks thousands of images).
    sorted: std::sync::OnceLock<Vec<u64>>,
}

impl History {
    /// Records the current heap value of each word in `words` as written by operation `op`
    /// (an index into the op log, or [`SETUP`]). Call at commit, in commit order.
    pub fn record(&mut self, op: u32, words: impl IntoIterator<Item = u64>, heap: &Heap) {
        self.sorted = Default::default();
        for w in words {
            let v = heap.read_u64(w, 8);
            let h = self.words.entry(w).or_default();
            if h.last() != Some(&(op, v)) {
                h.push((op, v));
            }
        }
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
        let durable = |op: u32| -> bool {
            if op == SETUP {
                setup_dfence.is_some_and(dfence_done)
            } else {
                log.ops.get(op as usize).and_then(|o| o.durable_at).is_some_and(dfence_done)
            }
        };
        let mut verified: rustc_hash::FxHashSet<u32> = Default::default();
        let sorted = self.sorted.get_or_init(|| {
            let mut v: Vec<u64> = self.words.keys().copied().collect();
            v.sort_unstable();
            v
        });
        for (w, hist) in sorted.iter().filter_map(|w| self.words.get_key_value(w)) {
            let w = *w;
            let v = img.read_u64(w);
            // Repeated values are ambiguous: the newest occurrence is the generous reading.
            let pos = hist.iter().rposition(|&(_, x)| x == v);
            if pos.is_none() && v != 0 {
                return Err(RecoveryError::new(format!("word {w:#x} holds {v:#x}, which was never written there")));
            }
            if let Some(need) = hist.iter().rposition(|&(op, _)| durable(op)) {
                if pos.is_none_or(|p| p < need) {
                    let op = hist[need].0;
                    let who =
                        if op == SETUP { "the initial population".to_string() } else { format!("operation #{op}") };
                    return Err(RecoveryError::new(format!(
                        "word {w:#x}: {who} wrote {:#x} and was made durable by a completed dfence, but the recovered image holds {v:#x}",
                        hist[need].1
                    )));
                }
            }
            for &(op, _) in hist {
                if op != SETUP && durable(op) {
                    verified.insert(op);
                }
            }
        }
        Ok(verified.len() as u64)
    }
}
