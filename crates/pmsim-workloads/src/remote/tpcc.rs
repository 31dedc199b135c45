//! TPC-C on N-Store's opt-WAL engine (the Whisper set's `tpcc`), as a local generator for the
//! remote-persistence client `rdma-tpcc`, on the modelled N-Store allocator ([`super::libpm`]).
//!
//! Pattern (github.com/snalli/nstore, branch `placement_new_on_psegments`, run by WHISPER as
//! `nstore -w --tpcc`; `src/opt_wal_engine.cpp`, `src/tpcc_benchmark.cpp`): an UPDATE
//! statement (`opt_wal_engine::update`; its new values come in a volatile record) serialises
//! the fields' before-images into an entry that is `pmalloc`ed, copied, `pmemalloc_activate`d
//! and appended to the log (`plist::push_back`: node `pmalloc`, activation, the old tail's link
//! persisted), copies the fields into the row and `persist_data`s it, which re-activates the
//! row's data and every one of its VARCHAR strings (2 persists each, whatever changed). An
//! INSERT (`opt_wal_engine::insert`) of a record the benchmark built persistent (`new
//! ((record*) pmalloc(..))`: object, data and each VARCHAR string `pmalloc`ed) logs an entry,
//! activates the record, its data and strings, appends it to the table's `pm_data` list and
//! stores the primary index's leaf slot. A DELETE (Delivery's new order) logs an entry, persists
//! the list link that unlinks the record, clears the index slot and frees the record at commit.
//! `txn_end` deletes the commit free list and the log's entries and nodes and fences: the
//! commit (`dfence`); read-only transactions still clear the (empty) log. The transaction mix
//! is TPC-C's: New-Order 45% (district next-order id, order and new-order rows, 5-15 order
//! lines each reading an item and updating its stock), Payment 43% (warehouse, district and
//! customer balances, a history row), Delivery 4% (ten districts: oldest new-order removed,
//! carrier set, customer balance), Order-Status 4% and Stock-Level 4% (read only).
//!
//! Simplifications: one warehouse per client (clients are independent, as the seed's 4 clients
//! are); `items` and `customers` are scaled down (parameters) and the order tables start with one
//! row; schemas count INTEGER, DOUBLE and VARCHAR columns as N-Store serialises them (11, 16 and
//! 13-byte slots), string lengths from TPC-C's; the primary index (`pbtree`) is one leaf slot
//! per row (its inserts store, they persist only on node splits); no secondary indexes; an
//! updated row's fields are given as a byte range.

use super::libpm::{PList, Pool};
use crate::ctx::{Ctx, Gen, Interleaver};
use crate::params::{int, ParamSpec, Params};
use crate::recovery::{OpRecord, Recovery, RecoveryError, RecoveryReport};
use crate::registry::Generated;
use crate::whisper::common::value_bytes;
use pmsim_trace::MemImage;

pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "items",
        default: "1000",
        unit: "rows",
        range: int(1, 1 << 17),
        help: "ITEM and STOCK rows per warehouse (TPC-C: 100,000)",
    },
    ParamSpec {
        name: "customers",
        default: "300",
        unit: "rows",
        range: int(1, 1 << 12),
        help: "CUSTOMER rows per district (TPC-C: 3,000)",
    },
    ParamSpec {
        name: "compute",
        default: "4000",
        unit: "instructions",
        range: int(0, 1 << 32),
        help: "client CPU work per SQL statement (1 us at 2 GHz, IPC 2)",
    },
    super::NSTORE_EPOCH,
];

