//! `cwl` and `2lc`: the seed's Algorithm 1, one variant per persistency model.
//!
//! Persist barriers (`ofence`) and strand barriers by variant, with the seed's line numbers:
//! - CWL, `epoch`: barriers before and after LOCK (3, 5), after COPY (8), before and after UNLOCK
//!   (11, 13). `racing`: without 5 and 11 (lock operations outside barriers: persist-epoch races,
//!   the head ordered by strong persist atomicity). `strand`: the epoch barriers plus NEWSTRAND
//!   after line 5, and the strand loads `head` (what its head persist must follow) before COPY.
//! - 2LC: LOCK(reserve), reserve a slot, append to the volatile insert list, UNLOCK; NEWSTRAND
//!   (strand only); COPY; a barrier; LOCK(update), remove from the insert list and, if this
//!   insert was the oldest in flight, a barrier and the persist of the new `head` covering every
//!   completed insert; UNLOCK(update). The barrier after COPY is not in the seed's listing: without
//!   it an insert that is not the oldest leaves its copy unordered before the `head` persist
//!   another thread makes to cover it (an epoch race the recovery cannot survive), so every
//!   variant has it. The seed places no barrier around 2LC's locks, so its `epoch` and `racing`
//!   variants are the same trace (as its Table 1 reports them equal).
//! - `strict`: the epoch placement plus a barrier after every persistent store, so a design
//!   promising epoch persistency (`asap-ep`) orders it as strict persistency would.
//!
//! 2LC's phases (reserve, copy, update) of different threads interleave in a seeded random order,
//! so inserts complete out of order and the insert list does real work; CWL's inserts are one
//! locked section each. COPY writes the 8-byte length and the entry with `copy_bytes`-wide stores
//! (16 B: the SSE moves of the seed's x86 `memcpy`).
//!
//! Simplifications: a bounded array of slots (no wrap-around or removal: the seed's queue only
//! inserts); the locks are real MCS locks but never contended (sections run one at a time).
//! No building block applies: the barrier placement per persistency model is the workload.

use super::mcs::Mcs;
use crate::ctx::{Ctx, Gen};
use crate::params::{compute_up_to_2_32, int, power_of_two, ParamSpec, Params};
use crate::recovery::{piece, OpRecord, PieceCache, Recovery, RecoveryError, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Strict,
    Epoch,
    Racing,
    Strand,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "variant",
        default: "epoch",
        unit: "strict|epoch|racing|strand",
        range: int(0, 3), help: "persistency model the barriers are placed for (seed Algorithm 1; racing: no barriers around lock operations)",
    },
    ParamSpec { name: "entry_size", default: "100", unit: "bytes", range: int(8, 4096), help: "bytes per queue entry (8 to 4096), plus an 8-byte length" },
    ParamSpec { name: "copy_bytes", default: "16", unit: "bytes", range: power_of_two(8, 64), help: "width of the stores that copy an entry" },
    compute_up_to_2_32("0", "extra non-memory work per insert (outside the locks)"),
];

struct Shape {
    variant: Variant,
    entry: u64,
    slot: u64,
    copy: u64,
    compute: u64,
    hdr: u64,
    data: u64,
}

impl Shape {
    fn new(p: &Params, g: &mut Gen) -> Shape {
        let variant = match p.get("variant") {
            0 => Variant::Strict,
            1 => Variant::Epoch,
            2 => Variant::Racing,
            _ => Variant::Strand,
        };
        let entry = p.get("entry_size").clamp(8, 4096);
        let copy = p.get("copy_bytes");
        let slot = (8 + entry).div_ceil(64) * 64;
        let hdr = g.heap.alloc_pm(64, 64);
        // A large persistent array is page aligned, as any allocator places it.
        let data = g.heap.alloc_pm(slot * p.ops * p.threads as u64, 4096);
        Shape { variant, entry, slot, copy, compute: p.get("compute"), hdr, data }
    }

    fn barrier(&self, c: &mut Ctx<'_>) {
        c.ofence();
    }

