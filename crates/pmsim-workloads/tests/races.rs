//! Built-in workloads are data-race free on persistent memory (see `pmsim_workloads::races`):
//! every store to a PM word is ordered by synchronisation after every earlier access to it by
//! another thread, and every load after every earlier store. The only races allowed are a load
//! followed (in global order) by another thread's store: optimistic readers (FAST_FAIR, P-ART,
//! P-Masstree) read nodes without excluding later writers, which is harmless to the values the
//! generator computed.

use pmsim_trace::Kind;
use std::collections::BTreeMap;

fn check(params: &[(&str, &str)]) {
    let mut bad = Vec::new();
    for w in pmsim_workloads::names() {
        let p: BTreeMap<String, String> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let g = pmsim_workloads::generate(w, &p).unwrap();
        let races = pmsim_workloads::races::find_races(&g.trace, true, usize::MAX);
        let harmful: Vec<_> = races.iter().filter(|r| r.first.2 != Kind::Load).collect();
        if let Some(r) = harmful.first() {
            bad.push(format!("{w} {params:?}: {} races, e.g. {r}", harmful.len()));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn workloads_have_no_races_on_persistent_memory() {
    check(&[("ops", "100")]);
}

#[test]
fn workloads_have_no_races_with_eight_threads() {
    check(&[("ops", "300"), ("threads", "8")]);
}