const DISTRICTS: u64 = 10;
// Schemas as N-Store serialises them (`field_info`: INTEGER 11 bytes, DOUBLE 16, VARCHAR a
// 13-byte pointer slot to a separately allocated string): (INTEGERs, DOUBLEs, VARCHAR lengths),
// from `tpcc_benchmark.cpp`'s `create_*_table`.
type Schema = (u64, u64, &'static [u64]);
const WAREHOUSE: Schema = (1, 2, &[16, 32, 32, 32, 2, 9]);
const DISTRICT: Schema = (3, 2, &[16, 32, 32, 32, 2, 9]);
const CUSTOMER: Schema = (5, 4, &[32, 2, 32, 32, 32, 32, 2, 9, 32, 2, 500]);
const STOCK: Schema = (6, 0, &[24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 50]);
const ITEM: Schema = (2, 1, &[24, 50]);
const ORDER: Schema = (8, 0, &[]);
const NEW_ORDER: Schema = (3, 0, &[]);
const ORDER_LINE: Schema = (8, 1, &[24]);
const HISTORY: Schema = (6, 1, &[24]);
/// `sizeof(record)`: schema pointer, data pointer, data length, persistence flag.
const RECORD_OBJ: u64 = 32;

/// One client's N-Store executor: its pool, its log (`db->log`), the entries and the commit
/// free list of the running transaction, and the static area's next `sp->ptrs` pair.
struct Engine {
    pool: Pool,
    log: PList,
    entries: Vec<u64>,
    frees: Vec<u64>,
    statics: u64,
    txid: u64,
}

impl Engine {
    /// A log entry (`entry_stream` serialised): `pmalloc`, copy, `pmemalloc_activate`, appended
    /// to the log.
    fn log(&mut self, c: &mut Ctx<'_>, text: String) {
        let e = self.log.append_entry(c, &mut self.pool, text);
        self.entries.push(e);
    }

    /// `txn_end`: the commit free list and the log entries deleted, the log cleared; the caller's
    /// `dfence` is its fence.
    fn txn_end(&mut self, c: &mut Ctx<'_>) {
        for f in std::mem::take(&mut self.frees) {
            self.pool.free(c, f);
        }
        for e in std::mem::take(&mut self.entries) {
            self.pool.free(c, e);
        }
        self.log.clear(c, &mut self.pool);
    }
}

/// A persistent row: the record object, its data, its VARCHAR strings.
#[derive(Clone)]
struct Row {
    obj: u64,
    data: u64,
    strings: Vec<u64>,
}

struct Table {
    id: u64,
    schema: Schema,
    rows: Vec<Row>,
    /// `pm_data`: the table's persistent list of its records.
    list: PList,
    /// The primary index's leaf slots (a `pbtree` insert stores key and record pointer).
    index: u64,
    index_slots: u64,
}

impl Table {
    fn data_len(&self) -> u64 {
        self.schema.0 * 11 + self.schema.1 * 16 + self.schema.2.len() as u64 * 13
    }

    /// A record built as N-Store builds a persistent one (`record(sptr, 1)`: the data
    /// `pmalloc`ed; each VARCHAR `set_varchar`: string `pmalloc`ed, copied, pointer stored).
    fn build(&self, c: &mut Ctx<'_>, pool: &mut Pool, obj: u64, tag: u64) -> Row {
        let len = self.data_len();
        let data = pool.reserve(c, len);
        let inl = self.schema.0 * 11 + self.schema.1 * 16;
        if !pool.quiet {
            c.store_u64(obj, data);
            c.store_u64(obj + 8, len);
            c.store(data, &value_bytes(tag, inl as usize));
        }
        let mut strings = Vec::new();
        for (k, &sz) in self.schema.2.iter().enumerate() {
            let s = pool.reserve(c, sz + 1);
            if !pool.quiet {
                c.store(s, &value_bytes(tag, sz as usize + 1));
                c.store_u64(data + inl + 13 * k as u64, s);
            }
            strings.push(s);
        }
        Row { obj, data, strings }
    }

    fn new(c: &mut Ctx<'_>, eng: &mut Engine, id: u64, schema: Schema, rows: u64) -> Table {
        let head = eng.statics;
        eng.statics += 16;
        let index_slots = (rows * 4).max(64);
        let index = c.alloc_pm(index_slots * 16, 64);
        let mut t = Table { id, schema, rows: Vec::new(), list: PList::new(head), index, index_slots };
        // The load (`tpcc_benchmark::load_*`), replayed quietly: each row's object, data and
        // strings, and its `pm_data` node.
        let mut tail = 0;
        for _ in 0..rows.max(1) {
            let obj = eng.pool.reserve(c, RECORD_OBJ);
            let row = t.build(c, &mut eng.pool, obj, 0);
            t.rows.push(row);
            tail = eng.pool.reserve(c, 16);
        }
        t.list = PList::with_tail(head, tail);
        t
    }

    /// Reads `len` bytes of row `i` at `off` (a SELECT of some columns).
    fn read(&self, c: &mut Ctx<'_>, i: u64, off: u64, len: u64) {
        let r = &self.rows[(i as usize).min(self.rows.len() - 1)];
        let len = len.min(self.data_len());
        c.load_bytes(r.data + off.min(self.data_len() - len), len as usize);
    }

    /// `opt_wal_engine::update` of `len` bytes of inlined fields at `off`: the entry (the
    /// fields' before-images as text), its append, the fields copied in, and `persist_data`:
    /// the row's data and every VARCHAR string re-activated.
    fn update(&self, c: &mut Ctx<'_>, eng: &mut Engine, i: u64, off: u64, len: u64, tag: u64) {
        let r = &self.rows[(i as usize).min(self.rows.len() - 1)];
        let len = len.min(self.data_len());
        let at = r.data + off.min(self.data_len() - len);
        let old = c.load_bytes(at, len as usize);
        let before: u64 = old.iter().map(|&b| b as u64).sum();
        let fields = len.div_ceil(11);
        eng.log(c, format!("{} 2 {} {fields} {:#x} {off}  {before} ", eng.txid, self.id, r.obj));
        c.store(at, &value_bytes(tag, len as usize));
        eng.pool.activate(c, r.data);
        for &s in &r.strings {
            eng.pool.activate(c, s);
        }
    }

    /// `opt_wal_engine::insert` of a new persistent record (`new ((record*) pmalloc(..))`): the
    /// record built, the entry, the record and its data and strings activated, the record
    /// appended to `pm_data`, the index leaf slot stored.
    fn insert(&mut self, c: &mut Ctx<'_>, eng: &mut Engine, tag: u64) -> u64 {
        let obj = eng.pool.reserve(c, RECORD_OBJ);
        let row = self.build(c, &mut eng.pool, obj, tag);
        let n = self.rows.len() as u64;
        c.load_u64(self.index + (n % self.index_slots) * 16);
        eng.log(c, format!("{} 0 {} {obj:#x}", eng.txid, self.id));
        eng.pool.activate(c, obj);
        eng.pool.activate(c, row.data);
        for &s in &row.strings {
            eng.pool.activate(c, s);
        }
        self.list.push_back(c, &mut eng.pool, obj);
        c.store_u64(self.index + (n % self.index_slots) * 16, n);
        c.store_u64(self.index + (n % self.index_slots) * 16 + 8, obj);
        self.rows.push(row);
        n
    }

    /// `opt_wal_engine::remove` of row `i`: the entry, `pm_data->erase` (the predecessor's link
    /// persisted), the index slot cleared; the record joins the commit free list.
    fn remove(&self, c: &mut Ctx<'_>, eng: &mut Engine, i: u64) {
        let r = &self.rows[(i as usize).min(self.rows.len() - 1)];
        eng.log(c, format!("{} 1 {} {:#x}", eng.txid, self.id, r.obj));
        c.store_u64(r.obj + 16, 0);
        c.ofence();
        c.store_u64(self.index + (i % self.index_slots) * 16, 0);
        eng.frees.push(r.obj);
    }
}

struct Warehouse {
    warehouse: Table,
    district: Table,
    customer: Table,
    stock: Table,
    item: Table,
    order: Table,
    new_order: Table,
    order_line: Table,
    history: Table,
    /// Per district: next order id (volatile mirror of the district row's field) and the oldest
    /// undelivered order.
    next_o: Vec<u64>,
    oldest: Vec<u64>,
}

/// No recovery check of its own: these run as clients (the server's images are checked by the
/// region-order rule).
struct Unchecked;

impl Recovery for Unchecked {
    fn check(&self, _image: &MemImage, _done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError> {
        Ok(RecoveryReport::default())
    }
}

pub fn generate(p: &Params) -> Generated {
    let items = p.get("items").max(1);
    let cust = p.get("customers").max(1);
    let compute = p.get("compute");
    let ops = p.ops.max(1);
    let mut g = Gen::new(p);
    let rows = 1 + DISTRICTS + DISTRICTS * cust + 2 * items;
    // Loaded rows (object, data, strings: at most 64 + 17 * 576 bytes each) and what the run
    // inserts (at most 18 rows per New-Order) and frees again.
    let pool_size = ((rows + ops * 20) * 12 * 1024 + (1 << 22)).next_multiple_of(4096);
    let mut clients: Vec<(Engine, Warehouse)> = (0..p.threads)
        .map(|t| {
            let base = g.heap.alloc_pm(pool_size, 4096);
            let statics = g.heap.alloc_pm(64 * 16, 64);
            let mut c = g.ctx(t);
            let mut eng = Engine {
                pool: Pool::new(base, pool_size),
                log: PList::new(statics),
                entries: Vec::new(),
                frees: Vec::new(),
                statics: statics + 16,
                txid: 0,
            };
            let w = Warehouse {
                warehouse: Table::new(&mut c, &mut eng, 0, WAREHOUSE, 1),
                district: Table::new(&mut c, &mut eng, 1, DISTRICT, DISTRICTS),
                customer: Table::new(&mut c, &mut eng, 3, CUSTOMER, DISTRICTS * cust),
                stock: Table::new(&mut c, &mut eng, 8, STOCK, items),
                item: Table::new(&mut c, &mut eng, 2, ITEM, items),
                order: Table::new(&mut c, &mut eng, 4, ORDER, 1),
                new_order: Table::new(&mut c, &mut eng, 5, NEW_ORDER, 1),
                order_line: Table::new(&mut c, &mut eng, 6, ORDER_LINE, 1),
                history: Table::new(&mut c, &mut eng, 7, HISTORY, 1),
                next_o: vec![0; DISTRICTS as usize],
                oldest: vec![0; DISTRICTS as usize],
            };
            eng.pool.quiet = false;
            (eng, w)
        })
        .collect();
    let mut txid = 0u64;
    let mut tag = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let (eng, w) = &mut clients[c.thread];
        let kind = c.rng().below(100);
        let d = c.rng().below(DISTRICTS);
        let label = match kind {
            0..45 => "new_order",
            45..88 => "payment",
            88..92 => "delivery",
            92..96 => "order_status",
            _ => "stock_level",
        };
        c.begin(label);
        txid += 1;
        eng.txid = txid;
        tag += 1;
        let cid = d * cust + c.rng().below(cust);
        match label {
            "new_order" => {
                let lines = 5 + c.rng().below(11);
                c.compute(compute);
                w.warehouse.read(c, 0, 0, 16);
                c.compute(compute);
                w.district.read(c, d, 0, 24);
                w.district.update(c, eng, d, 16, 8, tag); // d_next_o_id
                c.compute(compute);
                w.customer.read(c, cid, 0, 64);
                c.compute(compute);
                w.order.insert(c, eng, tag);
                c.compute(compute);
                w.new_order.insert(c, eng, tag);
                for _ in 0..lines {
                    let i = c.rng().below(items);
                    c.compute(compute);
                    w.item.read(c, i, 0, u64::MAX);
                    c.compute(compute);
                    w.stock.read(c, i, 0, 64);
                    w.stock.update(c, eng, i, 0, 24, tag); // quantity, ytd, order_cnt
                    c.compute(compute);
                    w.order_line.insert(c, eng, tag);
                }
                w.next_o[d as usize] += 1;
            }
            "payment" => {
                c.compute(compute);
                w.warehouse.update(c, eng, 0, 88, 8, tag); // w_ytd
                c.compute(compute);
                w.district.update(c, eng, d, 88, 8, tag); // d_ytd
                c.compute(compute);
                w.customer.read(c, cid, 0, 128);
                w.customer.update(c, eng, cid, 128, 24, tag); // balance, ytd_payment, payment_cnt
                c.compute(compute);
                w.history.insert(c, eng, tag);
            }
            "delivery" => {
                for dd in 0..DISTRICTS as usize {
                    c.compute(compute);
                    if w.oldest[dd] >= w.next_o[dd] {
                        continue;
                    }
                    let o = w.oldest[dd];
                    w.oldest[dd] += 1;
                    w.new_order.remove(c, eng, o + 1); // delete the oldest new order
                    w.order.update(c, eng, o + 1, 16, 8, tag); // o_carrier_id
                    let cc = dd as u64 * cust + o % cust;
                    w.customer.update(c, eng, cc, 128, 8, tag); // balance
                }
            }
            "order_status" => {
                c.compute(compute);
                w.customer.read(c, cid, 0, 128);
                for k in 0..10 {
                    w.order_line.read(c, k, 0, u64::MAX);
                }
            }
            _ => {
                c.compute(compute);
                w.district.read(c, d, 0, 24);
                for k in 0..20 {
                    c.compute(compute / 10);
                    w.stock.read(c, (k * 37) % items, 0, 16);
                }
            }
        }
        eng.txn_end(c);
        c.end(label, OpRecord { op: 1, ..Default::default() });
        c.op_dfence();
    });
    let (trace, _) = g.finish();
    Generated { trace, recovery: Box::new(Unchecked) }
}

