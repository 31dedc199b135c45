//! `sps`: random swaps between entries of a persistent vector (the seed's Table IV, after
//! Kiln): each operation reads two random 8 B entries and writes each with the other's value,
//! both undo-logged. An entry never written holds its implicit initial value (index + 1), so
//! the vector needs no initialisation pass.
//!
//! Built on [`crate::blocks::undo_tx`] through the BROI driver. Simplifications: one private
//! vector per thread; the second index is uniform (the seed does not name a distribution).

use super::common::{bytes_per_thread, drive, footprint, Done, Instance, COMPUTE, LOG_GAP, REMOTE_GAP, REMOTE_REGION};
use crate::atlas::undo_log::Tx;
use crate::ctx::Ctx;
use crate::params::{ParamSpec, Params};
use crate::registry::{Generated, WorkloadSpec};

pub static SPS: WorkloadSpec = WorkloadSpec {
    name: "sps",
    description: "BROI Table IV: random swaps between entries of a persistent vector per thread, undo-logged",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    footprint("16384", "PM footprint over all threads (the seed: 1 GB)"),
    REMOTE_GAP,
    REMOTE_REGION,
    COMPUTE,
    LOG_GAP,
];

struct Vector {
    base: u64,
    n: u64,
}

impl Vector {
    fn read(&self, c: &mut Ctx<'_>, i: u64) -> u64 {
        match c.load_u64(self.base + i * 8) {
            0 => i + 1,
            v => v,
        }
    }
}

impl Instance for Vector {
    fn op(&mut self, c: &mut Ctx<'_>, tx: &mut Tx, key: u64) -> Done {
        let i = key % self.n;
        let j = c.rng().below(self.n);
        let (a, b) = (self.read(c, i), self.read(c, j));
        if i != j {
            tx.write_u64(c, self.base + i * 8, b);
            tx.write_u64(c, self.base + j * 8, a);
        }
        Done { op: 1, key: i, value: j }
    }
}

fn generate(p: &Params) -> Generated {
    let n = (bytes_per_thread(p) / 8).max(64);
    drive(p, n, |_, g| Vector { base: g.heap.alloc_pm(n * 8, 4096), n })
}
