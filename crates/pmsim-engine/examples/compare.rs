//! Every design on every workload: simulated time and speedup over the baseline.
//! `cargo run --release -p pmsim-engine --example compare [ops] [threads] [param=value ...]`
//! (extra workload parameters, e.g. `compute=1000`, go to every workload that has them;
//! dotted ones, e.g. `pm.xpbuffer_lines=256`, set the machine configuration)

use pmsim_engine::{simulate, Config};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ops = args.get(1).cloned().unwrap_or_else(|| "500".into());
    let threads = args.get(2).cloned().unwrap_or_else(|| "4".into());
    let mut cfg = Config::default();
    for kv in args.iter().skip(3) {
        if let Some((k, v)) = kv.split_once('=').filter(|(k, _)| k.contains('.')) {
            cfg.set(k, v).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let designs = ["baseline", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "bbb", "eadr"];
    print!("{:16}", "workload");
    for d in designs {
        print!("{d:>10}");
    }
    println!();
    for w in pmsim_workloads::names() {
        let mut p = std::collections::BTreeMap::new();
        p.insert("ops".to_string(), ops.clone());
        p.insert("threads".to_string(), threads.clone());
        let known = pmsim_workloads::find(w).map(|x| x.params()).unwrap_or_default();
        for kv in args.iter().skip(3) {
            if let Some((k, v)) = kv.split_once('=') {
                if known.iter().chain(pmsim_workloads::params::common_for(w)).any(|s| s.name == k) {
                    p.insert(k.to_string(), v.to_string());
                }
            }
        }
        let t = Arc::new(pmsim_workloads::generate(w, &p).expect("workload").trace);
        print!("{w:16}");
        let mut base = 0.0;
        for d in designs {
            match simulate(&t, &cfg, d) {
                Ok(s) => {
                    if d == "baseline" {
                        base = s.sim_time_ns;
                    }
                    print!("{:>10.2}", base / s.sim_time_ns);
                }
                Err(e) => print!("{:>10}", format!("ERR {}", e.to_string().chars().take(30).collect::<String>())),
            }
        }
        println!();
    }
}
