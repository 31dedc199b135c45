//! Crash images: what NVM holds after power fails at an instant.
//!
//! The image is the NVM contents with the persistence domain written out on top, in the order
//! the hardware would: the WPQs (ADR), then the design's own domain (ASAP's undo records, eADR's
//! caches, BBB's buffers), as returned by [`Simulator::crash_writes`].
//!
//! [`ImageTracker`] follows a run instant by instant and reports only the words whose crash-image
//! value changed, so an exhaustive crash enumeration costs the size of each change, not of the
//! whole image.

use crate::mem::nvm::{LineData, WordValues};
use crate::sim::Simulator;
use pmsim_trace::{MemImage, WordVal};
use rustc_hash::{FxHashMap, FxHashSet};

/// The full crash image at the simulator's current instant.
pub fn image(sim: &Simulator) -> MemImage {
    let mut img = MemImage::new();
    for (w, id) in sim.m.nvm.words() {
        img.set(w, sim.m.values.val(w, id));
    }
    for d in sim.crash_writes() {
        for (w, id) in d.iter() {
            img.set(w, sim.m.values.val(w, id));
        }
    }
    img
}

/// A word of the crash image changed: `None` = back to its initial contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordChange {
    pub word: u64,
    pub value: Option<WordVal>,
}

/// Follows the crash image of a run incrementally (the simulator must track data).
#[derive(Default)]
pub struct ImageTracker {
    current: FxHashMap<u64, WordVal>,
    overlay: FxHashMap<u64, LineData>,
}

impl ImageTracker {
    pub fn new() -> ImageTracker {
        ImageTracker::default()
    }

    /// The image as currently tracked.
    pub fn words(&self) -> &FxHashMap<u64, WordVal> {
        &self.current
    }

    /// Brings the tracked image to the simulator's current instant; returns what changed.
    pub fn update(&mut self, sim: &mut Simulator, out: &mut Vec<WordChange>) {
        out.clear();
        if sim.design.crash_image_is_coherent() {
            if let Some(mut lines) = sim.m.coherent_written.take() {
                lines.append(&mut sim.m.nvm_written);
                lines.sort_unstable();
                lines.dedup();
                for &line in &lines {
                    if sim.m.is_pm(line) {
                        let ov = sim.m.coherent_line(line);
                        self.apply_line(&sim.m.values, line, &sim.m.nvm.line(line), Some(&ov), out);
                    }
                }
                lines.clear();
                sim.m.coherent_written = Some(lines);
                return;
            }
            // First look: the whole image, then only what stores change from here on.
            sim.m.coherent_written = Some(Vec::new());
        }
        let mut overlay: FxHashMap<u64, LineData> = FxHashMap::default();
        for d in sim.crash_writes() {
            overlay.entry(d.line).or_insert_with(|| LineData::new(d.line)).merge(&d);
        }
        let mut lines: FxHashSet<u64> = overlay.keys().copied().collect();
        lines.extend(self.overlay.keys().copied());
        lines.extend(sim.m.nvm_written.drain(..));
        let mut sorted: Vec<u64> = lines.into_iter().collect();
        sorted.sort_unstable();
        for line in sorted {
            self.apply_line(&sim.m.values, line, &sim.m.nvm.line(line), overlay.get(&line), out);
        }
        self.overlay = overlay;
    }

    /// Sets the tracked words of `line` to the overlay's where it has them, else NVM's.
    fn apply_line(
        &mut self,
        values: &WordValues,
        line: u64,
        nvm: &LineData,
        ov: Option<&LineData>,
        out: &mut Vec<WordChange>,
    ) {
        for i in 0..8u64 {
            let w = line + i * 8;
            let bit = 1u8 << i;
            let v = match ov {
                Some(o) if o.mask & bit != 0 => Some(o.ids[i as usize]),
                _ if nvm.mask & bit != 0 => Some(nvm.ids[i as usize]),
                _ => None,
            };
            let id = v.filter(|&id| id != pmsim_trace::INITIAL_ID);
            // A word's value is a function of its identity: same identity, same word.
            if self.current.get(&w).map(|x| x.id) != id {
                let v = id.map(|id| values.val(w, id));
                match v {
                    Some(x) => self.current.insert(w, x),
                    None => self.current.remove(&w),
                };
                out.push(WordChange { word: w, value: v });
            }
        }
    }
}
