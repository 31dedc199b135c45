//! Hot-line contention: PM counters passed among all threads by atomic read-modify-writes.
//!
//! Each operation takes a ticket from one of `hot_lines` PM counters (a `fetch_add`, one line
//! each, on alternating MCs), `ofence`s, writes the ticket to the thread's own log slot and to the
//! thread's own word *inside the counter's line* (threads 0..7) (so the line is written by every core, in
//! different words), and ends with the usual end-of-operation dfence. It is the shape behind the
//! baseline's crash-consistency bugs of issue 10 (a clwb of a line dirty in another core's cache,
//! write-backs of one line in flight from several cores, ACK attribution) as a workload that
//! runs in the soak.
//!
//! Recovery: every ticket visible in a log slot or a counter-line word was issued after the
//! counter reached that value, so the counter must show at least it (the rmw precedes the stores
//! after the ofence in every model); a slot holds 0 or the one ticket written there, and every
//! operation made durable by a completed dfence shows its ticket.
//!
//! A synthetic stress workload (no paper's data structure); nothing simplified beyond its definition.

use crate::ctx::{Gen, Interleaver};
use crate::params::{compute_up_to_2_32, int, ParamSpec, Params};
use crate::recovery::{OpLog, OpRecord, Recovery, RecoveryError, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;

pub static HOT_LINE: WorkloadSpec = WorkloadSpec {
    name: "hotline",
    description: "hot-line contention: PM counters passed among threads by rmw, ofence, ticket stored in a log and in the counter's line",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "hot_lines",
        default: "1",
        unit: "lines",
        range: int(1, 8),
        help: "PM counters the threads contend on (1 to 8)",
    },
    compute_up_to_2_32("20", "non-memory instructions per operation"),
];

/// Words of a counter line other than the counter: thread t < 7 writes word 1 + t.
const SHARE_WORDS: u64 = 7;

fn generate(p: &Params) -> Generated {
    let hot = p.get("hot_lines").clamp(1, 8);
    let compute = p.get("compute");
    let threads = p.threads as u64;
    let mut g = Gen::new(p);
    // One counter line per 4 KiB page: consecutive counters sit on different MCs.
    let counters = g.heap.alloc_pm(hot * 4096, 4096);
    let log = g.heap.alloc_pm((threads * p.ops * 8).max(64), 64);
    let mut slots = Vec::new(); // (slot address, counter index, ticket written)
    Interleaver::run(&mut g, p.threads, p.ops, |c, i| {
        let j = c.rng().below(hot);
        let counter = counters + j * 4096;
        c.begin("take");
        c.compute(compute);
        let ticket = c.fetch_add(counter, 1) + 1;
        c.ofence();
        let slot = log + (c.thread as u64 * p.ops + i) * 8;
        c.store_u64(slot, ticket);
        // Threads beyond the line's seven spare words skip it (sharing a word would race).
        if (c.thread as u64) < SHARE_WORDS {
            c.store_u64(counter + 8 * (1 + c.thread as u64), ticket);
        }
        slots.push((slot, j, ticket));
        c.end("take", OpRecord { op: 0, key: slot, value: ticket, ..Default::default() });
        c.op_dfence();
    });
    let (trace, oplog) = g.finish();
    Generated { trace, recovery: Box::new(HotLineRecovery { counters, hot, slots, log: oplog }) }
}

struct HotLineRecovery {
    counters: u64,
    hot: u64,
    slots: Vec<(u64, u64, u64)>,
    log: OpLog,
}

impl Recovery for HotLineRecovery {
    fn check(&self, img: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError> {
        let mut rep = RecoveryReport::default();
        let counter = |j: u64| img.read_u64(self.counters + j * 4096);
        for j in 0..self.hot {
            let c = counter(j);
            for w in 1..=SHARE_WORDS {
                let a = self.counters + j * 4096 + 8 * w;
                let v = img.read_u64(a);
                if v > c {
                    return Err(RecoveryError::new(format!(
                        "counter {j} shows {c} but ticket {v} (issued after it reached {v}) is already in its line at {a:#x}"
                    )));
                }
            }
        }
        for &(slot, j, ticket) in &self.slots {
            let v = img.read_u64(slot);
            if v != 0 && v != ticket {
                return Err(RecoveryError::new(format!("log slot {slot:#x} holds {v}, never written there")));
            }
            if v != 0 {
                rep.items += 1;
                if counter(j) < ticket {
                    return Err(RecoveryError::new(format!(
                        "counter {j} shows {} but ticket {ticket} is durable in log slot {slot:#x}",
                        counter(j)
                    )));
                }
            }
        }
        for op in self.log.durable(dfence_done) {
            if img.read_u64(op.key) != op.value {
                return Err(RecoveryError::new(format!(
                    "ticket {} (log slot {:#x}) was made durable by a completed dfence but the slot holds {}",
                    op.value,
                    op.key,
                    img.read_u64(op.key)
                )));
            }
            rep.durable_ops_checked += 1;
        }
        Ok(rep)
    }
}
