//! MCS queue locks (Mellor-Crummey and Scott), the locks of the seed's queues, as real memory
//! operations: a lock word (the queue's tail) and one 64 B queue node per thread, in DRAM.
//!
//! Acquire: clear the node's `next`, set its `locked`, swap the node into the tail (an `rmw`:
//! acquire + release of the lock word); with a predecessor, link behind it and spin on `locked`.
//! Release: read `next`; without a successor, CAS the tail back to 0 (an `rmw`), else hand over by
//! a release of the successor's `locked`. Generators run each locked section to completion before
//! another thread runs (phases of operations interleave, sections never overlap), so the
//! contended paths are never taken; they are kept so the code is the algorithm.
//!
//! Simplification: the contended paths exist but are never taken (see above).

use crate::ctx::Ctx;

/// A lock word plus one queue node per thread.
#[derive(Clone, Copy)]
pub struct Mcs {
    pub tail: u64,
    nodes: u64,
}

impl Mcs {
    pub fn new(c: &mut Ctx<'_>, threads: usize) -> Mcs {
        let tail = c.alloc_dram(64, 64);
        let nodes = c.alloc_dram(64 * threads as u64, 64);
        Mcs { tail, nodes }
    }

    fn node(&self, thread: usize) -> u64 {
        self.nodes + 64 * thread as u64
    }

    pub fn lock(&self, c: &mut Ctx<'_>) {
        let me = self.node(c.thread);
        c.store_u64(me, 0);
        c.store_u64(me + 8, 1);
        let old = c.peek(self.tail, 8);
        c.cas(self.tail, old, me); // swap
        if old != 0 {
            c.store_u64(old, me);
            // Spin until the predecessor hands the lock over (never reached: see module docs).
            while c.acquire(me + 8) != 0 {}
        }
    }

    pub fn unlock(&self, c: &mut Ctx<'_>) {
        let me = self.node(c.thread);
        let next = c.load_u64(me);
        if next == 0 && c.cas(self.tail, me, 0) {
            return;
        }
        let next = if next == 0 { c.load_u64(me) } else { next };
        c.release_value(next + 8, 0);
    }
}
