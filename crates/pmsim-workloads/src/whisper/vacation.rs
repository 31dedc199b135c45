//! `vacation`: STAMP's travel reservation system made persistent with undo-logged transactions
//! (WHISPER's PMDK/Mnemosyne port), under one coarse lock.
//!
//! Pattern (STAMP `vacation`: client.c / manager.c; persistent as in WHISPER): each client
//! transaction runs under a coarse lock: it looks items up in the car/flight/room tables and the
//! customer table (index walks: loads), and every object it modifies is first added to the undo
//! log (PMDK `TX_ADD`: old contents into a log entry, persisted with an `ofence`, once per object
//! per transaction) and then updated in place. Commit orders the data (`ofence`), clears the log
//! and `dfence`s; then, as the ASAP paper notes, the client does bookkeeping of volatile data
//! (DRAM stores, compute) before releasing the lock. Transactions: make-reservation (query up
//! to `queries` items, reserve the priciest of each type: record `numUsed++/numFree--`, add a
//! reservation to the customer, creating it if absent), delete-customer (cancel all its
//! reservations, remove it), update-tables (add or remove 100 units of capacity, set price).
//!
//! Simplifications: the red-black-tree maps are a static search index over fixed ids (a lookup
//! emits the tree path's loads; relations are never removed from the index, capacity is);
//! a customer holds at most `MAX_RES` reservations inline. Recovery: roll back the active
//! transaction, then check every record (`used + free == total`), every customer, and the
//! cross-table invariant that each record's `numUsed` equals the reservations customers hold on
//! it (a torn transaction breaks it), plus the per-word history.
//!
//! Built on [`crate::blocks::undo_tx`] (its three-kind STAMP mix is drawn here).

use crate::atlas::undo_log::Tx;
use crate::blocks::undo_tx::{Structure, UndoRecovery, UndoTxs};
use crate::ctx::{Ctx, Gen, Interleaver};
use crate::params::{compute, int, percent, ParamSpec, Params};
use crate::recovery::{OpRecord, RecoveryError};
use crate::registry::{Generated, WorkloadSpec};
use crate::whisper::common::OP_READ;
use pmsim_trace::MemImage;

pub static VACATION: WorkloadSpec = WorkloadSpec {
    name: "vacation",
    description: "STAMP vacation, persistent: undo-logged tx (TX_ADD + ofence per object) under a coarse lock, dfence at commit, volatile bookkeeping before unlock",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "relations",
        default: "1024",
        unit: "rows",
        range: int(1, 1 << 18),
        help: "rows per table (cars, flights, rooms, customers)",
    },
    ParamSpec {
        name: "queries",
        default: "4",
        unit: "queries",
        range: int(1, 1 << 16),
        help: "max items queried per transaction (STAMP -n)",
    },
    ParamSpec {
        name: "query_pct",
        default: "60",
        unit: "%",
        range: int(1, 100),
        help: "share of the ids that queries range over (STAMP -q)",
    },
    percent("user_pct", "90", "share of make-reservation transactions (STAMP -u)"),
    compute("300", "non-memory work per transaction (client request generation)"),
    ParamSpec {
        name: "bookkeeping",
        default: "200",
        unit: "instructions",
        range: int(0, 1_000_000),
        help: "volatile bookkeeping after commit, before the unlock",
    },
];

const MAX_RES: u64 = 12;
// Record: {id+1, used, free, total, price}.
const USED: u64 = 8;
const FREE: u64 = 16;
const TOTAL: u64 = 24;
const PRICE: u64 = 32;
const REC: u64 = 40;
// Customer: {id+1, count, res[MAX_RES] = {type, id, price}}.
const CUST: u64 = 16 + MAX_RES * 24;

struct Layout {
    tables: [u64; 3],
    index: [u64; 4],
    customers: u64,
    n: u64,
}

