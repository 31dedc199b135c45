//! The ordered-bandwidth microbenchmark of the ASAP paper (§VII-C, Fig 13).
//!
//! Each thread writes 256 B blocks that alternate between the two memory controllers (addresses
//! `stride` apart, `stride` being the MC interleaving granularity), with an `ofence` after every
//! block. Under conservative flushing each block waits for the previous one's ACK; under eager
//! flushing blocks to both MCs overlap. Recovery: ofences order the blocks, so in any consistent
//! image each thread's fully written blocks form a prefix (a block may be partly written).
//!
//! Simplification: blocks are written with plain stores in address order, one thread per core,
//! as the paper's microbenchmark; no data structure.

use crate::ctx::{Gen, Interleaver};
use crate::params::{compute, multiple, ParamSpec, Params};
use crate::recovery::{OpRecord, Recovery, RecoveryError, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;

pub static BANDWIDTH: WorkloadSpec = WorkloadSpec {
    name: "bandwidth",
    description: "ASAP §VII-C: 256 B writes alternating across 2 MCs, one ofence after each",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "block",
        default: "256",
        unit: "bytes",
        range: multiple(64, 64, 1 << 20),
        help: "bytes written per ordered block (multiple of 64)",
    },
    ParamSpec {
        name: "stride",
        default: "4096",
        unit: "bytes",
        range: multiple(64, 64, 1 << 30),
        help: "MC interleaving granularity the blocks alternate across",
    },
    compute("0", "non-memory instructions between blocks"),
];

fn block_addr(base: u64, i: u64, block: u64, stride: u64) -> u64 {
    let per_page = (stride / block).max(1);
    let j = i / 2;
    base + (2 * (j / per_page) + (i % 2)) * stride + (j % per_page) * block
}

fn word_value(thread: u64, i: u64, w: u64) -> u64 {
    (thread << 48) | ((i + 1) << 8) | w
}

fn generate(p: &Params) -> Generated {
    let block = p.get("block").max(64).div_ceil(64) * 64;
    let stride = p.get("stride").max(64);
    let compute = p.get("compute");
    let mut g = Gen::new(p);
    let span = 2 * stride * (p.ops / 2 / (stride / block).max(1) + 2);
    let bases: Vec<u64> = (0..p.threads).map(|_| g.heap.alloc_pm(span, 2 * stride)).collect();
    Interleaver::run(&mut g, p.threads, p.ops, |c, i| {
        let t = c.thread as u64;
        let a = block_addr(bases[c.thread], i, block, stride);
        c.begin("write");
        let mut bytes = Vec::with_capacity(block as usize);
        for w in 0..block / 8 {
            bytes.extend_from_slice(&word_value(t, i, w).to_le_bytes());
        }
        c.store(a, &bytes);
        c.ofence();
        c.compute(compute);
        c.end("write", OpRecord { op: 0, key: i, ..Default::default() });
    });
    let (trace, log) = g.finish();
    let recovery = BandwidthRecovery { bases, block, stride, ops: p.ops, log };
    Generated { trace, recovery: Box::new(recovery) }
}

struct BandwidthRecovery {
    bases: Vec<u64>,
    block: u64,
    stride: u64,
    ops: u64,
    log: crate::OpLog,
}

impl Recovery for BandwidthRecovery {
    fn check(&self, img: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError> {
        let mut rep = RecoveryReport::default();
        for (t, &base) in self.bases.iter().enumerate() {
            let mut first_incomplete = None;
            for i in 0..self.ops {
                let a = block_addr(base, i, self.block, self.stride);
                let mut present = 0;
                for w in 0..self.block / 8 {
                    let v = img.read_u64(a + w * 8);
                    if v == word_value(t as u64, i, w) {
                        present += 1;
                    } else if v != 0 {
                        return Err(RecoveryError::new(format!(
                            "thread {t} block {i} word {w}: value {v:#x} was never written there"
                        )));
                    }
                }
                let complete = present == self.block / 8;
                if complete {
                    rep.items += 1;
                }
                match first_incomplete {
                    None if !complete => first_incomplete = Some(i),
                    Some(j) if present > 0 && i > j => {
                        return Err(RecoveryError::new(format!(
                            "thread {t}: block {i} survived but block {j}, ordered before it by an ofence, is incomplete"
                        )));
                    }
                    _ => {}
                }
            }
        }
        for op in self.log.durable(dfence_done) {
            let t = op.thread as u64;
            let a = block_addr(self.bases[op.thread as usize], op.key, self.block, self.stride);
            for w in 0..self.block / 8 {
                if img.read_u64(a + w * 8) != word_value(t, op.key, w) {
                    return Err(RecoveryError::new(format!(
                        "thread {t} block {} completed before a dfence but is missing",
                        op.key
                    )));
                }
            }
            rep.durable_ops_checked += 1;
        }
        Ok(rep)
    }
}