    /// Barrier placed only by the epoch-style variants that keep lock operations inside barriers.
    fn lock_barrier(&self, c: &mut Ctx<'_>) {
        if self.variant != Variant::Racing {
            c.ofence();
        }
    }

    /// COPY(data[slot], (length, entry)).
    fn copy(&self, c: &mut Ctx<'_>, slot: u64, tag: u64) {
        let bytes = entry_bytes(self.entry, tag);
        let base = self.data + slot * self.slot;
        let mut off = 0usize;
        while off < bytes.len() {
            let n = (self.copy as usize).min(bytes.len() - off);
            c.store(base + off as u64, &bytes[off..off + n]);
            if self.variant == Variant::Strict {
                c.ofence();
            }
            off += n;
        }
    }

    fn store_head(&self, c: &mut Ctx<'_>, v: u64) {
        c.store_u64(self.hdr, v);
        if self.variant == Variant::Strict {
            c.ofence();
        }
    }
}

/// The bytes COPY writes for insert `tag`: the length, then a pattern no other insert writes.
fn entry_bytes(entry: u64, tag: u64) -> Vec<u8> {
    (0..8 + entry).map(|j| entry_byte(entry, tag, j)).collect()
}

/// Byte `j` of [`entry_bytes`].
fn entry_byte(entry: u64, tag: u64, j: u64) -> u8 {
    if j < 8 {
        (entry >> (8 * j)) as u8
    } else {
        ((tag.wrapping_mul(131) + (j - 8) * 7) % 251 + 1) as u8
    }
}

pub static CWL: WorkloadSpec = WorkloadSpec {
    name: "cwl",
    description: "Copy While Locked persistent queue (Memory Persistency, Alg. 1): insert copies the entry and persists head under one MCS lock",
    params: PARAMS,
    generate: generate_cwl,
};

fn generate_cwl(p: &Params) -> Generated {
    let mut g = Gen::new(p);
    let s = Shape::new(p, &mut g);
    let lock = Mcs::new(&mut g.ctx(0), p.threads);
    let mut slots: Vec<u64> = Vec::new(); // tag per slot, in slot order
    let mut op_slot: Vec<u64> = Vec::new(); // slot per logged op
    let mut covered_by: Vec<usize> = Vec::new(); // thread whose head persist covers each slot
    g.publish_setup(p.threads);
    let mut left = vec![p.ops; p.threads];
    let mut live: Vec<usize> = (0..p.threads).collect();
    while !live.is_empty() {
        let i = g.rng.below(live.len() as u64) as usize;
        let t = live[i];
        let c = &mut g.ctx(t);
        let tag = slots.len() as u64 + 1;
        c.begin("insert");
        c.compute(s.compute);
        s.barrier(c); // 3
        lock.lock(c); // 4
        s.lock_barrier(c); // 5
        if s.variant == Variant::Strand {
            c.strand(); // 6
        }
        let head = c.load_u64(s.hdr);
        let slot = head / s.slot;
        s.copy(c, slot, tag); // 7
        s.barrier(c); // 8
        s.store_head(c, head + s.slot); // 9
        s.lock_barrier(c); // 11
        lock.unlock(c); // 12
        s.barrier(c); // 13
        c.end("insert", OpRecord { op: 0, key: slot, value: tag, ..Default::default() });
        slots.push(tag);
        op_slot.push(slot);
        covered_by.push(t);
        left[t] -= 1;
        if left[t] == 0 {
            live.swap_remove(i);
            live.sort_unstable();
        }
    }
    finish(g, s, slots, op_slot, covered_by)
}

pub static TWO_LOCK: WorkloadSpec = WorkloadSpec {
    name: "2lc",
    description: "Two-Lock Concurrent persistent queue (Memory Persistency, Alg. 1): reserve under one MCS lock, copy unlocked, persist head under another",
    params: PARAMS,
    generate: generate_two_lock,
};

/// One thread's insert in flight in 2LC.
#[derive(Clone, Copy)]
struct InFlight {
    phase: u8,
    slot: u64,
    tag: u64,
    node: u64,
}

