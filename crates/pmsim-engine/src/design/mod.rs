//! The persist path as a run-time choice: one trait, one module per design.
//!
//! A *design* decides what happens to PM stores and fences between the core and the NVM, what
//! its persistence domain holds at a crash, and which persistency model it promises (docs/design.md
//! §5). The engine calls it at a handful of points — a store performing, a fence, flush or
//! release reaching the head of the store buffer, an acquire, a coherence conflict, an LLC
//! eviction, and the design's own scheduled events — and the design acts through the
//! [`Machine`]: scheduling events, sending writes and reads to memory controllers, completing the
//! store-buffer entry it held. Adding a design means adding a module and a line to [`DESIGNS`];
//! the engine does not change.

pub mod asap;
pub mod baseline;
pub mod bbb;
pub mod buffered;
pub mod delegated;
pub mod eadr;
mod flush;
pub mod hops;
pub mod pb;
pub mod persist_sched;
pub mod rt;
mod wc;

use crate::machine::{DesignEv, Machine, StallCause};
use crate::mem::coherence::Conflict;
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;
use std::collections::BTreeMap;

/// The persistency model a design promises; the checker verifies crash images against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Promise {
    /// Every performed store survives (eADR, BBB): every model holds.
    All,
    Strict,
    Ep,
    Rp,
    /// x86 persistency (Px86): what a legacy x86 program run as written gets (docs/design.md §5).
    X86,
}

impl Promise {
    pub fn name(self) -> &'static str {
        match self {
            Promise::All => "all",
            Promise::Strict => "strict",
            Promise::Ep => "ep",
            Promise::Rp => "rp",
            Promise::X86 => "x86",
        }
    }
}

/// Whether the engine may retire a store-buffer entry the design was shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Done,
    /// The design keeps the entry at the head and calls [`Machine::sb_head_done`] later.
    Wait(StallCause),
}

/// A PM store as it performs (becomes visible): the words it wrote, with their identities.
#[derive(Clone, Copy, Debug)]
pub struct PmStore {
    pub gid: u64,
    pub data: LineData,
    pub nontemporal: bool,
    /// The store is the write of a `release` or `rmw`.
    pub sync: bool,
}

/// Design-specific statistics, merged into the run's stats under their own names.
pub type DesignStats = BTreeMap<String, f64>;

/// One persistence design.
pub trait Design: Send {
    fn name(&self) -> &'static str;
    fn promise(&self) -> Promise;

    /// The trace is a legacy x86 program ([`pmsim_trace::Dialect::X86`]: its own flushes and
    /// fences, no `ofence`/`dfence`). A design that executes x86 persistence instructions
    /// natively then runs it as written, adding none of the flushes by which it maps the
    /// design-neutral primitives; the others keep their mapping of legacy code.
    fn run_as_written(&mut self) {}

    /// Does the design map `sfence`/`mfence` onto its own barriers in every trace (a durable one
    /// after a flush or a non-temporal PM store, docs/design.md §3), not only in a legacy one?
    /// The crash check then holds it to that mapping in a mixed trace too; a design that runs
    /// them literally (the baseline) is not.
    fn maps_x86_fences(&self) -> bool {
        false
    }

    /// Does the core wait for this fence to retire from the store buffer?
    fn fence_blocks_core(&self, kind: Kind) -> bool;

    /// Must a load wait while an ofence/dfence is still in the store buffer? Under epoch
    /// persistency a barrier orders the loads after it too; a load passing a buffered barrier
    /// would attach a remote conflict to an epoch that lacks the stores before the barrier.
    fn loads_wait_for_barriers(&self) -> bool {
        false
    }

    /// Does the design take a `clflush` as an ofence after it (x86 orders a clflush with the
    /// thread's later stores)? Then, with [`Design::loads_wait_for_barriers`], a load waits for
    /// a buffered `clflush` as for an ofence.
    fn clflush_is_barrier(&self) -> bool {
        false
    }

    /// May a PM store to `line` perform now? If not, the drain stalls with the returned cause until
    /// the design calls [`Machine::resume_drain`].
    fn admit_store(&mut self, _m: &mut Machine, _core: usize, _line: u64) -> Result<(), StallCause> {
        Ok(())
    }

    /// [`Design::admit_store`] for a non-temporal store (a design with write-combining buffers
    /// also needs one free, `design/wc.rs`).
    fn admit_nt_store(&mut self, m: &mut Machine, core: usize, line: u64) -> Result<(), StallCause> {
        self.admit_store(m, core, line)
    }

