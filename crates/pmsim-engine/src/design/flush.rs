//! Line write-backs in flight from a core to a memory controller, shared by the designs that
//! flush through the caches (baseline, eADR's write-backs).
//!
//! A flushed line travels the on-chip network to its MC; it is in no persistence domain until
//! the WPQ accepts it, and its ACK returns one hop later. Writes of one line reach its MC in the
//! order they were sent (the network keeps one line's messages in order, as a coherence
//! protocol's write-backs must): a write taken later holds newer data, and letting it overtake
//! an older one would let the stale copy land last and undo a durable store.

use crate::machine::{DesignEv, Machine};
use crate::mem::nvm::LineData;
use rustc_hash::FxHashMap;

/// Slab of in-flight line writes, indexed by the `arg` of their arrival events.
#[derive(Default)]
pub struct InFlight {
    slots: Vec<Option<(LineData, Option<DesignEv>)>>,
    free: Vec<usize>,
    pub count: usize,
    /// Per line with writes in flight: (latest arrival time, writes in flight).
    lines: FxHashMap<u64, (u64, u32)>,
}

impl InFlight {
    /// Sends `data` to its MC, arriving at `at` (or right after an earlier write of the same line,
    /// if that one arrives later); the WPQ's ACK will be `ack` (if any). `arrive_tag` is the
    /// design's event tag for arrivals.
    pub fn send(&mut self, m: &mut Machine, at: u64, data: LineData, ack: Option<DesignEv>, arrive_tag: u16) {
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some((data, ack));
                i
            }
            None => {
                self.slots.push(Some((data, ack)));
                self.slots.len() - 1
            }
        };
        self.count += 1;
        let l = self.lines.entry(data.line).or_insert((0, 0));
        // Equal times keep the send order: the event queue breaks ties first-in first-out.
        let at = at.max(l.0);
        *l = (at, l.1 + 1);
        m.schedule_design(at, DesignEv { tag: arrive_tag, core: 0, arg: idx as u64 });
    }

    /// Handles an arrival event: hands the write to the WPQ.
    pub fn arrive(&mut self, m: &mut Machine, idx: u64) {
        if let Some((data, ack)) = self.slots.get_mut(idx as usize).and_then(Option::take) {
            self.free.push(idx as usize);
            self.count -= 1;
            if let Some(l) = self.lines.get_mut(&data.line) {
                l.1 -= 1;
                if l.1 == 0 {
                    self.lines.remove(&data.line);
                }
            }
            let mc = m.mc_of(data.line);
            m.mc_write(mc, data, ack);
        }
    }
}