fn generate_two_lock(p: &Params) -> Generated {
    let mut g = Gen::new(p);
    let s = Shape::new(p, &mut g);
    let total = p.ops * p.threads as u64;
    let (reserve, update, head_v, list) = {
        let c = &mut g.ctx(0);
        let r = Mcs::new(c, p.threads);
        let u = Mcs::new(c, p.threads);
        // Volatile: the reservation head and the insert list (per slot: end offset, done),
        // with the index of its oldest entry.
        let hv = c.alloc_dram(64, 64);
        let list = c.alloc_dram(16 * total + 64, 64);
        (r, u, hv, list)
    };
    let list_oldest = head_v + 8;
    let mut slots: Vec<u64> = Vec::new();
    let mut op_slot: Vec<u64> = Vec::new();
    let mut covered_by: Vec<usize> = vec![0; total as usize];
    g.publish_setup(p.threads);
    let mut left = vec![p.ops; p.threads];
    let mut fly = vec![InFlight { phase: 0, slot: 0, tag: 0, node: 0 }; p.threads];
    let mut live: Vec<usize> = (0..p.threads).collect();
    while !live.is_empty() {
        let i = g.rng.below(live.len() as u64) as usize;
        let t = live[i];
        let f = fly[t];
        let c = &mut g.ctx(t);
        match f.phase {
            0 => {
                c.begin("insert");
                c.compute(s.compute);
                s.lock_barrier_2lc(c);
                reserve.lock(c); // 17
                let start = c.load_u64(head_v); // 18
                c.store_u64(head_v, start + s.slot);
                let slot = start / s.slot;
                let node = list + 16 * slot; // 19: APPEND(headV)
                c.store_u64(node, start + s.slot);
                c.store_u64(node + 8, 0);
                reserve.unlock(c); // 20
                s.lock_barrier_2lc(c);
                let tag = slots.len() as u64 + 1;
                slots.push(tag);
                fly[t] = InFlight { phase: 1, slot, tag, node };
            }
            1 => {
                if s.variant == Variant::Strand {
                    c.strand(); // 21
                                // The strand's copy needs nothing before it; what its head persist must
                                // follow arrives through the update lock.
                }
                s.copy(c, f.slot, f.tag); // 22
                s.barrier(c); // orders this copy before any head persist that covers it
                fly[t].phase = 2;
            }
            _ => {
                s.lock_barrier_2lc(c);
                update.lock(c); // 23
                                // 24: REMOVE(node): mark done; if it is the oldest, advance over done entries.
                c.store_u64(f.node + 8, 1);
                let mut oldest = c.load_u64(list_oldest);
                let mut new_head = None;
                if list + 16 * oldest == f.node {
                    loop {
                        let e = list + 16 * oldest;
                        if oldest >= slots.len() as u64 || c.load_u64(e + 8) != 1 {
                            break;
                        }
                        new_head = Some(c.load_u64(e));
                        covered_by[oldest as usize] = t;
                        oldest += 1;
                    }
                    c.store_u64(list_oldest, oldest);
                }
                if let Some(h) = new_head {
                    s.barrier(c); // 27
                    s.store_head(c, h); // 28
                }
                update.unlock(c); // 31
                s.lock_barrier_2lc(c);
                c.end("insert", OpRecord { op: 0, key: f.slot, value: f.tag, ..Default::default() });
                op_slot.push(f.slot);
                fly[t].phase = 0;
                left[t] -= 1;
                if left[t] == 0 {
                    live.swap_remove(i);
                    live.sort_unstable();
                }
            }
        }
    }
    finish(g, s, slots, op_slot, covered_by)
}

impl Shape {
    /// 2LC keeps lock operations outside barriers except in the strict variant.
    fn lock_barrier_2lc(&self, c: &mut Ctx<'_>) {
        if self.variant == Variant::Strict {
            c.ofence();
        }
    }
}

