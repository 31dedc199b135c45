//! Tests of the WHISPER-like and Atlas workloads through the public API: recovery finds every
//! durable operation on final and mid-run (prefix) images, catches lost and invented data, and
//! the traces are deterministic and well formed.

use pmsim_trace::{Kind, MemImage, Trace};
use pmsim_workloads::{generate, Generated};
use std::collections::BTreeMap;

const ALL: [&str; 7] = ["nstore", "echo", "vacation", "memcached", "atlas-heap", "atlas-queue", "atlas-skiplist"];

fn gen(name: &str, extra: &[(&str, &str)]) -> Generated {
    let mut p = BTreeMap::new();
    p.insert("ops".to_string(), "300".to_string());
    p.insert("threads".to_string(), "4".to_string());
    // Small structures keep the tests fast and the conflicts frequent.
    let small: &[(&str, &str)] = match name {
        "nstore" => &[("tuples", "256")],
        "vacation" => &[("relations", "128")],
        "memcached" => &[("items", "128"), ("keys", "256"), ("buckets", "64")],
        "echo" => &[("keys", "256"), ("buckets", "64")],
        "atlas-heap" => &[("initial", "64")],
        "atlas-queue" => &[("initial", "16")],
        _ => &[("keys", "256")],
    };
    for (k, v) in small.iter().chain(extra) {
        p.insert(k.to_string(), v.to_string());
    }
    generate(name, &p).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The NVM image after every PM store with gid < `cut`, in global order (a prefix of the run:
/// always a consistent image).
fn prefix_image(t: &Trace, cut: u64) -> MemImage {
    pmsim_workloads::global_order_image(t, cut)
}

fn final_image(t: &Trace) -> MemImage {
    prefix_image(t, u64::MAX)
}

/// One operation as the trace shows it.
struct Op {
    thread: usize,
    label: String,
    begin: u64,
    end: u64,
    /// gid of the thread's first dfence after the end marker.
    durable_at: Option<u64>,
    ofences: usize,
    pm_stores: usize,
}

fn ops_of(t: &Trace) -> Vec<Op> {
    let mut out = Vec::new();
    for (th, s) in t.threads.iter().enumerate() {
        let mut open: Option<Op> = None;
        let mut undurable: Vec<usize> = Vec::new();
        for ev in &s.events {
            match ev.kind {
                Kind::Begin => {
                    assert!(open.is_none(), "T{th}: begin inside an operation");
                    let label = t.labels[ev.addr as usize].clone();
                    open = Some(Op {
                        thread: th,
                        label,
                        begin: ev.gid,
                        end: 0,
                        durable_at: None,
                        ofences: 0,
                        pm_stores: 0,
                    });
                }
                Kind::End => {
                    let mut op = open.take().expect("end without begin");
                    assert_eq!(op.label, t.labels[ev.addr as usize], "T{th}: mismatched begin/end labels");
                    op.end = ev.gid;
                    undurable.push(out.len());
                    out.push(op);
                }
                Kind::Ofence => open.iter_mut().for_each(|o| o.ofences += 1),
                Kind::Dfence => {
                    for i in undurable.drain(..) {
                        out[i].durable_at = Some(ev.gid);
                    }
                }
                k if k.writes() && t.is_pm(ev.addr) => open.iter_mut().for_each(|o| o.pm_stores += 1),
                _ => {}
            }
        }
        assert!(open.is_none(), "T{th}: operation never ended");
    }
    out
}

/// Does the operation write the structure (as opposed to a read or an empty dequeue)?
fn is_writer(name: &str, op: &Op) -> bool {
    match name {
        "nstore" => op.label == "update",
        "memcached" => op.label == "set",
        "echo" => op.label == "put",
        "vacation" => op.pm_stores > 0,
        // Atlas: a FASE always logs its acquire and release (2 ofences) and commits (1).
        _ => op.ofences > 3,
    }
}

fn expected_durable(name: &str, ops: &[Op], cut: u64) -> u64 {
    ops.iter().filter(|o| is_writer(name, o) && o.durable_at.is_some_and(|g| g < cut)).count() as u64
}

#[test]
fn final_image_recovers_every_completed_operation() {
    for name in ALL {
        let g = gen(name, &[]);
        let ops = ops_of(&g.trace);
        let rep = g.recovery.check(&final_image(&g.trace), &|_| true).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = expected_durable(name, &ops, u64::MAX);
        assert!(want > 100, "{name}: only {want} writing operations");
        assert_eq!(rep.durable_ops_checked, want, "{name}: durable ops found");
        assert!(rep.items > 0, "{name}: recovered structure is empty");
    }
}

#[test]
fn prefix_images_recover_with_in_flight_operations() {
    for name in ALL {
        let g = gen(name, &[]);
        let ops = ops_of(&g.trace);
        let n = g.trace.num_events() as u64;
        // Evenly spread cuts, plus cuts inside writing operations right after their first
        // data store that follows an ofence (logged data modified, transaction not committed).
        let mut cuts: Vec<u64> = (1..60).map(|i| n * i / 60).collect();
        let persisting = |o: &&Op| {
            if name == "echo" {
                o.label == "commit" && o.pm_stores > 0
            } else {
                is_writer(name, o)
            }
        };
        for op in ops.iter().filter(persisting).step_by(if name == "echo" { 3 } else { 23 }) {
            let s = &g.trace.threads[op.thread];
            let mut after_fence = false;
            for ev in s.events.iter().filter(|e| e.gid > op.begin && e.gid < op.end) {
                if ev.kind == Kind::Ofence {
                    after_fence = true;
                } else if after_fence && ev.kind == Kind::Store && g.trace.is_pm(ev.addr) {
                    cuts.push(ev.gid + 1);
                    break;
                }
            }
        }
        assert!(cuts.len() > 65, "{name}: too few in-flight cuts");
        let mut last = 0;
        cuts.sort_unstable();
        for cut in cuts {
            let img = prefix_image(&g.trace, cut);
            let done = |gid: u64| gid < cut;
            let rep = g.recovery.check(&img, &done).unwrap_or_else(|e| panic!("{name} cut at gid {cut}: {e}"));
            if name == "echo" {
                // Echo's PUTs become durable with the master's commit dfence (not in the trace's
                // op markers): the count only grows with the cut.
                assert!(rep.durable_ops_checked >= last, "{name}: durable PUTs went down at {cut}");
                last = rep.durable_ops_checked;
            } else {
                assert_eq!(rep.durable_ops_checked, expected_durable(name, &ops, cut), "{name} cut at gid {cut}");
            }
        }
        assert!(name != "echo" || last > 0, "echo: no PUT durable at any cut");
    }
}

#[test]
fn lost_durable_operation_is_caught() {
    for name in ALL {
        let g = gen(name, &[]);
        let ops = ops_of(&g.trace);
        // The last writing operation (echo: the master's last merge) loses every word it wrote.
        let persisting = |o: &&Op| {
            if name == "echo" {
                o.label == "commit" && o.pm_stores > 0
            } else {
                is_writer(name, o)
            }
        };
        let op = ops.iter().filter(persisting).max_by_key(|o| o.end).expect("an op");
        let before = prefix_image(&g.trace, op.begin);
        let mut img = final_image(&g.trace);
        let mut reverted = 0;
        for (w, v) in img.sorted() {
            if v.id > op.begin && v.id < op.end {
                match before.get(w) {
                    Some(old) => img.set(w, old),
                    None => {
                        img.words.remove(&w);
                    }
                }
                reverted += 1;
            }
        }
        assert!(reverted > 0, "{name}: nothing to revert");
        assert!(g.recovery.check(&img, &|_| true).is_err(), "{name}: losing a durable operation was not caught");
    }
}

#[test]
fn invented_value_is_caught() {
    for name in ALL {
        let g = gen(name, &[]);
        let img = final_image(&g.trace);
        // Corrupt each word the run wrote last (one at a time); stale log slots or free items
        // may legitimately be ignored, but live data must not be.
        let mut words = img.sorted();
        words.sort_by_key(|(_, v)| std::cmp::Reverse(v.id));
        let mut caught = 0;
        for (w, v) in words.iter().take(64) {
            let mut bad = img.clone();
            bad.set(*w, pmsim_trace::WordVal { id: v.id, data: v.data ^ 0x5a5a_0000_dead_0001 });
            if g.recovery.check(&bad, &|_| true).is_err() {
                caught += 1;
            }
        }
        assert!(caught >= 8, "{name}: only {caught} of 64 corrupted words were caught");
    }
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    for name in ALL {
        let a = gen(name, &[("ops", "60")]).trace;
        let b = gen(name, &[("ops", "60")]).trace;
        assert_eq!(a, b, "{name}: not deterministic");
        let c = gen(name, &[("ops", "60"), ("seed", "7")]).trace;
        assert_ne!(a, c, "{name}: seed ignored");
    }
}

#[test]
fn traces_have_markers_and_fences_where_expected() {
    for name in ALL {
        let g = gen(name, &[]);
        let ops = ops_of(&g.trace); // asserts begin/end pairing per thread
        let per_thread = if name == "echo" { 300 * 3 + 2 } else { 300 * 4 };
        assert!(ops.len() >= per_thread, "{name}: {} operations", ops.len());
        let count = |k: Kind| g.trace.threads.iter().flat_map(|s| &s.events).filter(|e| e.kind == k).count();
        let writers: Vec<&Op> = ops.iter().filter(|o| is_writer(name, o)).collect();
        // Every logged writer persists something inside the operation, ordered by an ofence,
        // and is made durable by a dfence right after its end marker.
        for op in writers.iter().filter(|_| name != "echo") {
            assert!(
                op.ofences >= 2 && op.pm_stores >= 2,
                "{name}: writer {} at {} lacks log+data persists",
                op.label,
                op.begin
            );
            assert!(op.durable_at.is_some(), "{name}: writer never made durable");
        }
        if name == "echo" {
            // Clients only touch DRAM; the master's merges persist with ofences and dfences.
            assert!(writers.iter().all(|o| o.pm_stores == 0 && o.ofences == 0), "echo: a PUT touched PM");
            let merges = ops.iter().filter(|o| o.label == "commit" && o.pm_stores > 0).count();
            assert!(merges > 0 && count(Kind::Ofence) > merges && count(Kind::Dfence) > merges);
            assert!(count(Kind::Release) > 0 && count(Kind::Acquire) > 0, "echo: no handoff");
        } else {
            assert!(count(Kind::Dfence) >= writers.len(), "{name}: fewer dfences than writers");
            assert!(count(Kind::Rmw) >= ops.len(), "{name}: operations not under locks");
        }
    }
}

#[test]
fn single_thread_and_large_values_work() {
    for name in ALL {
        let sizes: &[(&str, &str)] =
            if name == "vacation" { &[] } else { &[("key_size", "128"), ("value_size", "128")] };
        let g = gen(name, &[&[("threads", "1"), ("ops", "100")], sizes].concat());
        let ops = ops_of(&g.trace);
        let rep = g.recovery.check(&final_image(&g.trace), &|_| true).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(rep.durable_ops_checked, expected_durable(name, &ops, u64::MAX), "{name}");
    }
}
