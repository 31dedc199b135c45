//! The machine's parameters: one struct, readable from TOML and from `key=value` overrides.
//!
//! Every parameter has a unit and a default (DESIGN.md §4, after ASAP's Table II and its
//! artifact). [`PARAMS`] documents them all; `pmsim config show` prints the effective values.
//! Names are dotted (`pm.write_ns`) and identical in TOML (`[pm] write_ns = 90`), on the command
//! line (`--set pm.write_ns=90`) and in Python (`pm_write_ns=90`).

use crate::limits::*;
use serde::{Deserialize, Serialize};

/// Documentation of one parameter: its name, unit, valid range and meaning.
pub struct ParamDoc {
    pub name: &'static str,
    pub unit: &'static str,
    pub limit: Limit,
    pub help: &'static str,
}

/// One line per parameter: `field: type = default, "unit", @range, "help";`. The range
/// (`@int(1, 64)`, `@LATENCY_NS`, `@one_of(&["lru", "random"])`, see `limits.rs`) is what the
/// validator checks and what `config show` and the generated docs print; a line without one
/// still builds (any value of the type) but fails the test `every_parameter_declares_its_range`.
macro_rules! config {
    ($( $section:ident : $sty:ident { $( $field:ident : $ty:ty = $default:expr, $unit:expr, $(@ $lim:expr,)? $help:expr; )* } )*) => {
        $(
            #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
            #[serde(deny_unknown_fields, default)]
            pub struct $sty { $( pub $field: $ty, )* }
            impl Default for $sty {
                fn default() -> Self { $sty { $( $field: $default, )* } }
            }
        )*
        /// The whole machine configuration.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
        #[serde(deny_unknown_fields, default)]
        pub struct Config { $( pub $section: $sty, )* }

        /// Every parameter, in order, with unit, range and meaning.
        pub const PARAMS: &[ParamDoc] = &[
            $( $( ParamDoc {
                name: concat!(stringify!($section), ".", stringify!($field)),
                unit: $unit,
                limit: config!(@limit $($lim)?),
                help: $help,
            }, )* )*
        ];

        impl Config {
            /// Checks every parameter against its declared range, in `PARAMS` order.
            fn check_limits(&self) -> Result<(), ConfigError> {
                let mut i = 0;
                $( $(
                    Checked::check(&self.$section.$field, PARAMS[i].name, &PARAMS[i].limit)?;
                    i += 1;
                )* )*
                let _ = i;
                Ok(())
            }
        }
    };
    (@limit $lim:expr) => { $lim };
    (@limit) => { UNDECLARED };
}