/// Ends every thread with a dfence and builds the recovery check.
fn finish(mut g: Gen, s: Shape, slots: Vec<u64>, op_slot: Vec<u64>, covered_by: Vec<usize>) -> Generated {
    let threads = g.b.num_threads();
    let final_dfence: Vec<u64> = (0..threads).map(|t| g.ctx(t).dfence()).collect();
    let (trace, log) = g.finish();
    // An insert is durable once its own thread's final dfence and that of the thread whose head
    // persist covers its slot have completed.
    let need = log
        .ops
        .iter()
        .zip(&op_slot)
        .map(|(o, &slot)| (slot, [final_dfence[o.thread as usize], final_dfence[covered_by[slot as usize]]]))
        .collect();
    Generated { trace, recovery: Box::new(QueueRecovery { s, slots, need }) }
}

struct QueueRecovery {
    s: Shape,
    slots: Vec<u64>,
    /// Per insert: its slot and the dfences that make it durable.
    need: Vec<(u64, [u64; 2])>,
}

/// Slots (and inserts) per recovery piece: a crash sweep reruns only the pieces whose words
/// or dfences changed, not the whole queue at every image (that was quadratic in the queue).
const PER_PIECE: u64 = 64;

/// A piece's output: the first slot whose entry differs and the byte where, if any.
struct SlotsPiece(Option<(u64, u64)>);
/// A piece's output: inserts durable by then, and the largest slot among them.
struct DurablePiece(u64, Option<u64>);

impl QueueRecovery {
    /// The first byte where the image's entry in slot `k` differs from the one inserted there.
    fn slot_differs(&self, img: &MemImage, k: u64) -> Option<u64> {
        let s = &self.s;
        let (tag, base, len) = (self.slots[k as usize], s.data + k * s.slot, 8 + s.entry);
        (0..len).step_by(8).find_map(|w| {
            let got = img.read_u64(base + w).to_le_bytes();
            (w..len.min(w + 8)).find(|&j| got[(j - w) as usize] != entry_byte(s.entry, tag, j))
        })
    }
}

impl Recovery for QueueRecovery {
    fn check_with(
        &self,
        img: &MemImage,
        dfence_done: &dyn Fn(u64) -> bool,
        pieces: &mut dyn PieceCache,
    ) -> Result<RecoveryReport, RecoveryError> {
        let s = &self.s;
        let head = img.read_u64(s.hdr);
        if !head.is_multiple_of(s.slot) || head / s.slot > self.slots.len() as u64 {
            return Err(RecoveryError::new(format!(
                "head {head} is not a slot boundary below {} slots of {} B",
                self.slots.len(),
                s.slot
            )));
        }
        let valid = head / s.slot;
        for from in (0..valid).step_by(PER_PIECE as usize) {
            let to = (from + PER_PIECE).min(valid);
            let out = piece(pieces, &[from, to], |_, _| {
                SlotsPiece((from..to).find_map(|k| self.slot_differs(img, k).map(|at| (k, at))))
            });
            if let Some((k, at)) = out.0 {
                return Err(RecoveryError::new(format!(
                    "head {head} covers slot {k}, but its entry differs at byte {at} (persisted before its data)"
                )));
            }
        }
        let mut checked = 0;
        for (i, chunk) in self.need.chunks(PER_PIECE as usize).enumerate() {
            let out = piece(pieces, &[i as u64], |_, done| {
                let durable = chunk.iter().filter(|&&(_, [a, b])| done(a) && done(b));
                DurablePiece(durable.clone().count() as u64, durable.map(|&(slot, _)| slot).max())
            });
            // The first such insert in the chunk, named as a whole pass names it.
            let lost = out
                .1
                .is_some_and(|max| max >= valid)
                .then(|| chunk.iter().find(|&&(slot, [a, b])| slot >= valid && dfence_done(a) && dfence_done(b)));
            if let Some(&(slot, _)) = lost.flatten() {
                return Err(RecoveryError::new(format!(
                    "durable insert into slot {slot} lost: head covers {valid} slots"
                )));
            }
            checked += out.0;
        }
        Ok(RecoveryReport { items: valid, durable_ops_checked: checked })
    }
}