impl Layout {
    fn rec(&self, t: usize, id: u64) -> u64 {
        self.tables[t] + id * 64
    }
    fn cust(&self, id: u64) -> u64 {
        self.customers + id * CUST.div_ceil(64) * 64
    }
    /// The map lookup: the loads of a balanced search tree's path to `id`.
    fn lookup(&self, c: &mut Ctx<'_>, table: usize, id: u64) {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let k = c.load_u64(self.index[table] + mid * 8);
            if k == id + 1 {
                break;
            }
            if k < id + 1 {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
    }
}

fn generate(p: &Params) -> Generated {
    let n = p.get("relations").max(1);
    let nq = p.get("queries").max(1);
    let range = (n * p.get("query_pct").clamp(1, 100) / 100).max(1);
    let user = p.get("user_pct").min(100);
    let (compute, book) = (p.get("compute"), p.get("bookkeeping"));
    let mut g = Gen::new(p);
    let tables = [0, 1, 2].map(|_| g.heap.alloc_pm(n * 64, 4096));
    let index = [0, 1, 2, 3].map(|_| g.heap.alloc_pm(n * 8, 64));
    let customers = g.heap.alloc_pm(n * CUST.div_ceil(64) * 64, 4096);
    let l = Layout { tables, index, customers, n };
    let mut undo = UndoTxs::new(&mut g.heap, p.threads);
    let lock = g.heap.alloc_dram(64, 64);
    let stats = g.heap.alloc_dram(64 * p.threads as u64, 64);
    {
        let mut c = g.ctx(0);
        let mut words = Vec::new();
        for t in 0..3 {
            for id in 0..n {
                let total = (c.rng().below(5) + 1) * 100;
                let price = c.rng().below(5) * 10 + 50;
                let a = l.rec(t, id);
                let rec: Vec<u8> = [id + 1, 0, total, total, price].iter().flat_map(|w| w.to_le_bytes()).collect();
                c.store(a, &rec);
                words.extend((0..REC / 8).map(|w| a + w * 8));
            }
        }
        for t in 0..4 {
            for id in 0..n {
                c.store_u64(l.index[t] + id * 8, id + 1);
                words.push(l.index[t] + id * 8);
            }
        }
        undo.setup_done(&mut c, words);
    }
    let mut txid = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let action = c.rng().below(100);
        let (label, mut op) = if action < user {
            ("make-reservation", 0)
        } else if action % 2 == 0 {
            ("delete-customer", 2)
        } else {
            ("update-tables", 1)
        };
        c.begin(label);
        c.compute(compute);
        c.lock(lock);
        txid += 1;
        let mut tx = undo.begin(c, txid, true, false);
        let mut key = 0;
        match op {
            0 => key = make_reservation(c, &l, &mut tx, nq, range),
            2 => key = delete_customer(c, &l, &mut tx, range),
            _ => update_tables(c, &l, &mut tx, nq, range),
        }
        if undo.commit(c, tx) == 0 {
            op = OP_READ;
        }
        c.end(label, OpRecord { op, key, value: txid, ..Default::default() });
        if op != OP_READ {
            c.op_dfence();
        }
        // Volatile bookkeeping (client statistics) before releasing the coarse lock.
        c.compute(book);
        let s = stats + c.thread as u64 * 64;
        let v = c.load_u64(s);
        c.store_u64(s, v + 1);
        c.unlock(lock);
    });
    let trace = undo.finish(g);
    Generated { trace, recovery: Box::new(UndoRecovery { undo, structure: VacRecovery { l } }) }
}

fn make_reservation(c: &mut Ctx<'_>, l: &Layout, tx: &mut Tx, nq: u64, range: u64) -> u64 {
    let cust = c.rng().below(range);
    let mut best: [Option<(u64, u64)>; 3] = [None; 3]; // (price, id)
    for _ in 0..c.rng().below(nq) + 1 {
        let t = c.rng().below(3) as usize;
        let id = c.rng().below(range);
        l.lookup(c, t, id);
        let a = l.rec(t, id);
        let (free, price) = (c.load_u64(a + FREE), c.load_u64(a + PRICE));
        if free > 0 && best[t].is_none_or(|(p, _)| price > p) {
            best[t] = Some((price, id));
        }
    }
    if best.iter().all(|b| b.is_none()) {
        return cust;
    }
    l.lookup(c, 3, cust);
    let ca = l.cust(cust);
    if c.load_u64(ca) == 0 {
        tx.add(c, ca, 16);
        tx.write_u64(c, ca, cust + 1);
        tx.write_u64(c, ca + 8, 0);
    }
    for (t, b) in best.iter().enumerate() {
        let Some((price, id)) = *b else { continue };
        let count = c.load_u64(ca + 8);
        if count >= MAX_RES {
            break;
        }
        let a = l.rec(t, id);
        tx.add(c, a, REC);
        let (used, free) = (c.load_u64(a + USED), c.load_u64(a + FREE));
        tx.write_u64(c, a + USED, used + 1);
        tx.write_u64(c, a + FREE, free - 1);
        let slot = ca + 16 + count * 24;
        let info: Vec<u8> = [t as u64, id, price].iter().flat_map(|w| w.to_le_bytes()).collect();
        tx.add(c, ca, 16);
        tx.write(c, slot, &info);
        tx.write_u64(c, ca + 8, count + 1);
    }
    cust
}

