//! A per-thread persistent undo log: the failure-atomicity mechanism shared by the Atlas
//! workloads (FASEs delimited by locks) and the WHISPER ones written for PMDK/N-Store
//! (undo-logged transactions).
//!
//! Pattern reproduced (Atlas `nvm_store` logging; PMDK `TX_ADD`; N-Store's opt-WAL before-image
//! log): before a PM range is modified its old contents are written to a log entry, the entry is
//! persisted (`ofence`) and only then the data store is made. At commit the data is ordered
//! (`ofence`) before the log is truncated (header cleared); the caller then issues the `dfence`.
//!
//! Layout (per thread, `LOG_BYTES`): header line {active txid, linked entry count}; entries from
//! offset 64, each {txid, addr, len | kind << 56, checksum, old bytes padded to 8}. The header's
//! txid is written together with the first entry (same epoch): a crash image with data modified
//! always has that entry and the header. The checksum (as PMDK's ulog checksums) lets recovery
//! recognise the torn last entry, whose data store cannot have happened. In `linked` mode
//! (N-Store's plist append) the count word is stored and persisted after each entry, and only
//! entries below the count are rolled back.
//!
//! Recovery ([`rollback`]) applies the active transaction's entries in reverse order, as Atlas's
//! and PMDK's recovery do, then clears the header.

use crate::ctx::Ctx;
use crate::recovery::RecoveryError;
use crate::whisper::common::image_write;
use pmsim_trace::MemImage;
use std::collections::BTreeSet;

/// Bytes of log space per thread.
pub const LOG_BYTES: u64 = 256 << 10;
const ENTRY_HDR: u64 = 32;

/// Entry kinds: data (undo record) and Atlas's lock acquire/release records.
pub const KIND_DATA: u64 = 0;
pub const KIND_ACQUIRE: u64 = 1;
pub const KIND_RELEASE: u64 = 2;

/// Checksum of an entry (txid, address, length | kind, old bytes). Every word goes through a
/// full-avalanche mix (the splitmix64 finaliser) before the next is combined: a torn entry is
/// the current transaction's first line piece next to a stale one of an older entry at the same
/// offset, so structured differences between two entries (a txid and an address differing in a
/// few low bits) must not cancel. They did when the txid seeded the state by XOR and the address
/// was XORed in before any mixing: the sum depended on `txid ^ addr` only, and a stale tail could
/// validate a torn entry, whose stale old bytes recovery then wrote back over durable data.
fn checksum(txid: u64, addr: u64, lk: u64, data: &[u8]) -> u64 {
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for w in [txid, addr, lk].into_iter().chain(data.chunks(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    })) {
        h = mix(h.wrapping_add(0x9E37_79B9_7F4A_7C15) ^ w);
    }
    h | 1
}

/// Allocates one log per thread; returns their base addresses.
pub fn alloc_logs(heap: &mut crate::Heap, threads: usize) -> Vec<u64> {
    (0..threads).map(|_| heap.alloc_pm(LOG_BYTES, 4096)).collect()
}

/// One undo-logged transaction (PMDK tx) or failure-atomic section (Atlas FASE).
pub struct Tx {
    base: u64,
    txid: u64,
    off: u64,
    entries: u64,
    /// Log each range once per transaction (PMDK `TX_ADD`); Atlas logs every store.
    dedup: bool,
    /// N-Store: persist an entry count after each entry (plist append).
    linked: bool,
    logged: Vec<(u64, u64)>,
    fresh: Vec<(u64, u64)>,
    written: BTreeSet<u64>,
}

fn covered(ranges: &[(u64, u64)], a: u64, len: u64) -> bool {
    ranges.iter().any(|&(s, l)| a >= s && a + len <= s + l)
}

impl Tx {
    /// Starts a transaction in the log at `base`; `txid` must be unique and non-zero.
    pub fn begin(base: u64, txid: u64, dedup: bool, linked: bool) -> Tx {
        Tx {
            base,
            txid,
            off: 0,
            entries: 0,
            dedup,
            linked,
            logged: Vec::new(),
            fresh: Vec::new(),
            written: BTreeSet::new(),
        }
    }

    /// Marks `[addr, addr+len)` as allocated by this transaction: stores to it need no undo
    /// record (nothing reachable points to it if the transaction rolls back).
    pub fn fresh(&mut self, addr: u64, len: u64) {
        self.fresh.push((addr, len));
    }

    fn entry(&mut self, c: &mut Ctx<'_>, kind: u64, addr: u64, old: &[u8]) {
        let lk = old.len() as u64 | (kind << 56);
        let mut e = Vec::with_capacity(ENTRY_HDR as usize + old.len() + 8);
        for w in [self.txid, addr, lk, checksum(self.txid, addr, lk, old)] {
            e.extend_from_slice(&w.to_le_bytes());
        }
        e.extend_from_slice(old);
        e.resize(e.len().div_ceil(8) * 8, 0);
        let at = self.base + 64 + self.off;
        assert!(self.off + e.len() as u64 <= LOG_BYTES - 64, "undo log overflow (transaction too large)");
        if self.entries == 0 {
            // Header and first entry share an epoch: both precede the first data store.
            c.store_u64(self.base, self.txid);
        }
        c.store(at, &e);
        self.off += e.len() as u64;
        self.entries += 1;
        c.ofence();
        if self.linked {
            c.store_u64(self.base + 8, self.entries);
            c.ofence();
        }
    }