config! {
    core: CoreCfg {
        count: usize = 4, "cores", @int(1, 64), "simulated cores (one trace thread each; at most 64)";
        freq_ghz: f64 = 2.0, "GHz", @num(0.01, 100.0), "core clock";
        ipc: f64 = 2.0, "instr/cycle", @num(0.01, 64.0), "non-memory instructions retired per cycle (compute events)";
        store_buffer: usize = 32, "entries", @int(1, 4096), "TSO store buffer entries per core";
    }
    l1: CacheCfg {
        size_kib: u64 = 32, "KiB", @int(1, 1 << 12), "private L1D size";
        ways: usize = 8, "ways", @int(1, 64), "associativity";
        latency_ns: f64 = 1.0, "ns", @LATENCY_NS, "hit latency";
        replacement: String = "lru".into(), "name", @one_of(&["lru", "random"]), "replacement policy: lru | random";
    }
    l2: L2Cfg {
        size_kib: u64 = 2048, "KiB", @int(1, 1 << 15), "private L2 size";
        ways: usize = 8, "ways", @int(1, 64), "associativity";
        latency_ns: f64 = 10.0, "ns", @LATENCY_NS, "hit latency";
        replacement: String = "lru".into(), "name", @one_of(&["lru", "random"]), "replacement policy: lru | random";
    }
    llc: LlcCfg {
        size_kib: u64 = 16384, "KiB", @int(1, 1 << 18), "shared LLC size (inclusive; holds the directory)";
        ways: usize = 16, "ways", @int(1, 64), "associativity";
        latency_ns: f64 = 20.0, "ns", @LATENCY_NS, "hit latency (also the directory lookup)";
        replacement: String = "lru".into(), "name", @one_of(&["lru", "random"]), "replacement policy: lru | random";
    }
    noc: NocCfg {
        hop_ns: f64 = 20.0, "ns", @LATENCY_NS, "on-chip message core<->core and core<->MC without data (forwards, ACK, commit, CDR, NACK)";
        writeback_ns: f64 = 60.0, "ns", @LATENCY_NS, "cache line write-back from a core's caches to an MC (clwb, non-temporal and LLC write-backs); the same data path as pb.flush_ns";
    }
    mc: McCfg {
        count: usize = 2, "MCs", @int(1, 16), "PM memory controllers";
        interleave: u64 = 4096, "bytes", @pow2(64, 1 << 40), "physical address interleaving across MCs (power of two, >= 64)";
        mapping: String = "interleave".into(), "name", @one_of(&["interleave", "xor"]), "address mapper: interleave | xor (interleave with XOR of higher bits)";
        wpq_entries: usize = 16, "entries", @int(1, 4096), "write pending queue per MC (inside the ADR persistence domain)";
    }
    pm: PmCfg {
        read_ns: f64 = 175.0, "ns", @LATENCY_NS, "media read latency";
        write_ns: f64 = 90.0, "ns", @LATENCY_NS, "media write latency";
        read_gbps: f64 = 6.6, "GB/s", @num(0.001, 1e4), "media read bandwidth per MC";
        write_gbps: f64 = 2.3, "GB/s", @num(0.001, 1e4), "media write bandwidth per MC";
        xpbuffer_lines: usize = 0, "lines", @int(0, 1 << 20), "on-DIMM buffer (Optane XPBuffer) per MC holding recently read or written lines; 0 = off";
        xpbuffer_ns: f64 = 40.0, "ns", @LATENCY_NS, "read latency of a line found in the on-DIMM buffer";
    }
    dram: DramCfg {
        latency_ns: f64 = 60.0, "ns", @LATENCY_NS, "volatile DRAM access latency";
    }
    pb: PbCfg {
        entries: usize = 32, "entries", @int(1, 4096), "persist buffer per core (64 B lines with byte masks)";
        flush_ns: f64 = 60.0, "ns", @LATENCY_NS, "PB -> MC flush latency";
        wbb_entries: usize = 8, "entries", @int(1, 4096), "write-back buffer per core (ASAP: private evictions held until the PB flushes)";
    }
    et: EtCfg {
        entries: usize = 32, "entries", @int(1, 4096), "epoch table per core (ASAP)";
    }
    rt: RtCfg {
        entries: usize = 32, "records", @int(1, 1 << 16), "recovery table per MC (ASAP undo + delay records)";
        bloom_counters: usize = 256, "counters", @int(1, 1 << 20), "counting Bloom filter per MC for NACKed lines";
        early_ack: String = "accept".into(), "name", @one_of(&["accept", "after_read"]), "when an MC acknowledges an early flush that creates an undo record: accept (the record, in the ADR domain, holds the write while the PM read of the old line is in flight) | after_read (only once the read returned and the write entered the WPQ)";
    }
    hops: HopsCfg {
        poll_cycles: u64 = 500, "cycles", @int(1, 1_000_000_000), "global TS register polling period";
        access_cycles: u64 = 50, "cycles", @int(0, 1_000_000_000), "global TS register access latency";
    }
    sim: SimCfg {
        seed: u64 = 1, "", @int(0, u64::MAX), "seed of every random choice in the engine (random replacement)";
        watchdog_ms: f64 = 1000.0, "ms", @above(0.0, 1e6), "simulated time without progress after which a stuck core is reported";
    }
}

/// A configuration problem, naming the parameter or file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {msg}")]
    File { file: String, msg: String },
    #[error("parameter '{name}': {msg}")]
    Param { name: String, msg: String },
}

fn param_err(name: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Param { name: name.to_string(), msg: msg.into() }
}

