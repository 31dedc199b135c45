//! Write-combining buffers: where a core's non-temporal stores wait to leave for their MC
//! (the designs whose `ntstore` bypasses every buffer of their own: baseline, eADR).
//!
//! x86 keeps a few fill buffers per core (`core.wc_buffers`; 10 on Skylake). A non-temporal
//! store writes into the buffer of its line, or takes a free one. A buffer is sent to its MC as
//! one line write when all eight words are written, at a fence or a locked instruction, when the
//! core needs a buffer for another line and all are taken, or when the thread ends; it stays
//! taken until the MC has accepted that write. A store that finds every buffer taken waits
//! (`stall_cycles.wc_full`): the back-pressure that holds a stream of non-temporal stores to the
//! media's write bandwidth, where an unbounded queue would let it retire at any rate.
//!
//! What a buffer sends is the line's coherent data, read when it leaves, as a write-back of the
//! line at that moment would: a later store to one of its words (by any core) is then never undone
//! by an older buffered copy landing on top of it, and no store reaches NVM in part while a
//! newer one is in the line (sending only the buffered words would persist one word of a
//! multi-word store without the rest). Every store in it has performed, and under both designs
//! a performed store may persist at any time, as a cache eviction could make it.

use crate::machine::Machine;
use crate::mem::nvm::LineData;

#[derive(Clone, Copy)]
struct Slot {
    line: u64,
    /// Words written since the buffer was last sent.
    mask: u8,
    /// Stores are combining into it (not yet sent since they started).
    open: bool,
    /// Writes sent and not yet accepted by the MC.
    in_flight: u32,
    /// When it opened (the oldest open buffer is sent to free one).
    opened: u64,
}

pub struct WcBuffers {
    cap: usize,
    cores: Vec<Vec<Slot>>,
    opened: u64,
    /// Line writes sent (full, fenced, or evicted buffers).
    pub writes: u64,
    /// Non-temporal stores that went into a buffer already open for their line.
    pub combined: u64,
}

impl WcBuffers {
    pub fn new(cores: usize, cap: usize) -> WcBuffers {
        WcBuffers { cap: cap.max(1), cores: vec![Vec::new(); cores], opened: 0, writes: 0, combined: 0 }
    }

    /// Whether `core` has a buffer for a non-temporal store to `line` now. If not, the oldest
    /// buffer still open is sent (its line pushed to `send`), so that one frees once the MC
    /// accepts it; the store waits for [`WcBuffers::accepted`].
    pub fn admit(&mut self, core: usize, line: u64, send: &mut Vec<u64>) -> bool {
        let slots = &mut self.cores[core];
        if slots.len() < self.cap || slots.iter().any(|s| s.line == line) {
            return true;
        }
        if let Some(s) = slots.iter_mut().filter(|s| s.open).min_by_key(|s| s.opened) {
            send.push(s.line);
            s.open = false;
            s.mask = 0;
            s.in_flight += 1;
            self.writes += 1;
        }
        false
    }

    /// A non-temporal store of `words` to `line` performed (after `admit`). Returns whether its
    /// buffer is now full, so the caller sends it at once, as the hardware does.
    pub fn write(&mut self, core: usize, line: u64, words: u8) -> bool {
        let slots = &mut self.cores[core];
        let i = match slots.iter().position(|s| s.line == line) {
            Some(i) => i,
            None => {
                slots.push(Slot { line, mask: 0, open: false, in_flight: 0, opened: 0 });
                slots.len() - 1
            }
        };
        let s = &mut slots[i];
        if s.open {
            self.combined += 1;
        } else {
            s.open = true;
            s.opened = self.opened;
            self.opened += 1;
        }
        s.mask |= words;
        if s.mask != 0xff {
            return false;
        }
        s.open = false;
        s.mask = 0;
        s.in_flight += 1;
        self.writes += 1;
        true
    }

    /// Sends every open buffer of `core` (a fence, a locked instruction, the end of the thread).
    pub fn send_open(&mut self, core: usize, send: &mut Vec<u64>) {
        for s in self.cores[core].iter_mut().filter(|s| s.open) {
            send.push(s.line);
            s.open = false;
            s.mask = 0;
            s.in_flight += 1;
            self.writes += 1;
        }
    }

    /// The MC accepted a write of `line` that `core`'s buffer sent; true if the buffer is free.
    pub fn accepted(&mut self, core: usize, line: u64) -> bool {
        let slots = &mut self.cores[core];
        let Some(i) = slots.iter().position(|s| s.line == line) else { return false };
        let s = &mut slots[i];
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.in_flight == 0 && !s.open {
            slots.swap_remove(i);
            return true;
        }
        false
    }

    /// Writes sent and not yet accepted.
    pub fn in_flight(&self) -> bool {
        self.cores.iter().flatten().any(|s| s.in_flight > 0)
    }

    /// Buffers `core` holds (open or in flight), for a stuck run's report.
    pub fn taken(&self, core: usize) -> usize {
        self.cores.get(core).map_or(0, Vec::len)
    }
}

/// What a buffer of `line` sends: the line's coherent data (module doc).
pub fn buffer_data(m: &Machine, line: u64) -> LineData {
    m.coherent_line(line)
}
