//! One model's analysis state, stepped event by event in global order.
//!
//! Why it is shaped like this: the pass must run at tens of millions of events per second over
//! traces larger than memory, so the state is plain data keyed by block (one hash lookup per
//! touched tracking block, one per written atomic block) and per thread, with no allocation per
//! event. The rules it implements are in the crate docs (docs/design.md §8).

use crate::config::{Config, Model};
use crate::frontier::Frontier;
use crate::paged::PagedMap;
use pmsim_trace::{Event, Kind, PmRange};

/// Conflict state of one tracking block.
#[derive(Clone, Copy, Default)]
struct Block {
    /// Persists preceding (or performed by) the last store to the block: what a load follows.
    last_store: Frontier,
    /// Persists preceding any access to the block so far: what a store follows.
    any: Frontier,
}

/// Program-order state of one thread.
#[derive(Clone, Copy, Default)]
struct Thread {
    /// Persists every later event of the thread must follow (strict: all earlier events; epoch
    /// and strand: events before the last persist barrier, within the strand).
    ordered: Frontier,
    /// Persists preceding the events since the last barrier (epoch/strand).
    epoch: Frontier,
    /// A flush or a non-temporal PM store since the thread's last x86 fence point (`sfence`,
    /// `mfence`, `rmw`, `release`): a locked instruction now orders, as the designs map it.
    flushed: bool,
}

/// Raw results of one model's pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub critical_path: u64,
    pub persists: u64,
    pub ops: u64,
    pub events: u64,
}

#[derive(Clone)]
pub struct Analyzer {
    model: Model,
    /// `sfence`/`mfence` are persist barriers: set on the copy that analyses a legacy x86
    /// trace ([`crate::run`]), where they are the program's only ordering.
    x86_fences: bool,
    coalesce: bool,
    g_shift: u32,
    a_shift: u32,
    pm: Vec<PmRange>,
    blocks: PagedMap<Block>,
    /// Last persist per atomic block (its level and identity).
    atoms: PagedMap<Frontier>,
    threads: Vec<Thread>,
    next_id: u64,
    counts: Counts,
}

impl Analyzer {
    /// `cfg` must be valid ([`Config::validate`]).
    pub fn new(model: Model, cfg: &Config, pm: &[PmRange], threads: usize) -> Analyzer {
        Analyzer {
            model,
            x86_fences: false,
            coalesce: cfg.coalesce,
            g_shift: cfg.track_bytes.trailing_zeros(),
            a_shift: cfg.atomic_bytes.trailing_zeros(),
            pm: pm.to_vec(),
            blocks: PagedMap::default(),
            atoms: PagedMap::default(),
            threads: vec![Thread::default(); threads],
            next_id: 1,
            counts: Counts::default(),
        }
    }

    pub fn model(&self) -> Model {
        self.model
    }

