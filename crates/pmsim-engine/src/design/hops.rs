//! HOPS (Nalli et al., ASPLOS'17) as evaluated in the ASAP paper: per-core persist buffers with
//! conservative flushing — an epoch flushes only after every earlier epoch of its thread is
//! acknowledged — and cross-thread dependencies resolved by polling a global timestamp register
//! (every `hops.poll_cycles`, `hops.access_cycles` per read, the ASAP authors' correction of the
//! original's every-cycle polling). `hops-ep` tracks dependencies through coherence conflicts;
//! `hops-rp` really is release persistency: only acquires that synchronise with a release.
//! The mechanism lives in [`super::buffered`], shared with ASAP.

use super::buffered::{Broken, Buffered, Policy};
use super::Promise;
use crate::config::Config;

pub fn hops_ep(cfg: &Config) -> Buffered {
    Buffered::new("hops-ep", Policy::Hops, Promise::Ep, cfg, Broken::default())
}

pub fn hops_rp(cfg: &Config) -> Buffered {
    Buffered::new("hops-rp", Policy::Hops, Promise::Rp, cfg, Broken::default())
}

/// TEST ONLY: HOPS whose epochs flush without waiting for their cross-thread dependencies.
pub fn broken_no_cross_thread_wait(cfg: &Config) -> Buffered {
    Buffered::new(
        "broken-hops-ep-no-cross-thread-wait",
        Policy::Hops,
        Promise::Ep,
        cfg,
        Broken { no_cross_thread_wait: true, ..Broken::default() },
    )
}

/// TEST ONLY: HOPS (RP) that takes a `clflush` as a plain flush, not as an ofence after it.
pub fn broken_clflush_unordered(cfg: &Config) -> Buffered {
    Buffered::new(
        "broken-hops-rp-clflush-unordered",
        Policy::Hops,
        Promise::Rp,
        cfg,
        Broken { clflush_unordered: true, ..Broken::default() },
    )
}
