//! YCSB on N-Store's opt-WAL engine (the Whisper set's `ycsb`), as a local generator for the
//! remote-persistence client `rdma-ycsb`: the persist path of the real program, statement by
//! statement, with N-Store's allocator modelled ([`super::libpm`]).
//!
//! Pattern (github.com/snalli/nstore, branch `placement_new_on_psegments`, run by WHISPER as
//! `nstore -x -k -w -p0.8 -e4 --ycsb`: `-w` the opt-WAL engine, `-p` the share of update
//! transactions; defaults in `src/main.cpp`: one tuple per transaction, 5 VARCHAR value fields of
//! 100 bytes, every field updated):
//! - an update transaction (`ycsb_benchmark::do_update`) builds the new row as a persistent
//!   record (`usertable_record`: `pmalloc` of its 76-byte data, then per field `set_varchar`:
//!   `pmalloc` of the 101-byte string, the copy, the pointer into the data);
//!   `opt_wal_engine::update` serialises the entry (transaction id, type, table, field count,
//!   the tuple's and each old field's address), `pmalloc`s it, copies it and
//!   `pmemalloc_activate`s it, appends it to the log (`plist::push_back`), copies the new
//!   field pointers into the tuple and `persist_data`s it (activates the tuple's data and each
//!   field string), and deletes the new record's data; `txn_end` deletes the old field strings,
//!   the log entries and the log's nodes (`plist::clear`: head and tail set to NULL) and fences:
//!   the commit (`dfence`).
//! - a read transaction (`do_read` → `select`) reads the tuple and its strings; its `txn_end`
//!   still clears the (empty) log, storing NULL into head and tail, and fences.
//!
//! Each client is one N-Store executor with its own partition of the keys (`num_keys /
//! num_executors`), its own pool and log, loaded before the run (the load's allocations are
//! replayed quietly, so the heap's layout is the real one's: per key the record object, its data
//! and five strings, the load's log entries and nodes freed per batch of 100).
//!
//! Simplifications: keys are uniform (N-Store's default Zipf skew 0.1 is nearly uniform); the
//! primary index (a `pbtree`, not modified by updates) is read, not modelled node by node.

use super::libpm::{PList, Pool};
use crate::ctx::{Gen, Interleaver};
use crate::params::{int, ParamSpec, Params};
use crate::recovery::OpRecord;
use crate::registry::Generated;
use crate::whisper::common::OP_READ;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "tuples",
        default: "4096",
        unit: "tuples",
        range: int(1, 1 << 20),
        help: "rows in the YCSB table, partitioned over the clients (N-Store: num_keys / executors)",
    },
    ParamSpec {
        name: "update_pct",
        default: "80",
        unit: "%",
        range: int(0, 100),
        help: "share of update transactions (WHISPER's run: -p0.8)",
    },
    ParamSpec {
        name: "fields",
        default: "5",
        unit: "fields",
        range: int(1, 64),
        help: "VARCHAR value fields per row, all updated (N-Store: ycsb_num_val_fields)",
    },
    ParamSpec {
        name: "field_size",
        default: "100",
        unit: "bytes",
        range: int(1, 1 << 16),
        help: "characters per field (N-Store: ycsb_field_size)",
    },
    ParamSpec {
        name: "compute",
        default: "4000",
        unit: "instructions",
        range: int(0, 1 << 32),
        help: "client CPU work per transaction (one statement): 1 us at 2 GHz, IPC 2, the clients' common per-statement budget",
    },
    super::NSTORE_EPOCH,
];

/// `field_info`'s serialised lengths (`ser_len + 1`): the INTEGER key 11, a VARCHAR pointer 13.
const KEY_LEN: u64 = 11;
const PTR_LEN: u64 = 13;
/// `sizeof(usertable_record)`: the volatile-looking record object (vptr-less `record`: schema
/// pointer, data pointer, data length, persistence flag).
const RECORD_OBJ: u64 = 32;
/// `load_batch_size`: keys per load transaction.
const LOAD_BATCH: u64 = 100;

/// One N-Store executor's database: its pool, log, and per key the tuple's data and strings.
struct Executor {
    pool: Pool,
    log: PList,
    /// Per key: the tuple's data (key + field pointers) and its current field strings.
    data: Vec<u64>,
    strings: Vec<Vec<u64>>,
}

