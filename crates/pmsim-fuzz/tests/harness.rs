//! The fuzz targets on the stable toolchain, seeded, for a fixed number of cases each: inputs
//! are the checked-in seed corpora (`fuzz/corpus/TARGET/`), mutations of them (byte flips,
//! inserts, deletes, splices), random bytes, and for the text reader grammar-built traces.
//! `PMSIM_FUZZ_CASES=N` changes the count (`scripts/fuzz.sh` runs it long); `PMSIM_FUZZ_SEED`
//! the seed. A failure prints the shrunk input.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::path::PathBuf;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let out: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!out.is_empty(), "{} has no seed inputs", dir.display());
    out
}

fn cases(default: u32) -> u32 {
    std::env::var("PMSIM_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn runner(target: &str, n: u32) -> TestRunner {
    let seed: u64 = std::env::var("PMSIM_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    for (i, b) in target.bytes().enumerate() {
        key[8 + i % 24] ^= b;
    }
    let cfg = Config { cases: n, failure_persistence: None, max_shrink_iters: 2000, ..Config::default() };
    TestRunner::new_with_rng(cfg, TestRng::from_seed(RngAlgorithm::ChaCha, &key))
}

/// One edit of a seed input.
#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Splice(usize, usize, usize),
}

fn apply(mut v: Vec<u8>, edits: &[Edit], seeds: &[Vec<u8>]) -> Vec<u8> {
    for e in edits {
        let n = v.len().max(1);
        match e {
            Edit::Flip(p, b) if !v.is_empty() => v[p % n] ^= b,
            Edit::Insert(p, bytes) => {
                let at = p % (v.len() + 1);
                v.splice(at..at, bytes.iter().copied());
            }
            Edit::Delete(p, len) if !v.is_empty() => {
                let at = p % n;
                let end = (at + len % 64).min(v.len());
                v.drain(at..end);
            }
            Edit::Splice(p, other, from) => {
                let o = &seeds[other % seeds.len()];
                let from = from % (o.len() + 1);
                let at = p % (v.len() + 1);
                v.truncate(at);
                v.extend_from_slice(&o[from..]);
            }
            _ => {}
        }
    }
    v
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(p, b)| Edit::Flip(p, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..12)).prop_map(|(p, b)| Edit::Insert(p, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(p, l)| Edit::Delete(p, l)),
        (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(p, o, f)| Edit::Splice(p, o, f)),
    ]
}

/// Text tokens a trace line is made of, valid and not.
const TOKENS: &[&str] = &[
    "T0",
    "T1",
    "T2",
    "T9",
    "compute",
    "load",
    "store",
    "ntstore",
    "rmw",
    "clwb",
    "clflushopt",
    "clflush",
    "sfence",
    "mfence",
    "ofence",
    "dfence",
    "acquire",
    "release",
    "strand",
    "begin",
    "end",
    "op",
    "x",
    "8",
    "1",
    "64",
    "65",
    "0",
    "16",
    "0x100000000",
    "0x100000038",
    "0x2000",
    "0x3000",
    "2a",
    "ff",
    "#",
    "18446744073709551615",
    "threads",
    "pm",
    "0x40000000",
    "zz",
    "-1",
];

fn grammar_trace() -> impl Strategy<Value = Vec<u8>> {
    (1usize..4, prop::collection::vec(prop::collection::vec(0..TOKENS.len(), 1..5), 0..40)).prop_map(
        |(threads, lines)| {
            let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
            for l in lines {
                let words: Vec<&str> = l.iter().map(|&i| TOKENS[i]).collect();
                s.push_str(&words.join(" "));
                s.push('\n');
            }
            s.into_bytes()
        },
    )
}

fn fuzz(target: &str, f: fn(&[u8]), default_cases: u32, grammar: bool) {
    let seeds = corpus(target);
    for s in &seeds {
        f(s);
    }
    let n = seeds.len();
    let mutated = (0..n, prop::collection::vec(edit(), 1..6))
        .prop_map({
            let seeds = seeds.clone();
            move |(i, edits)| apply(seeds[i].clone(), &edits, &seeds)
        })
        .boxed();
    let random = prop::collection::vec(any::<u8>(), 0..300).boxed();
    let strategy = if grammar {
        prop_oneof![4 => mutated, 1 => random, 4 => grammar_trace().boxed()].boxed()
    } else {
        prop_oneof![4 => mutated, 1 => random].boxed()
    };
    let mut r = runner(target, cases(default_cases));
    if let Err(e) = r.run(&strategy, |input| {
        f(&input);
        Ok(())
    }) {
        panic!("fuzz target {target} failed: {e}");
    }
}

#[test]
fn fuzz_text_trace() {
    fuzz("text_trace", pmsim_fuzz::text_trace, 2000, true);
}

#[test]
fn fuzz_binary_trace() {
    fuzz("binary_trace", pmsim_fuzz::binary_trace, 1500, false);
}

#[test]
fn fuzz_toml_config() {
    fuzz("toml_config", pmsim_fuzz::toml_config, 1000, false);
}

#[test]
fn fuzz_set_overrides() {
    fuzz("set_overrides", pmsim_fuzz::set_overrides, 1000, false);
}

#[test]
fn fuzz_workload_params() {
    fuzz("workload_params", pmsim_fuzz::workload_params, 300, false);
}

#[test]
fn fuzz_checker() {
    fuzz("checker", pmsim_fuzz::checker, 60, false);
}

#[test]
fn every_target_has_a_harness_test_and_a_corpus() {
    for (name, _) in pmsim_fuzz::TARGETS {
        assert!(!corpus(name).is_empty());
    }
}
