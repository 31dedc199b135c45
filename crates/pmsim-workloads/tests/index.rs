//! Index workloads: recovery from final and crash-prefix images, corruption detection,
//! determinism. Public API only.

use pmsim_trace::{Kind, MemImage, Trace};
use pmsim_workloads::index::keys;
use pmsim_workloads::{generate, Generated};
use std::collections::BTreeMap;

const NAMES: &[&str] = &["cceh", "fastfair", "dash-eh", "dash-lh", "p-art", "p-clht", "p-masstree"];

fn params(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut p = BTreeMap::new();
    p.insert("ops".to_string(), "300".to_string());
    p.insert("threads".to_string(), "4".to_string());
    for (k, v) in extra {
        p.insert(k.to_string(), v.to_string());
    }
    p
}

/// Small structures so that 1200 operations split, double and resize several times.
fn small(name: &str) -> Vec<(&'static str, &'static str)> {
    match name {
        "cceh" => vec![("segment_lines", "16"), ("probe_lines", "2"), ("initial_depth", "0")],
        "dash-eh" | "dash-lh" => vec![("buckets", "8")],
        "p-clht" => vec![("initial_buckets", "16")],
        _ => vec![],
    }
}

fn gen(name: &str, extra: &[(&str, &str)]) -> Generated {
    let mut e = small(name);
    e.extend_from_slice(extra);
    generate(name, &params(&e)).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// NVM holding every PM store with gid < `cut`, in global order (a consistent crash image).
fn prefix_image(t: &Trace, cut: u64) -> MemImage {
    pmsim_workloads::global_order_image(t, cut)
}

fn final_image(t: &Trace) -> MemImage {
    prefix_image(t, u64::MAX)
}

/// Per label: number of operations made durable by a dfence with gid < cut.
fn durable_ops(t: &Trace, cut: u64) -> BTreeMap<String, u64> {
    let mut n = BTreeMap::new();
    for s in &t.threads {
        let mut pending: Vec<String> = Vec::new();
        for ev in &s.events {
            match ev.kind {
                Kind::End => pending.push(t.labels[ev.addr as usize].clone()),
                Kind::Dfence => {
                    for l in pending.drain(..) {
                        if ev.gid < cut {
                            *n.entry(l).or_insert(0) += 1;
                        }
                    }
                }
                _ => {}
            }
        }
    }
    n
}

fn persisting(n: &BTreeMap<String, u64>) -> u64 {
    n.get("insert").copied().unwrap_or(0) + n.get("delete").copied().unwrap_or(0)
}

#[test]
fn final_image_holds_every_operation() {
    for &name in NAMES {
        let g = gen(name, &[]);
        let img = final_image(&g.trace);
        let rep = g.recovery.check(&img, &|_| true).unwrap_or_else(|e| panic!("{name}: {e}"));
        let n = durable_ops(&g.trace, u64::MAX);
        assert!(n["insert"] > 500, "{name}: only {} inserts", n["insert"]);
        assert_eq!(rep.durable_ops_checked, persisting(&n), "{name}");
        let items = n["insert"] - n.get("delete").copied().unwrap_or(0);
        assert_eq!(rep.items, items, "{name}: recovered items");
    }
}

/// The operation with the most PM stores (a split or resize): its event gids.
fn busiest_op(t: &Trace) -> Vec<u64> {
    let mut best: Vec<u64> = Vec::new();
    for s in &t.threads {
        let mut cur: Vec<u64> = Vec::new();
        for ev in &s.events {
            match ev.kind {
                Kind::Begin => cur.clear(),
                Kind::End if cur.len() > best.len() => best = std::mem::take(&mut cur),
                k if k.writes() || k.is_barrier() => cur.push(ev.gid),
                _ => {}
            }
        }
    }
    best
}

#[test]
fn crash_prefixes_recover_every_durable_operation() {
    for &name in NAMES {
        let g = gen(name, &[]);
        let total = g.trace.num_events() as u64;
        let mut cuts: Vec<u64> = (0..=20).map(|i| total * i / 20).collect();
        let busy = busiest_op(&g.trace);
        assert!(busy.len() > 10, "{name}: no split or resize in the run ({})", busy.len());
        let step = (busy.len() / 40).max(1);
        cuts.extend(busy.iter().step_by(step).map(|g| g + 1));
        for cut in cuts {
            let img = prefix_image(&g.trace, cut);
            let rep = g.recovery.check(&img, &|gid| gid < cut).unwrap_or_else(|e| panic!("{name} cut {cut}: {e}"));
            let n = durable_ops(&g.trace, cut);
            assert_eq!(rep.durable_ops_checked, persisting(&n), "{name} cut {cut}");
        }
    }
}

/// Addresses of words holding `w`, and which of them starts the key's value record.
fn locate(img: &MemImage, w: u64, key_size: usize) -> (Vec<u64>, Option<u64>) {
    let hits: Vec<u64> = img.sorted().into_iter().filter(|(_, v)| v.data == w).map(|(a, _)| a).collect();
    let kb = keys::key_bytes(w, key_size);
    let rec = hits.iter().copied().find(|&a| img.read_bytes(a, key_size) == kb);
    (hits, rec)
}

#[test]
fn corrupted_images_are_caught() {
    for &name in NAMES {
        let extra: &[(&str, &str)] = if name == "fastfair" { &[("delete_pct", "0")] } else { &[] };
        let g = gen(name, extra);
        let img = final_image(&g.trace);
        assert!(g.recovery.check(&img, &|_| true).is_ok(), "{name}: clean image rejected");
        for id in [0u64, 7, 123] {
            let w = keys::key_word(1, id);
            let (hits, rec) = locate(&img, w, 16);
            let rec = rec.unwrap_or_else(|| panic!("{name}: record of key {id} not in the image"));
            // A value never written: flip the first value word of a durable key's record.
            let mut bad = img.clone();
            let mut v = bad.get(rec + 16).unwrap_or_default();
            v.data ^= 0xdead_beef;
            bad.set(rec + 16, v);
            assert!(g.recovery.check(&bad, &|_| true).is_err(), "{name}: corrupt value of key {id} not caught");
            // A lost durable key: every word holding its key word disappears.
            let mut lost = img.clone();
            for a in hits {
                lost.words.remove(&a);
            }
            assert!(g.recovery.check(&lost, &|_| true).is_err(), "{name}: lost key {id} not caught");
        }
        // An empty NVM loses every durable insert.
        assert!(g.recovery.check(&MemImage::new(), &|_| true).is_err(), "{name}: empty image accepted");
    }
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    for &name in NAMES {
        let a = gen(name, &[]).trace;
        let b = gen(name, &[]).trace;
        assert!(a == b, "{name}: same seed, different trace");
        let c = gen(name, &[("seed", "2")]).trace;
        assert!(a != c, "{name}: other seed, same trace");
    }
}

/// Default parameters (2000 operations per thread, 4 threads) stay well under 2M events; prints
/// the size figures of each trace (`cargo test -- --nocapture`).
#[test]
fn default_traces_have_reasonable_size() {
    use pmsim_trace::{TraceStats, VecSource};
    for &name in NAMES {
        let g = generate(name, &BTreeMap::new()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let t = std::sync::Arc::new(g.trace);
        let st = TraceStats::collect(t.pm_ranges(), &mut VecSource::all(&t)).expect("in-memory trace");
        let ops = st.operations as f64;
        println!(
            "{name}: {} events, {:.1} PM stores/op, {:.1} epochs/op, {:.0}% single-line epochs",
            st.events,
            st.pm_stores as f64 / ops,
            st.epochs as f64 / ops,
            100.0 * st.single_line_epochs as f64 / st.epochs.max(1) as f64
        );
        assert_eq!(st.operations, 8000, "{name}");
        assert!(st.events < 2_000_000, "{name}: {} events", st.events);
    }
}
