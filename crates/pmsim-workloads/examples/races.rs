//! `cargo run -p pmsim-workloads --example races [WORKLOAD ...] [k=v ...]`: lists the data races
//! on persistent words of generated traces (see `pmsim_workloads::races`).

use std::collections::BTreeMap;

fn main() {
    let mut names = Vec::new();
    let mut p = BTreeMap::new();
    for a in std::env::args().skip(1) {
        match a.split_once('=') {
            Some((k, v)) => {
                p.insert(k.to_string(), v.to_string());
            }
            None => names.push(a),
        }
    }
    if names.is_empty() {
        names = pmsim_workloads::names().into_iter().map(String::from).collect();
    }
    let all = p.remove("all").is_some();
    for w in names {
        let g = pmsim_workloads::generate(&w, &p).expect("workload");
        let r = pmsim_workloads::races::find_races(&g.trace, !all, 1_000_000);
        let mut by: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for x in &r {
            *by.entry((x.first.2.name(), x.second.2.name())).or_default() += 1;
        }
        println!("{w}: {} races {by:?}", r.len());
        let mut shown: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for x in &r {
            let n = shown.entry((x.first.2.name(), x.second.2.name())).or_default();
            *n += 1;
            if *n <= 4 {
                println!("  {x}");
            }
        }
    }
}