pub fn generate(p: &Params) -> Generated {
    let tuples = p.get("tuples").max(1);
    let upd = p.get("update_pct").min(100);
    let fields = p.get("fields").max(1) as usize;
    let fsize = p.get("field_size").max(1);
    let compute = p.get("compute");
    let keys = (tuples / p.threads as u64).max(1);
    let data_len = KEY_LEN + PTR_LEN * fields as u64;
    let clump = |s: u64| if s <= 64 { 128 } else { 64 + s.div_ceil(64) * 64 };
    let per_key = clump(RECORD_OBJ) + clump(data_len) + fields as u64 * clump(fsize + 1);
    let per_op = 2 * clump(data_len) + 2 * fields as u64 * clump(fsize + 1) + 4096;
    // The load's log entries (two clumps per key, freed per batch) leave holes the next-fit
    // search passes by until it wraps: room for them beyond the 1 MiB of slack, which covers
    // them up to 4096 keys per executor.
    let holes = (keys * (clump(24) + clump(16))).saturating_sub(1 << 20);
    let pool_size = (keys * per_key + holes + p.ops * per_op / 8 + (1 << 20)).next_multiple_of(4096);
    let mut g = Gen::new(p);
    let mut exs: Vec<Executor> = (0..p.threads)
        .map(|t| {
            let base = g.heap.alloc_pm(pool_size, 4096);
            let statics = g.heap.alloc_pm(64, 64);
            let mut c = g.ctx(t);
            let mut pool = Pool::new(base, pool_size);
            // The load (`ycsb_benchmark::load` → `opt_wal_engine::load`), replayed quietly.
            let (mut data, mut strings) = (Vec::new(), Vec::new());
            let mut batch = Vec::new();
            for k in 0..keys {
                pool.reserve(&mut c, RECORD_OBJ);
                let d = pool.reserve(&mut c, data_len);
                strings.push((0..fields).map(|_| pool.reserve(&mut c, fsize + 1)).collect());
                data.push(d);
                batch.push(pool.reserve(&mut c, 24)); // "txid 0 0 0x..." entry
                batch.push(pool.reserve(&mut c, 16)); // its log node
                if (k + 1) % LOAD_BATCH == 0 || k + 1 == keys {
                    for e in batch.drain(..) {
                        pool.free(&mut c, e);
                    }
                }
            }
            pool.quiet = false;
            Executor { pool, log: PList::new(statics), data, strings }
        })
        .collect();
    let mut txid = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let ex = &mut exs[c.thread];
        let key = c.rng().below(keys);
        let update = c.rng().percent(upd);
        let label = if update { "update" } else { "read" };
        c.begin(label);
        txid += 1;
        c.compute(compute);
        let tuple = ex.data[key as usize];
        if update {
            // The new row: `usertable_record(..., is_persistent = 1)`.
            let rdata = ex.pool.reserve(c, data_len);
            c.store(rdata, &(key as u32).to_le_bytes());
            let mut new = Vec::with_capacity(fields);
            for f in 0..fields {
                let s = ex.pool.reserve(c, fsize + 1);
                let mut bytes = vec![b'x'; fsize as usize];
                bytes.push(0);
                c.store(s, &bytes);
                c.store_u64(rdata + KEY_LEN + PTR_LEN * f as u64, s);
                new.push(s);
            }
            // `opt_wal_engine::update`: index lookup, the entry, its activation, the log link.
            c.load_bytes(tuple, data_len as usize);
            let old = std::mem::replace(&mut ex.strings[key as usize], new.clone());
            let mut entry = format!("{txid} 2 0 {fields} {tuple:#x} ");
            for (f, o) in old.iter().enumerate() {
                entry.push_str(&format!("{} {o:#x} ", f + 1));
            }
            let e = ex.log.append_entry(c, &mut ex.pool, entry);
            // `set_data` of every field (the pointer's serialised length), then `persist_data`.
            for (f, s) in new.iter().enumerate() {
                let mut ptr = s.to_le_bytes().to_vec();
                ptr.resize(PTR_LEN as usize, 0);
                c.store(tuple + KEY_LEN + PTR_LEN * f as u64, &ptr);
            }
            ex.pool.activate(c, tuple);
            for &s in &new {
                ex.pool.activate(c, s);
            }
            ex.pool.free(c, rdata); // `delete rec_ptr` frees its data
                                    // `txn_end`: the commit free list, the log entries, the log's nodes.
            for o in old {
                ex.pool.free(c, o);
            }
            ex.pool.free(c, e);
        } else {
            c.load_bytes(tuple, data_len as usize);
            for &s in &ex.strings[key as usize] {
                c.load_bytes(s, fsize as usize + 1);
            }
        }
        ex.log.clear(c, &mut ex.pool);
        c.end(label, OpRecord { op: if update { 1 } else { OP_READ }, key, ..Default::default() });
        c.op_dfence();
    });
    let (trace, _) = g.finish();
    Generated { trace, recovery: Box::new(super::ServerReplica) }
}

#[cfg(test)]
mod tests {
    use pmsim_trace::{Kind, Trace};

