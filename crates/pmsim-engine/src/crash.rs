//! Crash images: what NVM holds after power fails at an instant.
//!
//! The image is the NVM contents with the persistence domain written out on top, in the order
//! the hardware would: the WPQs (ADR), then the design's own domain (ASAP's undo records, eADR's
//! caches, BBB's buffers), as returned by [`Simulator::crash_writes`].

use crate::sim::Simulator;
use pmsim_trace::MemImage;

/// The full crash image at the simulator's current instant.
pub fn image(sim: &Simulator) -> MemImage {
    let mut img = MemImage::new();
    for (w, v) in sim.m.nvm.words() {
        img.set(w, v);
    }
    for d in sim.crash_writes() {
        for (w, v) in d.iter() {
            img.set(w, v);
        }
    }
    img
}