fn delete_customer(c: &mut Ctx<'_>, l: &Layout, tx: &mut Tx, range: u64) -> u64 {
    let cust = c.rng().below(range);
    l.lookup(c, 3, cust);
    let ca = l.cust(cust);
    if c.load_u64(ca) == 0 {
        return cust;
    }
    let count = c.load_u64(ca + 8);
    for i in 0..count.min(MAX_RES) {
        let (t, id) = (c.load_u64(ca + 16 + i * 24) as usize, c.load_u64(ca + 24 + i * 24));
        l.lookup(c, t, id);
        let a = l.rec(t.min(2), id);
        tx.add(c, a, REC);
        let (used, free) = (c.load_u64(a + USED), c.load_u64(a + FREE));
        tx.write_u64(c, a + USED, used.saturating_sub(1));
        tx.write_u64(c, a + FREE, free + 1);
    }
    tx.add(c, ca, 16);
    tx.write_u64(c, ca, 0);
    tx.write_u64(c, ca + 8, 0);
    cust
}

fn update_tables(c: &mut Ctx<'_>, l: &Layout, tx: &mut Tx, nq: u64, range: u64) {
    for _ in 0..c.rng().below(nq) + 1 {
        let t = c.rng().below(3) as usize;
        let id = c.rng().below(range);
        let add = c.rng().percent(50);
        let price = c.rng().below(5) * 10 + 50;
        l.lookup(c, t, id);
        let a = l.rec(t, id);
        let (free, total) = (c.load_u64(a + FREE), c.load_u64(a + TOTAL));
        if add {
            tx.add(c, a, REC);
            tx.write_u64(c, a + FREE, free + 100);
            tx.write_u64(c, a + TOTAL, total + 100);
            tx.write_u64(c, a + PRICE, price);
        } else if free >= 100 {
            tx.add(c, a, REC);
            tx.write_u64(c, a + FREE, free - 100);
            tx.write_u64(c, a + TOTAL, total - 100);
        }
    }
}

struct VacRecovery {
    l: Layout,
}

impl Structure for VacRecovery {
    fn check(&self, img: &MemImage, _undo: &UndoTxs, _dfence_done: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError> {
        let l = &self.l;
        let err = |m: String| Err(RecoveryError::new(m));
        let mut held = vec![vec![0u64; l.n as usize]; 3];
        let mut items = 0;
        for cid in 0..l.n {
            let ca = l.cust(cid);
            let (id, count) = (img.read_u64(ca), img.read_u64(ca + 8));
            if id == 0 {
                if count != 0 {
                    return err(format!("absent customer {cid} has {count} reservations"));
                }
                continue;
            }
            if id != cid + 1 || count > MAX_RES {
                return err(format!("customer {cid} is malformed (id word {id}, {count} reservations)"));
            }
            items += 1;
            for i in 0..count {
                let (t, rid) = (img.read_u64(ca + 16 + i * 24), img.read_u64(ca + 24 + i * 24));
                if t > 2 || rid >= l.n {
                    return err(format!("customer {cid} reservation {i} names no item ({t}, {rid})"));
                }
                held[t as usize][rid as usize] += 1;
            }
        }
        for (t, h) in held.iter().enumerate() {
            for id in 0..l.n {
                let a = l.rec(t, id);
                let [rid, used, free, total] = [0, USED, FREE, TOTAL].map(|o| img.read_u64(a + o));
                if rid != id + 1 || used + free != total {
                    return err(format!("table {t} row {id}: id {rid}, used {used} + free {free} != total {total}"));
                }
                if used != h[id as usize] {
                    return err(format!("table {t} row {id}: {used} used but customers hold {}", h[id as usize]));
                }
                items += 1;
            }
        }
        Ok(items)
    }
}
