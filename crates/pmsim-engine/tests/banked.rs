//! The banked NVM model (docs/design.md §9) timed against its configured latencies: row hit vs
//! conflict vs another bank, exact to the picosecond, on hand-written traces and MC sequences.
//! Expected times are sums of configured parameters, never numbers copied from a run.

use pmsim_engine::config::ns;
use pmsim_engine::mem::mc::Mc;
use pmsim_engine::mem::nvm::{LineData, Nvm};
use pmsim_engine::{simulate, Config, RunStats};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

const A: u64 = 0x1_0000_0000;

fn banked() -> Config {
    let mut c = Config::default();
    c.pm.model = "banked".into();
    c.mc.count = 1;
    c
}

fn run(src: &str, design: &str, cfg: &Config) -> RunStats {
    let t = Arc::new(parse_str("test.trace", src).unwrap());
    simulate(&t, cfg, design).unwrap()
}

fn two_stores(second: u64) -> String {
    format!("# pmsim trace v1\nthreads 1\nT0 store {A:#x} 8 2a\nT0 dfence\nT0 store {second:#x} 8 2b\nT0 dfence\n")
}

/// One store + dfence under baseline: an RFO read through the hierarchy, then the clwb's write,
/// acknowledged when the bank write completes (`persist_at = media`).
fn store_dfence(c: &Config, read: f64, write: f64) -> f64 {
    c.l1.latency_ns
        + c.l2.latency_ns
        + c.llc.latency_ns
        + read
        + c.l1.latency_ns
        + c.noc.writeback_ns
        + write
        + c.noc.hop_ns
}

#[test]
fn row_hit_and_row_conflict_cost_their_latencies() {
    let c = banked();
    let b = &c.bank;
    // First access opens the row (a conflict); the clwb's write then hits it.
    let first = store_dfence(&c, b.read_conflict_ns, b.hit_ns);
    let same_row = run(&two_stores(A + 64), "baseline", &c);
    assert_eq!(same_row.sim_time_ns, first + store_dfence(&c, b.hit_ns, b.hit_ns));
    // Same bank, another row (8 banks x 2 KiB later): the read must open it.
    let other_row = run(&two_stores(A + 8 * 2048), "baseline", &c);
    assert_eq!(other_row.sim_time_ns, first + store_dfence(&c, b.read_conflict_ns, b.hit_ns));
    let s = same_row.mcs[0].banks.as_ref().unwrap();
    assert_eq!((s.row_hits, s.row_conflicts), (3, 1));
    let o = other_row.mcs[0].banks.as_ref().unwrap();
    assert_eq!((o.row_hits, o.row_conflicts), (2, 2));
    assert_eq!(o.per_bank[0].writes, 2);
}

#[test]
fn latencies_move_the_result_by_exactly_their_change() {
    let base = run(&two_stores(A + 64), "baseline", &banked()).sim_time_ns;
    let mut c = banked();
    c.bank.hit_ns += 10.0;
    assert_eq!(run(&two_stores(A + 64), "baseline", &c).sim_time_ns, base + 30.0, "three row hits");
    let mut c = banked();
    c.bank.read_conflict_ns += 10.0;
    assert_eq!(run(&two_stores(A + 64), "baseline", &c).sim_time_ns, base + 10.0, "one read conflict");
    let mut c = banked();
    c.bank.persist_at = "queue".into();
    let adr = run(&two_stores(A + 64), "baseline", &c).sim_time_ns;
    assert_eq!(adr, base - 2.0 * c.bank.hit_ns, "ADR: the ACK does not wait for the bank");
}

fn line(addr: u64, id: u64) -> LineData {
    let mut d = LineData::new(addr);
    d.set(0, id);
    d
}

