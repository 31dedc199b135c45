//! The `delegated` baseline's MC side (the BROI seed's "Epoch" baseline, after Kolli et al.):
//! barrier epochs are flattened into global epochs and drained in order, oldest first.
//!
//! Why: once requests leave the per-thread persist buffers their barriers become visible to
//! every thread; the controller sends the k-th epoch of every thread together — (1.1, 1.2, 2.1,
//! 3.1) barrier (1.3, 2.2, 3.2) — and a global epoch starts only when the previous one has
//! persisted. A thread's next epoch joins the oldest global epoch after its previous one (the
//! one draining, if its previous epoch is already done). Within a global epoch requests go to
//! the MC in arrival order as fast as its write queue takes them; the queue's FR-FCFS sees
//! them. Guarantee: a thread's epochs map to strictly increasing global epochs, so no request
//! passes its barrier.

use super::{BankView, EpochKey, PersistScheduler, Pick, Queues, Req};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

#[derive(Default)]
pub struct InOrder {
    /// The global epoch being drained.
    current: u64,
    /// Per entry: (its newest thread epoch, that epoch's global epoch).
    last: Vec<(Option<EpochKey>, u64)>,
    /// Per global epoch: requests not yet persisted.
    remaining: BTreeMap<u64, u32>,
    epochs_drained: u64,
    /// Scratch, reused across steps: the merge front, (seq, entry, index in its queue) of each
    /// entry's oldest request not yet considered, and free queue entries per MC.
    front: BinaryHeap<Reverse<(u64, usize, usize)>>,
    free: Vec<usize>,
}

impl InOrder {
    fn advance(&mut self) {
        loop {
            if self.remaining.get(&self.current).is_some_and(|&n| n > 0) {
                return;
            }
            self.remaining.remove(&self.current);
            match self.remaining.first_key_value() {
                Some((&g, _)) if g > self.current => {
                    self.current = g;
                    self.epochs_drained += 1;
                }
                _ => return,
            }
        }
    }
}

impl PersistScheduler for InOrder {
    fn name(&self) -> &'static str {
        "delegated"
    }

    fn on_arrive(&mut self, q: &Queues, r: &mut Req) {
        if self.last.len() < q.entries.len() {
            self.last.resize(q.entries.len(), (None, 0));
        }
        let (le, lg) = self.last[r.entry as usize];
        let g = match le {
            // Its epoch's global one may have drained meanwhile: then every earlier epoch of the
            // thread has persisted and the request joins the one draining.
            Some(k) if k == r.key() => lg.max(self.current),
            None => self.current,
            Some(_) => self.current.max(lg + 1),
        };
        self.last[r.entry as usize] = (Some(r.key()), g);
        r.tag = g;
        *self.remaining.entry(g).or_insert(0) += 1;
    }

    fn on_persisted(&mut self, r: &Req) {
        if let Some(n) = self.remaining.get_mut(&r.tag) {
            *n -= 1;
        }
    }

    fn pick(&mut self, q: &Queues, v: &BankView, out: &mut Vec<Pick>) {
        self.advance();
        self.free.clear();
        self.free.extend_from_slice(&v.queue_free);
        // Oldest first across entries, by arrival sequence: a merge of the entries' queues (each
        // in arrival order), stopped once no MC takes more. Sorting every queued request at
        // every step made one long epoch of a large buffer quadratic.
        // An entry's tags never decrease along its queue (`on_arrive`), so its eligible requests
        // are a prefix of it.
        let current = self.current;
        let next_from = |i: usize, k: usize| {
            let r = q.entries[i].queued.get(k).filter(|r| r.tag <= current)?;
            Some(Reverse((r.seq, i, k)))
        };
        self.front.clear();
        self.front.extend((0..q.entries.len()).filter_map(|i| next_from(i, 0)));
        let mut room: usize = self.free.iter().sum();
        while room > 0 {
            let Some(Reverse((seq, i, k))) = self.front.pop() else { break };
            let mc = q.entries[i].queued[k].mc as usize;
            if self.free[mc] > 0 {
                self.free[mc] -= 1;
                room -= 1;
                out.push((i, seq));
            }
            self.front.extend(next_from(i, k + 1));
        }
    }

    fn stats(&self, out: &mut crate::design::DesignStats) {
        out.insert("global_epochs".into(), self.epochs_drained as f64);
    }
}
