//! `params::unused_common` says which common parameters a workload's generator never reads.
//! Checked against the generators themselves: a listed parameter leaves the trace byte-for-byte
//! unchanged whatever its value, an unlisted one changes it for some value, and a listed one is
//! refused when given.

use pmsim_trace::binary;
use pmsim_workloads::Params;
use std::collections::BTreeMap;

const VALUES: &[(&str, &[&str])] =
    &[("key_size", &["8", "32", "128"]), ("value_size", &["8", "32", "128"]), ("durable_every", &["2", "3", "7"])];

/// The trace of `workload` with `extra` set, generated past the refusal of an unused parameter
/// (parsed under no workload's name, so nothing is refused) to see what the generator does.
fn trace_bytes(workload: &str, extra: Option<(&str, &str)>) -> Vec<u8> {
    let mut p: BTreeMap<String, String> =
        [("ops", "40"), ("threads", "3")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if let Some((k, v)) = extra {
        p.insert(k.to_string(), v.to_string());
    }
    let w = pmsim_workloads::find(workload).expect("listed");
    let params = Params::parse("(any)", w.params(), &p).unwrap_or_else(|e| panic!("{workload}: {e}"));
    let g = w.generate(&params);
    let mut out = Vec::new();
    binary::write(&mut out, &g.trace, false).expect("in memory");
    out
}

#[test]
fn common_parameters_change_the_trace_exactly_where_listed() {
    for w in pmsim_workloads::names() {
        let unused = pmsim_workloads::params::unused_common(w);
        let reference = trace_bytes(w, None);
        for (k, values) in VALUES {
            if unused.contains(k) {
                for v in *values {
                    assert!(
                        trace_bytes(w, Some((k, v))) == reference,
                        "{w}: {k}={v} changes the trace but is listed unused"
                    );
                }
                let p = BTreeMap::from([(k.to_string(), values[0].to_string())]);
                let e = pmsim_workloads::generate(w, &p).err().map(|e| e.to_string()).unwrap_or_default();
                assert!(e.contains(&format!("'{k}' does not apply")), "{w}: {k} listed as unused but accepted: {e}");
                assert!(pmsim_workloads::params::common_for(w).all(|s| s.name != *k), "{w}: {k} still listed");
            } else {
                let moved = values.iter().any(|v| trace_bytes(w, Some((k, v))) != reference);
                assert!(moved, "{w}: {k} changes nothing in the trace; list it in params::unused_common");
            }
        }
    }
}