#[cfg(test)]
mod tests {
    use pmsim_trace::Kind;

    /// Per operation label: (regions, their bytes, waits) of a 1-client trace.
    fn per_op(ops: u64) -> Vec<(String, Vec<u64>, usize)> {
        let m: std::collections::BTreeMap<String, String> =
            [("threads", "1"), ("ops", &ops.to_string()), ("epoch_compute", "0")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let t = crate::generate("rdma-tpcc", &m).unwrap().trace;
        let mut out: Vec<(String, Vec<u64>, usize)> = Vec::new();
        for e in &t.threads[0].events {
            match e.kind {
                Kind::Begin => out.push((t.labels[e.addr as usize].clone(), Vec::new(), 0)),
                Kind::RdmaPwrite => out.last_mut().unwrap().1.push(e.data),
                Kind::RdmaWait => out.last_mut().unwrap().2 += 1,
                _ => {}
            }
        }
        out
    }

    /// From N-Store's `opt_wal_engine::txn_end` (github.com/snalli/nstore): a read-only
    /// transaction (Order-Status, Stock-Level) frees nothing and has no log entries, but
    /// `pm_log->clear()` still stores NULL into the log's head and tail (two adjacent
    /// `sp->ptrs` words) before the fence: one 16-byte region, one wait. Every update
    /// transaction (New-Order, Payment, Delivery) logs at least one entry, whose `pmalloc`
    /// (2-3 persists) and `pmemalloc_activate` (2) alone make 4 or more epochs before its wait.
    #[test]
    fn read_only_transactions_clear_the_log_and_updates_log_entries() {
        let ops = per_op(200);
        let (mut reads, mut writes) = (0, 0);
        for (label, regions, waits) in &ops {
            assert_eq!(*waits, 1, "{label}");
            if label == "order_status" || label == "stock_level" {
                assert_eq!(regions, &vec![16], "{label}");
                reads += 1;
            } else {
                assert!(regions.len() >= 4, "{label}: {regions:?}");
                writes += 1;
            }
        }
        assert!(reads > 0 && writes > 0);
    }
}