impl Config {
    /// Reads a TOML file; unknown sections or keys are errors naming them.
    pub fn from_toml_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError::File { file: file.clone(), msg: e.to_string() })?;
        Config::from_toml_str(&file, &text)
    }

    pub fn from_toml_str(file: &str, text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            match line {
                Some(l) => ConfigError::File { file: format!("{file}:{l}"), msg },
                None => ConfigError::File { file: file.to_string(), msg },
            }
        })?;
        c.validate()?;
        Ok(c)
    }

    /// Applies `section.field=value` (also accepts `section_field`); on error nothing changes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let name = self.canonical(key)?;
        let (sec, field) = name.split_once('.').unwrap_or(("", ""));
        let mut v = toml::Value::try_from(&*self).map_err(|e| param_err(key, e.to_string()))?;
        let slot = v.get_mut(sec).and_then(|s| s.get_mut(field)).ok_or_else(|| param_err(key, "unknown parameter"))?;
        let parsed = match slot {
            toml::Value::Integer(_) => value
                .trim()
                .replace('_', "")
                .parse::<i64>()
                .map(toml::Value::Integer)
                .map_err(|_| param_err(&name, format!("'{value}' is not an integer")))?,
            toml::Value::Float(_) => value
                .trim()
                .parse::<f64>()
                .map(toml::Value::Float)
                .map_err(|_| param_err(&name, format!("'{value}' is not a number")))?,
            toml::Value::String(_) => toml::Value::String(value.to_string()),
            _ => return Err(param_err(&name, "cannot be set")),
        };
        *slot = parsed;
        let next: Config = v.try_into().map_err(|e: toml::de::Error| param_err(&name, e.message().to_string()))?;
        // A refused value leaves the configuration as it was.
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Resolves `pm_write_ns` / `pm.write_ns` to the dotted name, or lists close names.
    pub fn canonical(&self, key: &str) -> Result<String, ConfigError> {
        for p in PARAMS {
            if p.name == key || p.name.replacen('.', "_", 1) == key {
                return Ok(p.name.to_string());
            }
        }
        let prefix = key.split(['.', '_']).next().unwrap_or("");
        let close: Vec<&str> = PARAMS.iter().map(|p| p.name).filter(|n| n.starts_with(prefix)).collect();
        let hint = if close.is_empty() {
            "see 'pmsim config show'".to_string()
        } else {
            format!("did you mean one of: {}", close.join(", "))
        };
        Err(param_err(key, format!("unknown parameter ({hint})")))
    }

    /// Checks every value against its declared range (`PARAMS`), then the rules that tie
    /// parameters together. Runs before anything is built from the configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_limits()?;
        for (n, size, ways) in [
            ("l1", self.l1.size_kib, self.l1.ways),
            ("l2", self.l2.size_kib, self.l2.ways),
            ("llc", self.llc.size_kib, self.llc.ways),
        ] {
            let lines = size * 1024 / 64;
            if ways == 0 || lines == 0 || lines % ways as u64 != 0 || !(lines / ways as u64).is_power_of_two() {
                return Err(param_err(
                    &format!("{n}.size_kib"),
                    format!("{size} KiB with {ways} ways does not give a power-of-two number of sets"),
                ));
            }
        }
        Ok(())
    }

    /// The declared range of a parameter (dotted name).
    pub fn limit(name: &str) -> Option<Limit> {
        PARAMS.iter().find(|p| p.name == name).map(|p| p.limit)
    }

    /// `name = value  # unit — help`, one line per parameter (for `pmsim config show`).
    pub fn show(&self) -> String {
        let v = toml::Value::try_from(self).unwrap_or(toml::Value::Boolean(false));
        let mut out = String::new();
        let mut section = "";
        for p in PARAMS {
            let (sec, field) = p.name.split_once('.').unwrap_or(("", p.name));
            if sec != section {
                out.push_str(&format!("{}[{sec}]\n", if section.is_empty() { "" } else { "\n" }));
                section = sec;
            }
            let val = v.get(sec).and_then(|s| s.get(field)).map(|x| x.to_string()).unwrap_or_default();
            out.push_str(&format!(
                "{field} = {val}  # {}{} (valid: {})\n",
                if p.unit.is_empty() { String::new() } else { format!("[{}] ", p.unit) },
                p.help,
                p.limit.describe()
            ));
        }
        out
    }

    /// The parameter table of `docs/config.md` (Markdown), generated from `PARAMS`.
    pub fn reference_markdown() -> String {
        let d = Config::default();
        let v = toml::Value::try_from(&d).unwrap_or(toml::Value::Boolean(false));
        let mut out = String::from("| parameter | default | unit | valid | meaning |\n|---|---|---|---|---|\n");
        for p in PARAMS {
            let (sec, field) = p.name.split_once('.').unwrap_or(("", p.name));
            let val = v.get(sec).and_then(|s| s.get(field)).map(|x| x.to_string()).unwrap_or_default();
            let cell = |s: &str| s.replace('|', "\\|");
            out.push_str(&format!(
                "| `{}` | `{val}` | {} | {} | {} |\n",
                p.name,
                p.unit,
                cell(&p.limit.describe()),
                cell(p.help)
            ));
        }
        out
    }

    /// Picoseconds per core cycle.
    pub fn cycle_ps(&self) -> u64 {
        (1000.0 / self.core.freq_ghz).round() as u64
    }
}

