//! ASAP (Yadalam et al., HPCA'22): eager flushing with speculative updates at the memory
//! controllers. Persist buffer and epoch table per core; undo and delay records in a recovery
//! table per MC, handled exactly as Table I; undo records are created by *reading* the old line
//! from PM (a real media read). The paper does not say when such a flush is acknowledged; the
//! record is in the ADR domain and holds the write until the read returns, so by default the MC
//! acknowledges at once (`rt.early_ack=accept`; `after_read` waits for the read and the WPQ), and an
//! epoch's commit completes only once every write its records still hold is in the WPQ. Commits
//! go out in epoch order, only to the MCs that received early
//! flushes, and delay records are applied through the WPQ before the commit is acknowledged; CDR
//! messages resolve cross-thread dependencies; a NACK (table full) drops the PB back to safe
//! flushes until that epoch commits; a write-back buffer holds private evictions and a counting
//! Bloom filter catches LLC evictions of NACKed lines. On a crash the WPQ drains, then the undo
//! records are written back. The mechanism lives in [`super::buffered`] and [`super::rt`].

use super::buffered::{Broken, Buffered, Policy};
use super::Promise;
use crate::config::Config;

pub fn asap_ep(cfg: &Config) -> Buffered {
    Buffered::new("asap-ep", Policy::Asap, Promise::Ep, cfg, Broken::default())
}

pub fn asap_rp(cfg: &Config) -> Buffered {
    Buffered::new("asap-rp", Policy::Asap, Promise::Rp, cfg, Broken::default())
}

/// TEST ONLY: early flushes overwrite memory without keeping undo records.
pub fn broken_no_undo(cfg: &Config) -> Buffered {
    Buffered::new(
        "broken-asap-rp-no-undo",
        Policy::Asap,
        Promise::Rp,
        cfg,
        Broken { no_undo: true, ..Broken::default() },
    )
}

/// TEST ONLY: early flushes that collide with an undo record overwrite memory instead of
/// waiting in a delay record (the write collision of Fig 5).
pub fn broken_no_delay(cfg: &Config) -> Buffered {
    Buffered::new(
        "broken-asap-ep-no-delay",
        Policy::Asap,
        Promise::Ep,
        cfg,
        Broken { no_delay: true, ..Broken::default() },
    )
}

/// TEST ONLY: an epoch counts as committed as soon as its commit messages are sent.
pub fn broken_commit_before_ack(cfg: &Config) -> Buffered {
    Buffered::new(
        "broken-asap-rp-commit-before-ack",
        Policy::Asap,
        Promise::Rp,
        cfg,
        Broken { commit_before_ack: true, ..Broken::default() },
    )
}
