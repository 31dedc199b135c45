//! Differential test of the shared representation of predecessor sets ([`crate::req`]): on
//! random x86 traces, and design-neutral ones under EP and strict persistency (with in-order and delayed stores, so sets also change as time advances),
//! after every node performs, each performed node's set must require exactly what the plain
//! transitive closure of the graph's edges requires. Sets are compared by requirement: per
//! word, the latest position a member store wrote there (a store is durable iff every word it
//! wrote shows it or a later store, so equal maps mean equal verdicts on every image). The
//! thresholds of `req` are lowered under `cfg(test)` so these small traces build, fold and merge
//! many shared bases.

use crate::closure::Closure;
use crate::graph::{Graph, NodeId};
use crate::model::{FenceReading, Model};
use crate::req::Req;
use pmsim_trace::{Access, RunRecord, Trace};
use std::collections::BTreeMap;
use std::sync::Arc;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const WORDS: [u64; 8] = [
    0x1_0000_0000,
    0x1_0000_0008,
    0x1_0000_0010,
    0x1_0000_0040,
    0x1_0000_0048,
    0x1_0000_0080,
    0x1_0000_00c0,
    0x1_0000_00c8,
];

fn random_trace(rng: &mut Rng, threads: u64, events: usize) -> Trace {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for _ in 0..events {
        let t = rng.below(threads);
        let w = WORDS[rng.below(WORDS.len() as u64) as usize];
        let op = match rng.below(16) {
            0..=4 => format!("store {w:#x} 8"),
            5 => "store 0x100000000 16".to_string(),
            6 => format!("ntstore {w:#x} 8"),
            7..=9 => format!("clwb {w:#x}"),
            10 => format!("clflushopt {w:#x}"),
            11 | 12 => "sfence".to_string(),
            13 => "acquire 0x2000".to_string(),
            14 => "release 0x2000".to_string(),
            _ => "rmw 0x2000 8 1".to_string(),
        };
        s.push_str(&format!("T{t} {op}\n"));
    }
    pmsim_trace::text::parse_str("diff", &s).expect("generated trace parses")
}

/// Global order, but stores perform up to `delay` events late (a store buffer; loads and syncs
/// keep their time): some edges then point backwards in perform order.
fn delayed(trace: &Trace, rng: &mut Rng, delay: u64) -> RunRecord {
    let mut r = crate::litmus::global_order_record(trace);
    let mut late: BTreeMap<u64, u64> = BTreeMap::new();
    for a in r.accesses.iter_mut() {
        if a.kind == Access::Store && delay > 0 {
            let d = *late.entry(a.gid).or_insert_with(|| rng.below(delay + 1) * 1000 + 500);
            a.time += d;
        }
    }
    r.accesses.sort_by_key(|a| a.time);
    r
}

/// Word index -> latest position over the members, for the stores `set` holds.
fn requirement(g: &Graph, members: impl Iterator<Item = NodeId>) -> BTreeMap<u32, u32> {
    let mut m = BTreeMap::new();
    for p in members {
        for &(w, pos) in g.store_words(p) {
            let e = m.entry(w).or_insert(pos);
            *e = (*e).max(pos);
        }
    }
    m
}

fn represented(g: &Graph, r: &Req, performed: &[bool]) -> BTreeMap<u32, u32> {
    let prefix = (0..g.threads).flat_map(|u| g.pos_nodes(u, 0, r.c[u]).iter().copied());
    let members = prefix.chain(r.members()).filter(|&p| g.nodes[p as usize].pm && performed[p as usize]);
    requirement(g, members)
}

/// PM stores reaching `n` backwards over edges among performed nodes (plus barrier order).
fn exact(g: &Graph, n: NodeId, performed: &[bool]) -> BTreeMap<u32, u32> {
    let mut seen = vec![false; g.nodes.len()];
    let mut stack = vec![n];
    let mut out = Vec::new();
    while let Some(z) = stack.pop() {
        let zn = &g.nodes[z as usize];
        let earlier = (0..zn.epoch).flat_map(|e| g.epoch_nodes(zn.thread as usize, e).iter().copied());
        for p in g.in_edges(z).iter().map(|&(p, _)| p).chain(earlier) {
            if performed[p as usize] && !seen[p as usize] {
                seen[p as usize] = true;
                if g.nodes[p as usize].pm {
                    out.push(p);
                }
                stack.push(p);
            }
        }
    }
    requirement(g, out.into_iter())
}

/// A design-neutral trace: loads (EP's conflicts), barriers, and long epochs of stores to many
/// words, whose sets grow past the fold threshold.
fn random_neutral_trace(rng: &mut Rng, threads: u64, events: usize) -> Trace {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for _ in 0..events {
        let t = rng.below(threads);
        let w = 0x1_0000_0000u64 + 8 * rng.below(64);
        let op = match rng.below(20) {
            0..=6 => format!("store {w:#x} 8"),
            7..=11 => format!("load {w:#x} 8"),
            12 => "ofence".to_string(),
            13 => "dfence".to_string(),
            14 => "store 0x100000000 16".to_string(),
            15 => "acquire 0x2000".to_string(),
            16 => "release 0x2000".to_string(),
            17 => "rmw 0x2000 8 1".to_string(),
            _ => format!("store {:#x} 8", w + 0x1000),
        };
        s.push_str(&format!("T{t} {op}\n"));
    }
    pmsim_trace::text::parse_str("diff", &s).expect("generated trace parses")
}

#[test]
fn shared_sets_require_exactly_what_the_closure_requires() {
    differential(Model::X86, random_trace, 150, 1000);
}

/// Not RP: its release rule is a prefix (every store before the release in its epoch), which
/// the graph's explicit release edges (stores since the previous release) and so `exact` do not
/// spell out.
#[test]
fn shared_sets_require_exactly_what_the_closure_requires_under_ep_and_strict() {
    // Strict persistency's prefix covers a thread's every earlier access, so its sets stay
    // small and never fold; EP's must.
    differential(Model::Ep, random_neutral_trace, 100, 1000);
    differential(Model::Strict, random_neutral_trace, 100, 0);
}

fn differential(model: Model, gen: fn(&mut Rng, u64, usize) -> Trace, cases: u64, min_folded: usize) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut folded = 0;
    for case in 0..cases {
        let threads = 2 + rng.below(2);
        let events = 40 + rng.below(200) as usize;
        let trace = gen(&mut rng, threads, events);
        let delay = if case % 2 == 0 { 0 } else { 6 };
        let rec = delayed(&trace, &mut rng, delay);
        let g = Arc::new(Graph::build(&trace, &rec, model, FenceReading::ByDialect).expect("graph"));
        let mut cl = Closure::new(g.clone());
        let mut changed = Vec::new();
        for &x in &g.order {
            cl.process(x, &mut changed);
            for n in (0..g.nodes.len() as NodeId).filter(|&n| cl.performed[n as usize]) {
                let want = exact(&g, n, &cl.performed);
                let got = represented(&g, cl.req(n), &cl.performed);
                assert_eq!(got, want, "{model}: case {case}: node {n} after node {x} performed");
                folded += !cl.req(n).bases.is_empty() as usize;
            }
        }
    }
    assert!(folded >= min_folded, "{model}: the traces must exercise shared bases ({folded})");
}
