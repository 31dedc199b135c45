//! Configuration inputs: a TOML file and `--set NAME=VALUE` overrides. Accepted configurations
//! validate, print and re-read to themselves, and (when small) build a machine.

use pmsim_engine::Config;
use std::sync::Arc;

fn accepted(c: &Config) {
    c.validate().expect("an accepted configuration validates");
    let shown = c.show();
    let back = Config::from_toml_str("shown.toml", &shown)
        .unwrap_or_else(|e| panic!("config show wrote what the reader refuses: {e}\n{shown}"));
    assert_eq!(&back, c, "config show does not re-read to the same configuration");
    build_if_small(c);
}

/// Builds the machine and runs one tiny trace when its tables are small: allocation sizes come
/// from parameters, and this is where a bad one would panic or abort.
fn build_if_small(c: &Config) {
    let lines = (c.l1.size_kib + c.l2.size_kib) * c.core.count as u64 + c.llc.size_kib;
    if lines > 64 * 1024 || c.rt.bloom_counters > 1 << 16 || c.pm.xpbuffer_lines > 1 << 16 {
        return;
    }
    let t = pmsim_trace::text::parse_str(
        "tiny",
        "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 ofence\nT0 dfence\n",
    )
    .expect("a valid trace");
    let mut cfg = c.clone();
    cfg.sim.watchdog_ms = cfg.sim.watchdog_ms.min(1.0);
    let _ = pmsim_engine::simulate(&Arc::new(t), &cfg, "asap-ep");
}

/// A TOML configuration file.
pub fn toml_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(c) = Config::from_toml_str("fuzz.toml", text) {
        accepted(&c);
    }
}

/// `--set` overrides, one `NAME=VALUE` per line, applied in order.
pub fn set_overrides(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut c = Config::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else { continue };
        let before = c.clone();
        if c.set(k, v).is_err() {
            assert_eq!(c, before, "a refused --set changed the configuration");
        }
    }
    accepted(&c);
}
