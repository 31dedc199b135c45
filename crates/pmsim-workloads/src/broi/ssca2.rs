//! `ssca2`: the graph-construction kernel of SSCA 2.2 (the seed's Table IV, after STAMP's
//! transactional version): each operation draws an R-MAT edge (a scale-free graph: every bit of
//! the source and destination picks a quadrant with probabilities 0.55/0.1/0.1/0.25) and
//! appends it to the source's adjacency array in one transaction: the edge slot {dest, weight}
//! and the vertex's degree. Per thread: its own vertex partition. Full adjacency arrays drop
//! the edge (a read-only operation).
//!
//! Built on [`crate::blocks::undo_tx`] through the BROI driver. Simplifications: fixed-capacity
//! adjacency arrays (`max_degree`) instead of STAMP's growing ones; a power-of-two vertex count.

use super::common::{bytes_per_thread, drive, footprint, Done, Instance, COMPUTE, LOG_GAP, REMOTE_GAP, REMOTE_REGION};
use crate::atlas::undo_log::Tx;
use crate::ctx::Ctx;
use crate::params::{int, ParamSpec, Params};
use crate::registry::{Generated, WorkloadSpec};

pub static SSCA2: WorkloadSpec = WorkloadSpec {
    name: "ssca2",
    description: "BROI Table IV: SSCA 2.2 graph construction, R-MAT edges appended to adjacency arrays in transactions",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    footprint("256", "PM footprint over all threads (the seed: 16 MB)"),
    ParamSpec {
        name: "max_degree",
        default: "16",
        unit: "edges",
        range: int(1, 1024),
        help: "adjacency slots per vertex",
    },
    REMOTE_GAP,
    REMOTE_REGION,
    COMPUTE,
    LOG_GAP,
];

struct Graph {
    degrees: u64,
    adj: u64,
    scale: u32,
    max_degree: u64,
}

impl Graph {
    fn rmat(&self, c: &mut Ctx<'_>) -> (u64, u64) {
        let (mut u, mut v) = (0u64, 0u64);
        for _ in 0..self.scale {
            let r = c.rng().below(100);
            let (bu, bv) = match r {
                0..=54 => (0, 0),
                55..=64 => (0, 1),
                65..=74 => (1, 0),
                _ => (1, 1),
            };
            u = u << 1 | bu;
            v = v << 1 | bv;
        }
        (u, v)
    }
}

impl Instance for Graph {
    fn op(&mut self, c: &mut Ctx<'_>, tx: &mut Tx, key: u64) -> Done {
        let (u, v) = self.rmat(c);
        let w = key + 1;
        let deg = c.load_u64(self.degrees + u * 8);
        if deg >= self.max_degree {
            return Done { op: 3, key: u, value: v };
        }
        let slot = self.adj + (u * self.max_degree + deg) * 16;
        let mut e = v.to_le_bytes().to_vec();
        e.extend_from_slice(&w.to_le_bytes());
        tx.write(c, slot, &e);
        tx.write_u64(c, self.degrees + u * 8, deg + 1);
        Done { op: 0, key: u, value: v }
    }
}

fn generate(p: &Params) -> Generated {
    let max_degree = p.get("max_degree");
    let per = bytes_per_thread(p);
    let verts = (per / (max_degree * 16 + 8)).max(2);
    let scale = 63 - verts.leading_zeros();
    let verts = 1u64 << scale;
    drive(p, 1 << 20, |_, g| Graph {
        degrees: g.heap.alloc_pm(verts * 8, 4096),
        adj: g.heap.alloc_pm(verts * max_degree * 16, 4096),
        scale,
        max_degree,
    })
}
