//! One run's stats JSON: `cargo run --release -p pmsim-engine --example one WORKLOAD DESIGN [k=v ...]`
//! (workload parameters and `section.field=value` config overrides; WORKLOAD may be `trace=PATH`).

use pmsim_engine::{simulate, Config};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (w, d) = (args.get(1).cloned().unwrap_or("array".into()), args.get(2).cloned().unwrap_or("baseline".into()));
    let mut cfg = Config::default();
    let mut p = std::collections::BTreeMap::new();
    for kv in &args[3.min(args.len())..] {
        let (k, v) = kv.split_once('=').expect("k=v");
        if k.contains('.') {
            cfg.set(k, v).expect("config");
        } else {
            p.insert(k.to_string(), v.to_string());
        }
    }
    let t = if let Some(path) = w.strip_prefix("trace=") {
        Arc::new(pmsim_trace::binary::read_any(std::path::Path::new(path)).expect("trace"))
    } else {
        Arc::new(pmsim_workloads::generate(&w, &p).expect("workload").trace)
    };
    match simulate(&t, &cfg, &d) {
        Ok(s) => println!("{}", s.to_json()),
        Err(e) => eprintln!("{e}"),
    }
}