    fn gen(extra: &[(&str, &str)]) -> Trace {
        let mut m: std::collections::BTreeMap<String, String> =
            [("threads", "1"), ("tuples", "1"), ("epoch_compute", "0")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        for (k, v) in extra {
            m.insert(k.to_string(), v.to_string());
        }
        crate::generate("rdma-ycsb", &m).unwrap().trace
    }

    /// Regions grouped by persist epoch (a run of `rdma_pwrite`s), their bytes, and the waits.
    fn pattern(t: &Trace) -> (Vec<Vec<u64>>, usize) {
        let (mut epochs, mut waits, mut open) = (Vec::new(), 0, false);
        for e in &t.threads[0].events {
            match e.kind {
                Kind::RdmaPwrite if open => epochs.last_mut().map(|v: &mut Vec<u64>| v.push(e.data)).unwrap_or(()),
                Kind::RdmaPwrite => {
                    epochs.push(vec![e.data]);
                    open = true;
                }
                Kind::RdmaWait => waits += 1,
                _ => open = false,
            }
            if e.kind == Kind::RdmaWait {
                open = false;
            }
        }
        (epochs, waits)
    }

    /// One update transaction on a freshly loaded one-key table, counted by hand from N-Store's
    /// code (github.com/snalli/nstore, `placement_new_on_psegments`; defaults of `src/main.cpp`:
    /// 5 VARCHAR fields of 100 characters, all updated). After the load the last clump before
    /// the free tail is the load's freed log entry, merged with its node and the tail (the
    /// batch's `txn_end`: entry `pmemalloc_free` case C, node case F-C-L), and `prev_clp` points
    /// at it. Then, in `ycsb_benchmark::do_update` and `opt_wal_engine::update`/`txn_end`:
    /// - 8 `pmalloc`s (the new record's data, 5 strings, the entry, the log node), each
    ///   splitting the free tail: 3 `pmem_persist`s each (`pmemalloc_reserve`) = 24;
    /// - 8 `pmemalloc_activate`s (entry, node in `plist::init`, the tuple's data, 5 strings),
    ///   2 each (payload, header) = 16;
    /// - frees: the new record's data (`delete rec_ptr`; neighbours in use: case C, 1), the 5
    ///   old strings (the first has the old data before it and the second string after it, both
    ///   in use: 1; each later one follows a freed string: case F-C, 2; the last also has the
    ///   freed record data after it: F-C-L, 2) = 9, the entry (C: 1) and the node (after the
    ///   freed entry, before the free tail: F-C-L, 2) = 13 in all;
    /// - `txn_end`'s `PM_FENCE`, the commit.
    ///
    /// That is 53 ordering points before the commit; 5 of them (the strings' payload persists
    /// in `persist_data`) follow a fence with no store in between, so 48 epochs carry data, and
    /// the commit's epoch (head and tail set to NULL) makes 49, with one wait.
    #[test]
    fn an_update_transaction_has_n_stores_persist_epochs() {
        let t = gen(&[("ops", "1"), ("update_pct", "100")]);
        let (epochs, waits) = pattern(&t);
        assert_eq!(epochs.len(), 49);
        assert_eq!(waits, 1);
        // The commit's epoch: `sp->ptrs` head and tail, two adjacent words, one 16-byte region.
        assert_eq!(epochs.last().unwrap(), &vec![16]);
        // The entry's payload persist (`pmemalloc_activate` of the 1-digit-txid entry:
        // "1 2 0 5 0x... 1 0x... ... 5 0x... " and its NUL) is one region of the entry's length.
        assert!(epochs.iter().any(|e| e.len() == 1 && (90..=130).contains(&e[0])));
    }

    /// A read transaction persists nothing of its own, but its `txn_end` clears the (empty) log:
    /// head and tail stored NULL and fenced — one 16-byte region, one wait.
    #[test]
    fn a_read_transaction_clears_the_log_head_and_tail() {
        let t = gen(&[("ops", "1"), ("update_pct", "0")]);
        assert_eq!(pattern(&t), (vec![vec![16]], 1));
    }

    /// Every update commits once; fields scale the allocator's work (5 → 1 field removes 4
    /// strings' allocation, activation and free from each transaction).
    #[test]
    fn fewer_fields_mean_fewer_epochs() {
        let five = pattern(&gen(&[("ops", "20"), ("update_pct", "100")]));
        let one = pattern(&gen(&[("ops", "20"), ("update_pct", "100"), ("fields", "1")]));
        assert_eq!((five.1, one.1), (20, 20));
        assert!(one.0.len() + 20 * 4 * 5 <= five.0.len(), "{} {}", one.0.len(), five.0.len());
    }
}
