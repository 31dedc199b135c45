//! Simulated time is u64 picoseconds; a run that would pass `MAX_SIM_PS` stops with a clear
//! error instead of wrapping around (which once reported a huge compute as ~20 µs or "stuck").

use pmsim_engine::{simulate, Config, SimError};
use std::sync::Arc;

fn run(text: &str) -> Result<pmsim_engine::RunStats, SimError> {
    let t = Arc::new(pmsim_trace::text::parse_str("t.trace", text).unwrap());
    simulate(&t, &Config::default(), "baseline")
}

#[test]
fn huge_compute_count_is_a_time_overflow_not_a_wrap() {
    for threads in [
        "threads 1\nT0 compute 18446744073709551615\n",
        "threads 2\nT0 compute 18446744073709551615\nT1 store 0x100000000 8 1\n",
    ] {
        let e = run(&format!("# pmsim trace v1\n{threads}")).unwrap_err();
        assert!(matches!(e, SimError::TimeOverflow { .. }), "{e}");
        assert!(e.to_string().contains("213 days"), "{e}");
    }
}

#[test]
fn long_but_representable_compute_runs() {
    // 10^12 instructions at 2 GHz x 2 IPC = 250 simulated seconds: far from the limit.
    let s = run("# pmsim trace v1\nthreads 1\nT0 compute 1000000000000\n").unwrap();
    assert!(s.sim_time_ns > 2.4e11, "{}", s.sim_time_ns);
}
