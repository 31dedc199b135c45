//! Multi-threaded persistent array update.
//!
//! Each operation locks one stripe of a PM array (an `rmw` on the stripe's lock word), writes a
//! random 8–64 B run of words inside one line, `ofence`s, and releases the lock; every
//! `dfence_every` operations the thread issues a `dfence`. Cross-thread dependencies arise only
//! through the stripe locks (release persistency) or the shared lines (epoch persistency).
//! Recovery: each word holds 0 or a value written to it, at least as new as the newest write to it
//! made durable by a completed dfence.
//!
//! A synthetic microbenchmark (no paper's data structure); nothing simplified beyond its definition.

use crate::ctx::{Gen, Interleaver};
use crate::params::{compute, int, multiple, ParamSpec, Params};
use crate::recovery::{OpLog, OpRecord, Recovery, RecoveryError, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;
use rustc_hash::FxHashMap;

pub static ARRAY_UPDATE: WorkloadSpec = WorkloadSpec {
    name: "array",
    description: "persistent array: random 8-64 B updates under striped locks, ofence after each, dfence every K",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "array_bytes",
        default: "1048576",
        unit: "bytes",
        range: multiple(64, 4096, 1 << 34),
        help: "size of the persistent array",
    },
    ParamSpec {
        name: "stripes",
        default: "64",
        unit: "locks",
        range: int(1, 1 << 20),
        help: "lock stripes over the array",
    },
    ParamSpec {
        name: "dfence_every",
        default: "8",
        unit: "operations",
        range: int(1, 1 << 20),
        help: "a dfence after every K operations of a thread",
    },
    compute("50", "non-memory instructions per operation"),
];

fn generate(p: &Params) -> Generated {
    let bytes = p.get("array_bytes").max(4096).div_ceil(64) * 64;
    let stripes = p.get("stripes").clamp(1, bytes / 64);
    let k = p.get("dfence_every").max(1);
    let compute = p.get("compute");
    let mut g = Gen::new(p);
    let array = g.heap.alloc_pm(bytes, 4096);
    let locks = g.heap.alloc_dram(stripes * 64, 64);
    let lines = bytes / 64;
    let mut writes: Vec<(u64, u64, u64)> = Vec::new(); // (word, value, op index)
    let mut seq = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, i| {
        let line = c.rng().below(lines);
        let nwords = 1 + c.rng().below(8);
        let first = c.rng().below(8 - nwords + 1);
        let stripe = line % stripes;
        let lock = locks + stripe * 64;
        seq += 1;
        c.begin("update");
        c.compute(compute);
        c.lock(lock);
        let a = array + line * 64 + first * 8;
        let mut data = Vec::with_capacity(nwords as usize * 8);
        for w in 0..nwords {
            let v = (seq << 8) | (first + w);
            data.extend_from_slice(&v.to_le_bytes());
            writes.push((a + w * 8, v, seq));
        }
        c.store(a, &data);
        c.ofence();
        c.unlock(lock);
        c.end("update", OpRecord { op: 1, key: a, value: seq, ..Default::default() });
        if (i + 1) % k == 0 {
            c.dfence();
        }
    });
    let (trace, log) = g.finish();
    let mut by_word: FxHashMap<u64, Vec<(u64, u64)>> = FxHashMap::default();
    for (w, v, s) in writes {
        by_word.entry(w).or_default().push((s, v));
    }
    Generated { trace, recovery: Box::new(ArrayRecovery { by_word, log }) }
}

struct ArrayRecovery {
    /// word -> (op seq, value) in op order.
    by_word: FxHashMap<u64, Vec<(u64, u64)>>,
    log: OpLog,
}

impl Recovery for ArrayRecovery {
    fn check(&self, img: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError> {
        let mut rep = RecoveryReport::default();
        let durable: rustc_hash::FxHashSet<u64> = self.log.durable(dfence_done).map(|o| o.value).collect();
        let mut words: Vec<_> = self.by_word.iter().collect();
        words.sort_unstable_by_key(|e| *e.0);
        for (&w, hist) in words {
            let v = img.read_u64(w);
            let pos = if v == 0 { None } else { hist.iter().position(|&(_, x)| x == v) };
            if v != 0 && pos.is_none() {
                return Err(RecoveryError::new(format!("word {w:#x} holds {v:#x}, which was never written there")));
            }
            if let Some(need) = hist.iter().rposition(|(s, _)| durable.contains(s)) {
                if pos.is_none_or(|p| p < need) {
                    return Err(RecoveryError::new(format!(
                        "word {w:#x}: update #{} was made durable by a completed dfence but the image holds {v:#x}",
                        hist[need].0
                    )));
                }
                rep.durable_ops_checked += 1;
            }
            if v != 0 {
                rep.items += 1;
            }
        }
        Ok(rep)
    }
}