    /// May a store to volatile memory (a DRAM word, a volatile lock's release) perform now? As
    /// [`Design::admit_store`]; a design that orders stores by stalling them (the baseline's
    /// wait for an acquired lock's write-back) must stall these too, or order would not carry
    /// through a volatile lock to a third thread.
    fn admit_volatile_store(&mut self, _m: &mut Machine, _core: usize) -> Result<(), StallCause> {
        Ok(())
    }

    /// A PM store performed.
    fn on_store(&mut self, m: &mut Machine, core: usize, st: &PmStore);

    /// An `ofence`/`dfence`/`sfence`/`mfence` reached the head of the store buffer.
    fn on_fence(&mut self, m: &mut Machine, core: usize, kind: Kind, gid: u64) -> Step;

    /// A `release` (or `rmw`) reached the head, before its write performs.
    fn on_release(&mut self, _m: &mut Machine, _core: usize, _gid: u64) -> Step {
        Step::Done
    }

    /// A `release` (or `rmw`) performed its write (PM or volatile).
    fn on_released(&mut self, _m: &mut Machine, _core: usize) {}

    /// An `acquire` (or `rmw`) performed; `releaser` is the core whose release (or rmw) on the same
    /// address it synchronises with, if another core's.
    fn on_acquire(&mut self, _m: &mut Machine, _core: usize, _releaser: Option<usize>) {}

    /// [`Design::on_acquire`] with the synchronisation address (the engine calls this one); a
    /// design that must act on the synchronisation variable itself overrides it.
    fn on_acquire_at(&mut self, m: &mut Machine, core: usize, _addr: u64, releaser: Option<usize>) {
        self.on_acquire(m, core, releaser)
    }

    /// A `clwb`/`clflushopt`/`clflush` reached the head.
    fn on_flush(&mut self, m: &mut Machine, core: usize, kind: Kind, line: u64) -> Step;

    /// `strand` executed.
    fn on_strand(&mut self, _m: &mut Machine, _core: usize) {}

    /// The directory saw `requester` access `c.line` (PM or not) after `c.source` wrote or read it.
    fn on_conflict(&mut self, _m: &mut Machine, _requester: usize, _c: &Conflict) {}

    /// A PM line left the LLC; `dirty` if it held newer data than memory.
    fn on_llc_evict(&mut self, m: &mut Machine, line: u64, dirty: bool);

    /// The run has `threads` trace threads, on cores `0..threads` (before any event).
    fn set_threads(&mut self, _threads: usize) {}

    /// A dirty PM line left `core`'s private caches. Returns whether the eviction must wait
    /// (ASAP/HOPS: the write-back buffer is full): the access that caused it then waits, and
    /// the design releases it with [`Machine::wake_held`] (and lets a refused store in again).
    fn on_private_evict(&mut self, _m: &mut Machine, _core: usize, _line: u64) -> bool {
        false
    }

    /// Whether `core`'s access that evicted the PM `line` from the LLC must wait for the
    /// eviction, and for what (after [`Design::on_llc_evict`]): ASAP's `Nack` (the MC's Bloom
    /// filter holds the line of a NACKed flush still in a PB), released as
    /// [`Design::on_private_evict`]'s holds are; a design writing the line back, `WpqFull` while
    /// its MC has writes waiting for the WPQ ([`Machine::hold_for_mc`]).
    fn holds_llc_eviction(&mut self, _m: &mut Machine, _core: usize, _line: u64, _dirty: bool) -> Option<StallCause> {
        None
    }

    /// `core`'s thread ended and its store buffer drained (a design with write-combining buffers
    /// sends what they hold, as the hardware eventually does).
    fn on_core_finished(&mut self, _m: &mut Machine, _core: usize) {}

    /// One of the design's own events.
    fn on_event(&mut self, m: &mut Machine, ev: DesignEv);

    /// Work still in flight (the run ends when the cores are done and this is false).
    fn busy(&self, m: &Machine) -> bool;

    /// Writes the design's part of the persistence domain at a crash, in the order the hardware
    /// applies it, on top of NVM and the WPQs.
    fn crash_writes(&self, m: &Machine, out: &mut Vec<LineData>);

