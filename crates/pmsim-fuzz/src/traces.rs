//! Trace readers: accept or refuse, never panic; whatever is accepted round-trips exactly.

use pmsim_engine::Config;
use pmsim_trace::{binary, text, Trace};
use std::sync::Arc;

fn text_of(t: &Trace) -> String {
    let mut out = Vec::new();
    text::write(&mut out, t).expect("writing to memory cannot fail");
    String::from_utf8(out).expect("the text writer writes UTF-8")
}

/// The round trip every accepted trace must survive, then a short simulation.
fn accepted(t: &Trace) {
    let txt = text_of(t);
    let from_text = text::parse_str("normalised", &txt)
        .unwrap_or_else(|e| panic!("the text writer wrote what the text reader refuses: {e}\n{txt}"));
    assert_eq!(text_of(&from_text), txt, "text is not a fixed point");
    for compress in [false, true] {
        let bytes = binary::write(Vec::new(), &from_text, compress).expect("memory");
        let back = binary::read("round-trip.bin", std::io::Cursor::new(&bytes))
            .unwrap_or_else(|e| panic!("the binary reader refuses what the binary writer wrote: {e}\n{txt}"));
        assert_eq!(text_of(&back), txt, "text -> binary -> text is not the identity");
    }
    simulate_small(t);
}

/// Small traces are also simulated (any outcome but a panic is fine: stuck, time overflow).
fn simulate_small(t: &Trace) {
    if t.num_events() > 256 || t.num_threads() > 8 {
        return;
    }
    let mut cfg = Config::default();
    cfg.sim.watchdog_ms = 0.01;
    let t = Arc::new(t.clone());
    let _ = pmsim_engine::simulate(&t, &cfg, "baseline");
    let _ = pmsim_engine::simulate(&t, &cfg, "asap-rp");
}

/// A text trace: parse; if accepted, the round trip and a short simulation.
pub fn text_trace(data: &[u8]) {
    if let Ok(t) = text::read("fuzz.trace", std::io::Cursor::new(data)) {
        accepted(&t);
    }
}

/// A binary trace: the in-memory reader and the streaming validator must agree; if accepted,
/// the round trip and a short simulation.
pub fn binary_trace(data: &[u8]) {
    let mem = binary::read("fuzz.bin", std::io::Cursor::new(data));
    let streamed = streamed_verdict(data);
    match (&mem, &streamed) {
        (Ok(_), Ok(())) | (Err(_), Err(_)) => {}
        _ => panic!("binary readers disagree: in memory {:?}, streaming {:?}", mem.as_ref().err(), streamed.err()),
    }
    if let Ok(t) = mem {
        accepted(&t);
    }
}

fn streamed_verdict(data: &[u8]) -> Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "pmsim-fuzz-{}-{}.bin",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, data).expect("temp file");
    let r = pmsim_trace::validate_binary(&path).map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&path);
    r
}