/// Nanoseconds (config unit) to picoseconds (engine unit).
pub fn ns(x: f64) -> u64 {
    (x * 1000.0).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented() {
        let c = Config::default();
        c.validate().unwrap();
        let shown = c.show();
        for p in PARAMS {
            let field = p.name.split_once('.').unwrap().1;
            assert!(shown.contains(&format!("{field} = ")), "{} missing from show()", p.name);
            assert!(!p.help.is_empty());
        }
        assert!(shown.contains("write_ns = 90.0  # [ns]"));
    }

    #[test]
    fn toml_and_set_reach_the_same_value() {
        let c = Config::from_toml_str("t.toml", "[pm]\nwrite_ns = 120.0\n[mc]\ncount = 4\n").unwrap();
        let mut d = Config::default();
        d.set("pm.write_ns", "120").unwrap();
        d.set("mc_count", "4").unwrap();
        assert_eq!(c, d);
    }

    #[test]
    fn bad_config_is_named() {
        let e = Config::from_toml_str("t.toml", "[pm]\nwrite_nss = 1.0\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:2") && e.contains("write_nss"), "{e}");
        let e = Config::from_toml_str("t.toml", "[mc]\ninterleave = 100\n").unwrap_err().to_string();
        assert!(e.contains("mc.interleave"), "{e}");
        let mut c = Config::default();
        let e = c.set("pm.write", "1").unwrap_err().to_string();
        assert!(e.contains("pm.write_ns"), "{e}");
        let e = c.set("core.count", "abc").unwrap_err().to_string();
        assert!(e.contains("'abc' is not an integer"), "{e}");
        let e = c.set("l1.replacement", "fifo").unwrap_err().to_string();
        assert!(e.contains("unknown value 'fifo' (valid: lru, random)"), "{e}");
    }

    #[test]
    fn a_refused_set_leaves_the_configuration_unchanged() {
        // Found by the set_overrides fuzz target: set() used to assign before validating.
        let mut c = Config::default();
        assert!(c.set("l1.ways", "3").is_err());
        assert_eq!(c, Config::default());
    }

    #[test]
    fn every_parameter_declares_its_range() {
        let undeclared: Vec<&str> =
            PARAMS.iter().filter(|p| p.limit == UNDECLARED || p.limit.describe() == "any").map(|p| p.name).collect();
        assert!(
            undeclared.is_empty(),
            "parameters without a declared range (add @range to their line): {undeclared:?}"
        );
    }

    #[test]
    fn values_out_of_range_are_refused_before_anything_is_built() {
        // The values that once panicked ("capacity overflow") or aborted (allocation failure),
        // and the ones that wrapped simulated time.
        for (k, v) in [
            ("mc.wpq_entries", "9223372036854775807"),
            ("mc.wpq_entries", "4294967296"),
            ("pb.entries", "9223372036854775807"),
            ("rt.entries", "9223372036854775807"),
            ("rt.bloom_counters", "9223372036854775807"),
            ("core.store_buffer", "9223372036854775807"),
            ("pm.write_ns", "1.9e16"),
            ("pm.write_gbps", "1e-300"),
            ("pm.read_ns", "nan"),
            ("pm.read_ns", "inf"),
            ("noc.writeback_ns", "-1"),
            ("llc.size_kib", "9223372036854775807"),
        ] {
            let mut c = Config::default();
            let e = c.set(k, v).unwrap_err().to_string();
            assert!(e.contains(k) && e.contains("must be"), "{k}={v}: {e}");
        }
        let e = Config::from_toml_str("t.toml", "[mc]\nwpq_entries = 9223372036854775807\n").unwrap_err().to_string();
        assert!(e.contains("mc.wpq_entries") && e.contains("1 to 4096"), "{e}");
    }
}