    /// Whether the crash image is always coherent memory (every performed store survives, as
    /// under eADR); the image tracker then follows only the lines stores change.
    fn crash_image_is_coherent(&self) -> bool {
        false
    }

    /// Design statistics (stable names).
    fn stats(&self, m: &Machine, out: &mut DesignStats);

    /// A one-line description of a stuck core's design state (for the watchdog).
    fn describe_core(&self, _core: usize) -> String {
        String::new()
    }

    /// Whether the design has MC-side remote queue entries (BROI's remote BROI queue) that the
    /// network's remote persist buffer submits to ([`Design::submit_remote`]); if not, remote
    /// lines go straight to their MC's write queue (`net/mod.rs`).
    fn has_remote_queue(&self) -> bool {
        false
    }

    /// A remote persistent write (one line of an `rdma_pwrite` region) reaching MC `mc` when the
    /// design has no remote queue; `accepted` once the persistence domain holds it. Designs
    /// with MC-side state pass it through it, as any write reaching the MC: ASAP's recovery
    /// table takes it as a safe write (Table I), so an undo record never rolls it back.
    fn write_remote(&mut self, m: &mut Machine, mc: usize, data: LineData, accepted: DesignEv) {
        m.mc_write(mc, data, Some(accepted));
    }

    /// A remote persistent write (one line of an `rdma_pwrite` region) entering remote entry
    /// `channel`; `new_region` opens a new barrier region. The design schedules `done` once the
    /// line is persisted. On [`RemoteSubmit::Full`] nothing is taken and `room` is scheduled
    /// once the entry frees a unit.
    fn submit_remote(
        &mut self,
        _m: &mut Machine,
        _channel: usize,
        _data: LineData,
        _new_region: bool,
        _done: DesignEv,
        _room: DesignEv,
    ) -> RemoteSubmit {
        RemoteSubmit::Direct
    }
}

/// What became of a remote persistent write offered to [`Design::submit_remote`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteSubmit {
    /// Queued; `done` follows.
    Taken,
    /// The remote entry has no room; `room` follows.
    Full,
    /// The design has no remote queue: the caller writes to the MC itself.
    Direct,
}

/// A design's name, what it is, and how to build it.
pub struct DesignInfo {
    pub name: &'static str,
    pub about: &'static str,
    pub build: fn(&crate::config::Config) -> Box<dyn Design>,
}

/// Every design selectable at run time.
pub static DESIGNS: &[DesignInfo] = &[
    DesignInfo {
        name: "baseline",
        about: "Intel x86: clwb of the thread's dirty PM lines + stalling sfence at ofence/dfence/release",
        build: |c| Box::new(baseline::Baseline::new(c)),
    },
    DesignInfo {
        name: "eadr",
        about: "caches in the persistence domain (battery); fences free",
        build: |c| Box::new(eadr::Eadr::new(c)),
    },
    DesignInfo {
        name: "bbb",
        about: "battery-backed persist buffer per core; stores persistent on entry",
        build: |c| Box::new(bbb::Bbb::new(c)),
    },
    DesignInfo {
        name: "hops-ep",
        about: "HOPS: persist buffers, conservative flushing, polled global TS; epoch persistency",
        build: |c| Box::new(hops::hops_ep(c)),
    },
    DesignInfo { name: "hops-rp", about: "HOPS with release persistency", build: |c| Box::new(hops::hops_rp(c)) },
    DesignInfo {
        name: "asap-ep",
        about: "ASAP: eager early flushing, undo/delay records at the MCs, CDR messages; epoch persistency",
        build: |c| Box::new(asap::asap_ep(c)),
    },
    DesignInfo { name: "asap-rp", about: "ASAP with release persistency", build: |c| Box::new(asap::asap_rp(c)) },
    DesignInfo {
        name: "delegated",
        about: "buffered epoch persistency with delegated ordering: per-core persist buffers, barrier epochs drained in order at the MC (BROI seed's Epoch baseline)",
        build: |c| Box::new(delegated::Delegated::new("delegated", "delegated", c, false)),
    },
    DesignInfo {
        name: "broi",
        about: "delegated ordering with the BLP-aware BROI controller (Eq. 2 priority, one candidate per bank, local before remote); epoch persistency",
        build: |c| Box::new(delegated::Delegated::new("broi", "broi", c, false)),
    },
];

