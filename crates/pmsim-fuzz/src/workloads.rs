//! Workload parameters: refused with an error or accepted; an accepted small workload generates
//! a trace the shared validator accepts (generators and readers obey the same rules).

use std::collections::BTreeMap;

/// Bytes → (workload, `NAME=VALUE` parameters): byte 0 picks the workload, the rest is text.
pub fn workload_params(data: &[u8]) {
    let list = pmsim_workloads::list();
    let Some((&pick, rest)) = data.split_first() else { return };
    let w = list[pick as usize % list.len()];
    let mut params = BTreeMap::new();
    for line in String::from_utf8_lossy(rest).lines() {
        if let Some((k, v)) = line.split_once('=') {
            params.insert(k.to_string(), v.to_string());
        }
    }
    let specs: Vec<_> = pmsim_workloads::params::common_for(w.name()).chain(w.params()).collect();
    let Ok(p) = pmsim_workloads::Params::parse(w.name(), w.params(), &params) else { return };
    // Bounded work: generate only small runs (the ranges allow far larger ones).
    let heavy = ["initial", "keys", "items", "tuples", "relations", "array_bytes", "max_segments", "initial_buckets"];
    if p.threads as u64 * p.ops > 400 || heavy.iter().any(|h| specs.iter().any(|s| s.name == *h) && p.get(h) > 1 << 16)
    {
        return;
    }
    let g = pmsim_workloads::generate(w.name(), &params).expect("parameters accepted by parse");
    if let Err(e) = pmsim_trace::validate::check_trace(&g.trace) {
        panic!("workload {} {params:?} generates a trace the validator refuses: {e}", w.name());
    }
}