    /// This analyzer's state with `sfence`/`mfence` as persist barriers from now on.
    pub fn with_x86_fences(&self) -> Analyzer {
        Analyzer { x86_fences: true, ..self.clone() }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Chunks of tracking blocks and of atomic blocks held (the memory bound).
    pub fn chunks_held(&self) -> (usize, usize) {
        (self.blocks.chunks(), self.atoms.chunks())
    }

    fn thread(&mut self, t: usize) -> &mut Thread {
        if t >= self.threads.len() {
            self.threads.resize(t + 1, Thread::default());
        }
        &mut self.threads[t]
    }

    /// Bytes an event accesses (an acquire/release its SIZE, 8 by default: docs/design.md §8).
    #[inline(always)]
    fn span(ev: &Event) -> (u64, u64) {
        let size = match ev.kind {
            Kind::RdmaPwrite => ev.data.max(1),
            _ => (ev.size as u64).max(1),
        };
        (ev.addr, ev.addr + size - 1)
    }

    #[inline]
    pub fn step(&mut self, t: usize, ev: &Event) {
        self.counts.events += 1;
        match ev.kind {
            Kind::Load | Kind::Acquire => self.load(t, ev),
            Kind::Store => self.store(t, ev),
            Kind::NtStore => {
                if pmsim_trace::is_pm(&self.pm, ev.addr) {
                    self.thread(t).flushed = true;
                }
                self.store(t, ev);
            }
            // In a legacy x86 trace a locked instruction after the thread's flushes persists
            // them first (x86 orders them there; HOPS, ASAP, delegated and BROI take it as a
            // dfence before it: docs/design.md §3), so it is a persist barrier before its store.
            Kind::Release | Kind::Rmw => {
                if std::mem::take(&mut self.thread(t).flushed) && self.x86_fences {
                    self.barrier(t);
                }
                self.store(t, ev);
            }
            Kind::Ofence | Kind::Dfence => self.barrier(t),
            // A remote persistent write is one barrier region (DESIGN §3): its persists, then a
            // barrier before the thread's next region.
            Kind::RdmaPwrite => {
                self.store(t, ev);
                self.barrier(t);
            }
            Kind::Strand => {
                if self.model == Model::Strand {
                    let th = self.thread(t);
                    th.ordered = Frontier::EMPTY;
                    th.epoch = Frontier::EMPTY;
                }
            }
            // Every `end` completes an operation (a valid trace's `end` closes an open `begin` of
            // its label), nested ones too: the count the timing engine reports, which the
            // normalised rate divides by.
            Kind::End => self.counts.ops += 1,
            Kind::Sfence | Kind::Mfence => {
                self.thread(t).flushed = false;
                if self.x86_fences {
                    self.barrier(t);
                }
            }
            Kind::Clwb | Kind::ClflushOpt => self.thread(t).flushed = true,
            // x86 orders a clflush with the thread's later stores (the designs take it as an
            // ofence): a persist barrier after it.
            Kind::Clflush => {
                self.thread(t).flushed = true;
                if self.x86_fences {
                    self.barrier(t);
                }
            }
            Kind::Begin | Kind::Compute | Kind::RdmaWait => {}
        }
    }

    fn barrier(&mut self, t: usize) {
        if self.model != Model::Strict {
            let th = self.thread(t);
            th.ordered = th.ordered.merge(th.epoch);
        }
    }

    /// Records that an event with persist set `done` has executed on thread `t`.
    #[inline(always)]
    fn after(&mut self, t: usize, done: Frontier) {
        let strict = self.model == Model::Strict;
        let th = self.thread(t);
        if strict {
            th.ordered = th.ordered.merge(done);
        } else {
            th.epoch = th.epoch.merge(done);
        }
    }

    fn load(&mut self, t: usize, ev: &Event) {
        let mut pred = self.thread(t).ordered;
        let (lo, hi) = Self::span(ev);
        let (b0, b1) = (lo >> self.g_shift, hi >> self.g_shift);
        for b in b0..=b1 {
            pred = pred.merge(self.blocks.get_mut(b).last_store);
        }
        for b in b0..=b1 {
            let blk = self.blocks.get_mut(b);
            blk.any = blk.any.merge(pred);
        }
        self.after(t, pred);
    }

    fn store(&mut self, t: usize, ev: &Event) {
        let mut pred = self.thread(t).ordered;
        let (lo, hi) = Self::span(ev);
        let (b0, b1) = (lo >> self.g_shift, hi >> self.g_shift);
        for b in b0..=b1 {
            pred = pred.merge(self.blocks.get_mut(b).any);
        }
        let mut done = pred;
        if pmsim_trace::is_pm(&self.pm, lo) {
            for a in (lo >> self.a_shift)..=(hi >> self.a_shift) {
                done = done.merge(self.persist(a, pred));
            }
        }
        // The store follows every earlier access of its blocks, so its set is now theirs.
        for b in b0..=b1 {
            *self.blocks.get_mut(b) = Block { last_store: done, any: done };
        }
        self.after(t, done);
    }

    /// One persist to atomic block `a` that must follow `pred`: joins the block's last persist
    /// if the coalescing rule allows, else is a new persist one level above its predecessors.
    #[inline(always)]
    fn persist(&mut self, a: u64, pred: Frontier) -> Frontier {
        let q = *self.atoms.get_mut(a);
        if self.coalesce && q.level > 0 && pred.allows_joining(q) {
            return q;
        }
        let p = Frontier { level: pred.level + 1, who: self.next_id };
        self.next_id += 1;
        *self.atoms.get_mut(a) = p;
        self.counts.persists += 1;
        self.counts.critical_path = self.counts.critical_path.max(p.level as u64);
        p
    }
}
