//! A workload parameter's declared range is what the generator runs: a value the range admits
//! gives its own trace (never silently rounded or clamped to another value's), and a value the
//! generator could not honour is refused before anything is generated, naming the valid ones.

use pmsim_trace::binary;
use std::collections::BTreeMap;

fn params(workload: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut p: BTreeMap<String, String> =
        [("ops", "30"), ("threads", "2")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if workload == "hash" {
        p.insert("remote_gap".into(), "100".into());
    }
    for (k, v) in extra {
        p.insert(k.to_string(), v.to_string());
    }
    p
}

fn trace_bytes(workload: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let g = pmsim_workloads::generate(workload, &params(workload, extra)).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    binary::write(&mut out, &g.trace, false).expect("in memory");
    out
}

/// (workload, parameter, valid values that must give distinct traces, invalid values, the
/// words the refusal names the valid ones with)
type Case = (&'static str, &'static str, &'static [&'static str], &'static [&'static str], &'static str);

const CASES: &[Case] = &[
    ("cwl", "copy_bytes", &["8", "16", "32", "64"], &["24", "9", "63"], "powers of two from 8 to 64"),
    ("2lc", "copy_bytes", &["8", "16", "32", "64"], &["12", "48"], "powers of two from 8 to 64"),
    ("ssca2", "max_degree", &["4", "1024"], &["1025", "65536"], "1 to 1024"),
    ("hash", "remote_region", &["128", "192"], &["100", "65"], "multiples of 64 from 64 to 1048576"),
    ("hash", "log_gap", &["64", "128"], &["1", "100"], "multiples of 64 from 0 to 1073741824"),
];

#[test]
fn every_admitted_value_runs_as_itself_and_others_are_refused() {
    for (w, k, valid, invalid, words) in CASES {
        let traces: Vec<Vec<u8>> = valid.iter().map(|v| trace_bytes(w, &[(k, v)])).collect();
        for i in 0..traces.len() {
            for j in i + 1..traces.len() {
                assert!(traces[i] != traces[j], "{w}: {k}={} and {k}={} give one trace", valid[i], valid[j]);
            }
        }
        for v in *invalid {
            let e = pmsim_workloads::check_params(w, &params(w, &[(k, v)]))
                .expect_err(&format!("{w}: {k}={v} was admitted"))
                .to_string();
            assert!(e.contains(k) && e.contains(words), "{w}: {k}={v}: {e}");
        }
    }
}