/// Drives one MC: offers `writes` at time 0, then completes them in time order; returns each
/// write's acknowledgement time (at completion under `persist_at = media`).
fn drive(cfg: &Config, writes: &[u64]) -> Vec<u64> {
    let mut mc: Mc<u32> = Mc::new(cfg);
    let mut nvm = Nvm::default();
    let mut acks = vec![0; writes.len()];
    let mut wakes: Vec<u64> = Vec::new();
    for (i, &a) in writes.iter().enumerate() {
        mc.offer(0, line(a, i as u64 + 1), Some(i as u32));
        wakes.append(&mut mc.out_wakes);
    }
    let mut acc = Vec::new();
    while let Some(&t) = wakes.iter().min() {
        wakes.retain(|&x| x != t);
        mc.complete(t, Some(&mut nvm), &mut acc);
        for r in mc.out_replies.drain(..) {
            acks[r as usize] = t;
        }
        wakes.append(&mut mc.out_wakes);
    }
    assert!(mc.wpq.is_empty() && mc.waiting.is_empty(), "everything drained");
    acks
}

#[test]
fn other_banks_work_in_parallel_one_bank_serialises() {
    let c = banked();
    let (hit, wc) = (ns(c.bank.hit_ns), ns(c.bank.write_conflict_ns));
    // Two banks: both open their rows at once.
    assert_eq!(drive(&c, &[A, A + 2048]), vec![wc, wc]);
    // One bank, same row: the second hits after the first.
    assert_eq!(drive(&c, &[A, A + 64]), vec![wc, wc + hit]);
    // One bank, two rows: two conflicts back to back.
    assert_eq!(drive(&c, &[A, A + 8 * 2048]), vec![wc, 2 * wc]);
}

#[test]
fn fr_fcfs_serves_row_hits_before_older_conflicts() {
    let c = banked();
    let (hit, wc) = (ns(c.bank.hit_ns), ns(c.bank.write_conflict_ns));
    // Row 0 opens with the first write; the queued row-1 write is older than the second row-0
    // write, but the row hit goes first.
    let acks = drive(&c, &[A, A + 8 * 2048, A + 128]);
    assert_eq!(acks, vec![wc, wc + hit + wc, wc + hit]);
}

#[test]
fn a_queue_of_one_entry_still_drains_everything() {
    let mut c = banked();
    c.bank.write_queue = 1;
    c.bank.read_queue = 1;
    let wc = ns(c.bank.write_conflict_ns);
    // Writes to two banks no longer overlap: the second waits for the queue's only entry.
    assert_eq!(drive(&c, &[A, A + 2048]), vec![wc, 2 * wc]);
    // A multithreaded run completes (no deadlock).
    let src = "# pmsim trace v1\nthreads 2\nT0 store 0x100000000 8 1\nT1 store 0x100000800 8 2\nT0 ofence\nT1 ofence\nT0 store 0x100004000 8 3\nT1 store 0x100010000 8 4\nT0 dfence\nT1 dfence\n";
    for d in ["baseline", "bbb", "hops-ep", "asap-ep"] {
        let s = run(src, d, &c);
        assert!(s.pm_writes >= 4, "{d}");
    }
}

#[test]
fn blp_is_two_for_two_parallel_banks() {
    let c = banked();
    let src = format!(
        "# pmsim trace v1\nthreads 2\nT0 store {A:#x} 8 1\nT1 store {:#x} 8 2\nT0 dfence\nT1 dfence\n",
        A + 2048
    );
    let s = run(&src, "baseline", &c);
    let b = s.mcs[0].banks.as_ref().unwrap();
    assert!(b.blp > 1.0, "two banks overlapped: {}", b.blp);
    assert!(b.memory_throughput_gbps > 0.0);
}

#[test]
fn bad_bank_parameters_are_named() {
    for (k, v, what) in [
        ("bank.count", "6", "bank.count"),
        ("bank.row_bytes", "0", "bank.row_bytes"),
        ("bank.write_queue", "0", "bank.write_queue"),
        ("bank.read_queue", "0", "bank.read_queue"),
        ("pm.model", "dram", "pm.model"),
    ] {
        let e = Config::default().set(k, v).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
    }
}