/// Test-only broken variants (reachable only by names starting with `broken-`).
pub static BROKEN: &[DesignInfo] = &[
    DesignInfo {
        name: "broken-eadr-no-battery",
        about: "TEST ONLY: eADR whose caches are lost at a crash",
        build: |c| Box::new(eadr::Eadr::broken_no_battery(c)),
    },
    DesignInfo {
        name: "broken-bbb-volatile",
        about: "TEST ONLY: BBB whose persist buffers are lost at a crash",
        build: |c| Box::new(bbb::Bbb::broken_volatile(c)),
    },
    DesignInfo {
        name: "broken-baseline-no-sfence-stall",
        about: "TEST ONLY: baseline whose sfence does not wait for the flush ACKs",
        build: |c| Box::new(baseline::Baseline::broken_no_stall(c)),
    },
    DesignInfo {
        name: "broken-asap-rp-no-undo",
        about: "TEST ONLY: ASAP without undo records",
        build: |c| Box::new(asap::broken_no_undo(c)),
    },
    DesignInfo {
        name: "broken-asap-ep-no-delay",
        about: "TEST ONLY: ASAP without delay records",
        build: |c| Box::new(asap::broken_no_delay(c)),
    },
    DesignInfo {
        name: "broken-asap-rp-commit-before-ack",
        about: "TEST ONLY: ASAP committing before the commit ACKs",
        build: |c| Box::new(asap::broken_commit_before_ack(c)),
    },
    DesignInfo {
        name: "broken-hops-ep-no-cross-thread-wait",
        about: "TEST ONLY: HOPS without the cross-thread wait",
        build: |c| Box::new(hops::broken_no_cross_thread_wait(c)),
    },
    DesignInfo {
        name: "broken-hops-rp-clflush-unordered",
        about: "TEST ONLY: HOPS (RP) whose clflush orders nothing (no ofence after it)",
        build: |c| Box::new(hops::broken_clflush_unordered(c)),
    },
    DesignInfo {
        name: "broken-delegated-no-dep-wait",
        about: "TEST ONLY: delegated releasing an epoch before the other threads' epochs it depends on persisted",
        build: |c| Box::new(delegated::Delegated::broken_no_dep_wait(c)),
    },
    DesignInfo {
        name: "broken-broi-cross-barrier",
        about: "TEST ONLY: BROI whose Ready-SET includes the Next-SET (requests pass their thread's barrier)",
        build: |c| Box::new(delegated::Delegated::new("broken-broi-cross-barrier", "broi", c, true)),
    },
];

/// [`Design::holds_llc_eviction`] of a design that writes dirty LLC victims back to their MC
/// (baseline, eADR): the access that evicted a dirty `line` waits while that MC has writes
/// waiting for WPQ entries, since the victim has nowhere to go (`stall_cycles.wpq_full`).
pub(crate) fn hold_writeback_for_mc(m: &mut Machine, core: usize, line: u64, dirty: bool) -> Option<StallCause> {
    let mc = m.mc_of(line);
    if !dirty || !m.mc_backlogged(mc) {
        return None;
    }
    m.hold_for_mc(core, mc);
    Some(StallCause::WpqFull)
}

/// [`build`] for a trace in `dialect` (see [`Design::run_as_written`]).
pub fn for_trace(
    name: &str,
    cfg: &crate::config::Config,
    allow_broken: bool,
    dialect: pmsim_trace::Dialect,
) -> Result<Box<dyn Design>, String> {
    let mut d = build(name, cfg, allow_broken)?;
    if dialect == pmsim_trace::Dialect::X86 {
        d.run_as_written();
    }
    Ok(d)
}

/// Looks a design up by name (`allow_broken` admits the test-only variants).
pub fn build(name: &str, cfg: &crate::config::Config, allow_broken: bool) -> Result<Box<dyn Design>, String> {
    crate::net::check_allowed(cfg, allow_broken)?;
    let found = DESIGNS.iter().chain(if allow_broken { BROKEN } else { &[] }).find(|d| d.name == name);
    match found {
        Some(d) => Ok((d.build)(cfg)),
        None => {
            let names: Vec<&str> = DESIGNS.iter().map(|d| d.name).collect();
            let hint = if !allow_broken && BROKEN.iter().any(|d| d.name == name) {
                " (a broken variant is test-only: `pmsim run` and `pmsim crash` take it with --allow-broken-designs)"
            } else {
                ""
            };
            Err(format!("unknown design '{name}' (valid: {}){hint}", names.join(", ")))
        }
    }
}