    /// Logs the current contents of `[addr, addr+len)` (reads them: the loads are emitted).
    pub fn add(&mut self, c: &mut Ctx<'_>, addr: u64, len: u64) {
        if covered(&self.fresh, addr, len) || (self.dedup && covered(&self.logged, addr, len)) {
            return;
        }
        let old = c.load_bytes(addr, len as usize);
        self.entry(c, KIND_DATA, addr, &old);
        self.logged.push((addr, len));
    }

    /// Atlas: records a lock acquire/release in the log (happens-before tracking).
    pub fn lock_record(&mut self, c: &mut Ctx<'_>, kind: u64, lock: u64) {
        self.entry(c, kind, lock, &[]);
    }

    /// A logged store: undo record first (unless covered), then the data.
    pub fn write(&mut self, c: &mut Ctx<'_>, addr: u64, bytes: &[u8]) {
        self.add(c, addr, bytes.len() as u64);
        c.store(addr, bytes);
        let first = addr & !7;
        let last = (addr + bytes.len() as u64 - 1) & !7;
        self.written.extend((first..=last).step_by(8));
    }

    pub fn write_u64(&mut self, c: &mut Ctx<'_>, addr: u64, v: u64) {
        self.write(c, addr, &v.to_le_bytes());
    }

    /// Commits: data ordered before the log truncation. Returns the PM words written. The
    /// caller issues the `dfence` (where the original system makes the transaction durable).
    pub fn commit(self, c: &mut Ctx<'_>) -> BTreeSet<u64> {
        c.ofence();
        if self.entries > 0 {
            c.store_u64(self.base, 0);
            if self.linked {
                c.store_u64(self.base + 8, 0);
            }
        }
        self.written
    }
}

/// Recovery: rolls back the active transaction of every log in `bases`, newest entry first, and
/// truncates the logs, in `img`'s copy-on-write layer (the caller clears it). Returns the number
/// of undo records applied.
pub fn rollback(img: &MemImage, bases: &[u64]) -> Result<u64, RecoveryError> {
    let mut applied = 0;
    for &base in bases {
        let active = img.read_u64(base);
        if active == 0 {
            continue;
        }
        let limit = img.read_u64(base + 8);
        let mut undo: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut off = 0u64;
        let mut n = 0u64;
        while off + ENTRY_HDR <= LOG_BYTES - 64 {
            let at = base + 64 + off;
            let (txid, addr, lk, sum) =
                (img.read_u64(at), img.read_u64(at + 8), img.read_u64(at + 16), img.read_u64(at + 24));
            let len = lk & ((1 << 56) - 1);
            if txid != active || len > 4096 {
                break;
            }
            let old = img.read_bytes(at + ENTRY_HDR, len as usize);
            if checksum(txid, addr, lk, &old) != sum {
                if limit > n {
                    return Err(RecoveryError::new(format!(
                        "log {base:#x}: entry {n} of tx {active} is linked but corrupt"
                    )));
                }
                break; // torn last entry: its data store never happened
            }
            if limit > 0 && n >= limit {
                break; // written but never linked: N-Store ignores it
            }
            if lk >> 56 == KIND_DATA {
                undo.push((addr, old));
            }
            off += ENTRY_HDR + len.div_ceil(8) * 8;
            n += 1;
        }
        for (addr, old) in undo.into_iter().rev() {
            image_write(img, addr, &old);
            applied += 1;
        }
        image_write(img, base, &[0u8; 16]);
    }
    Ok(applied)
}

/// Atlas: the outermost lock acquire opens a failure-atomic section (FASE) and is logged.
pub fn fase_begin(c: &mut Ctx<'_>, lock: u64, log: u64, txid: u64) -> Tx {
    c.lock(lock);
    let mut tx = Tx::begin(log, txid, false, false);
    tx.lock_record(c, KIND_ACQUIRE, lock);
    tx
}

/// Atlas: the outermost unlock logs the release, orders the FASE's data and truncates the log
/// (Atlas prunes asynchronously; here at the unlock). The caller then ends the operation, issues
/// the `dfence` that makes the FASE durable (Atlas flushes at FASE end) and unlocks: the end
/// marker precedes the dfence so the op log ties the operation to it.
pub fn fase_commit(c: &mut Ctx<'_>, mut tx: Tx, lock: u64) -> BTreeSet<u64> {
    tx.lock_record(c, KIND_RELEASE, lock);
    tx.commit(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A torn entry (this transaction's txid, address and length next to an older entry's
    /// checksum and old bytes) must fail the checksum: entries whose txid and address differ only
    /// in low bits, as consecutive transactions' entries at one log offset do, never share a sum.
    #[test]
    fn structured_neighbours_do_not_share_a_checksum() {
        let old = 2u64.to_le_bytes();
        let mut seen = std::collections::HashMap::new();
        for txid in 1..=256u64 {
            for slot in 0..512u64 {
                let addr = 0x1_0021_5000 + 8 * slot;
                if let Some(prev) = seen.insert(checksum(txid, addr, 8, &old), (txid, addr)) {
                    panic!("({txid:#x}, {addr:#x}) and {prev:x?} share a checksum");
                }
            }
        }
        // The regression: txid ^ addr equal.
        assert_ne!(checksum(0x1e, 0x1_0021_50b0, 8, &old), checksum(0x26, 0x1_0021_5088, 8, &old));
    }
}
