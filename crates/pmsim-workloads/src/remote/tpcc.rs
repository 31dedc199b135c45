//! TPC-C on an N-Store-like write-ahead-logging engine (the Whisper set's `tpcc`), as a local
//! generator for the remote-persistence clients.
//!
//! Pattern (N-Store's opt-WAL engine, github.com/snalli/nstore, as in [`crate::whisper::nstore`]):
//! each update statement logs the before-image of the fields it changes (log entry + `ofence`,
//! linked into the log list: count word + `ofence`) and updates the row in place; each insert
//! writes the new row into freshly allocated space and logs the table's row-count word it bumps
//! (the insert becomes visible only through it). Commit orders the data, clears the log and is
//! durable (`dfence`). The transaction mix is TPC-C's: New-Order 45% (district next-order id,
//! order and new-order rows, 5-15 order lines each reading an item and updating its stock),
//! Payment 43% (warehouse, district and customer balances, a history row), Delivery 4% (ten
//! districts: oldest new-order removed, carrier set, customer balance), Order-Status 4% and
//! Stock-Level 4% (read only).
//!
//! Simplifications: one warehouse per client (clients are independent, as the seed's 4 clients
//! are); tables are fixed-stride arrays with row-count words; `items` and `customers` are scaled
//! down (parameters); no secondary indexes. Row sizes follow TPC-C's schemas (rounded to 8).

use crate::atlas::undo_log::{alloc_logs, Tx};
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
        range: int(1, 1 << 30),
        help: "ITEM and STOCK rows per warehouse (TPC-C: 100,000)",
    },
    ParamSpec {
        name: "customers",
        default: "300",
        unit: "rows",
        range: int(1, 1 << 24),
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
// Row sizes in bytes (TPC-C schemas, rounded up to 8).
const WAREHOUSE: u64 = 96;
const DISTRICT: u64 = 96;
const CUSTOMER: u64 = 656;
const STOCK: u64 = 312;
const ITEM: u64 = 88;
const ORDER: u64 = 32;
const NEW_ORDER: u64 = 16;
const ORDER_LINE: u64 = 56;
const HISTORY: u64 = 48;

struct Table {
    base: u64,
    stride: u64,
    /// PM word holding the row count (inserts bump it).
    count: u64,
}

impl Table {
    fn new(c: &mut Ctx<'_>, row: u64, rows: u64) -> Table {
        let stride = row.div_ceil(8) * 8;
        let base = c.alloc_pm(stride * rows.max(1), 64);
        let count = c.alloc_pm(64, 64);
        Table { base, stride, count }
    }

    fn row(&self, i: u64) -> u64 {
        self.base + i * self.stride
    }

    /// Reads `len` bytes of row `i` at `off` (a SELECT of some columns).
    fn read(&self, c: &mut Ctx<'_>, i: u64, off: u64, len: u64) {
        c.load_bytes(self.row(i) + off, len as usize);
    }

    /// An UPDATE of `len` bytes at `off`: logged before-image, then the new bytes.
    fn update(&self, c: &mut Ctx<'_>, tx: &mut Tx, i: u64, off: u64, len: u64, tag: u64) {
        tx.write(c, self.row(i) + off, &value_bytes(tag, len as usize));
    }

    /// An INSERT: the row into fresh space (persisted before it is published), then the logged
    /// row-count bump that publishes it.
    fn insert(&self, c: &mut Ctx<'_>, tx: &mut Tx, tag: u64) -> u64 {
        let n = c.load_u64(self.count);
        let at = self.row(n);
        tx.fresh(at, self.stride);
        tx.write(c, at, &value_bytes(tag, self.stride as usize));
        c.ofence();
        tx.write_u64(c, self.count, n + 1);
        n
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
    let logs = alloc_logs(&mut g.heap, p.threads);
    let mut whs: Vec<Warehouse> = (0..p.threads)
        .map(|t| {
            let mut c = g.ctx(t);
            Warehouse {
                warehouse: Table::new(&mut c, WAREHOUSE, 1),
                district: Table::new(&mut c, DISTRICT, DISTRICTS),
                customer: Table::new(&mut c, CUSTOMER, DISTRICTS * cust),
                stock: Table::new(&mut c, STOCK, items),
                item: Table::new(&mut c, ITEM, items),
                order: Table::new(&mut c, ORDER, ops),
                new_order: Table::new(&mut c, NEW_ORDER, ops),
                order_line: Table::new(&mut c, ORDER_LINE, ops * 15),
                history: Table::new(&mut c, HISTORY, ops),
                next_o: vec![0; DISTRICTS as usize],
                oldest: vec![0; DISTRICTS as usize],
            }
        })
        .collect();
    let mut txid = 0u64;
    let mut tag = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let w = &mut whs[c.thread];
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
        tag += 1;
        let mut tx = Tx::begin(logs[c.thread], txid, true, true);
        let cid = d * cust + c.rng().below(cust);
        match label {
            "new_order" => {
                let lines = 5 + c.rng().below(11);
                c.compute(compute);
                w.warehouse.read(c, 0, 0, 16);
                c.compute(compute);
                w.district.read(c, d, 0, 24);
                w.district.update(c, &mut tx, d, 16, 8, tag); // d_next_o_id
                c.compute(compute);
                w.customer.read(c, cid, 0, 64);
                c.compute(compute);
                w.order.insert(c, &mut tx, tag);
                c.compute(compute);
                w.new_order.insert(c, &mut tx, tag);
                for _ in 0..lines {
                    let i = c.rng().below(items);
                    c.compute(compute);
                    w.item.read(c, i, 0, ITEM);
                    c.compute(compute);
                    w.stock.read(c, i, 0, 64);
                    w.stock.update(c, &mut tx, i, 0, 24, tag); // quantity, ytd, order_cnt
                    c.compute(compute);
                    w.order_line.insert(c, &mut tx, tag);
                }
                w.next_o[d as usize] += 1;
            }
            "payment" => {
                c.compute(compute);
                w.warehouse.update(c, &mut tx, 0, 88, 8, tag); // w_ytd
                c.compute(compute);
                w.district.update(c, &mut tx, d, 88, 8, tag); // d_ytd
                c.compute(compute);
                w.customer.read(c, cid, 0, 128);
                w.customer.update(c, &mut tx, cid, 128, 24, tag); // balance, ytd_payment, payment_cnt
                c.compute(compute);
                w.history.insert(c, &mut tx, tag);
            }
            "delivery" => {
                for dd in 0..DISTRICTS as usize {
                    c.compute(compute);
                    if w.oldest[dd] >= w.next_o[dd] {
                        continue;
                    }
                    let o = w.oldest[dd];
                    w.oldest[dd] += 1;
                    w.new_order.update(c, &mut tx, o.min(ops - 1), 0, 8, tag); // delete: tombstone
                    w.order.update(c, &mut tx, o.min(ops - 1), 16, 8, tag); // o_carrier_id
                    let cc = dd as u64 * cust + o % cust;
                    w.customer.update(c, &mut tx, cc, 128, 8, tag); // balance
                }
            }
            "order_status" => {
                c.compute(compute);
                w.customer.read(c, cid, 0, 128);
                for k in 0..10 {
                    w.order_line.read(c, k, 0, ORDER_LINE);
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
        tx.commit(c);
        c.end(label, OpRecord { op: 1, ..Default::default() });
        c.op_dfence();
    });
    let (trace, _) = g.finish();
    Generated { trace, recovery: Box::new(Unchecked) }
}
