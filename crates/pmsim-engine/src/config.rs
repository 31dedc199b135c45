//! The machine's parameters: one struct, readable from TOML and from `key=value` overrides.
//!
//! Every parameter has a unit and a default (DESIGN.md §4, after ASAP's Table II and its
//! artifact). [`PARAMS`] documents them all; `pmsim config show` prints the effective values.
//! Names are dotted (`pm.write_ns`) and identical in TOML (`[pm] write_ns = 90`), on the command
//! line (`--set pm.write_ns=90`) and in Python (`pm_write_ns=90`).

use serde::{Deserialize, Serialize};

/// Documentation of one parameter.
pub struct ParamDoc {
    pub name: &'static str,
    pub unit: &'static str,
    pub help: &'static str,
}

macro_rules! config {
    ($( $section:ident : $sty:ident { $( $field:ident : $ty:ty = $default:expr, $unit:expr, $help:expr; )* } )*) => {
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

        /// Every parameter, in order, with unit and meaning.
        pub const PARAMS: &[ParamDoc] = &[
            $( $( ParamDoc { name: concat!(stringify!($section), ".", stringify!($field)), unit: $unit, help: $help }, )* )*
        ];
    };
}

config! {
    core: CoreCfg {
        count: usize = 4, "cores", "simulated cores (one trace thread each; at most 64)";
        freq_ghz: f64 = 2.0, "GHz", "core clock";
        ipc: f64 = 2.0, "instr/cycle", "non-memory instructions retired per cycle (compute events)";
        store_buffer: usize = 32, "entries", "TSO store buffer entries per core";
    }
    l1: CacheCfg {
        size_kib: u64 = 32, "KiB", "private L1D size";
        ways: usize = 8, "ways", "associativity";
        latency_ns: f64 = 1.0, "ns", "hit latency";
        replacement: String = "lru".into(), "name", "replacement policy: lru | random";
    }
    l2: L2Cfg {
        size_kib: u64 = 2048, "KiB", "private L2 size";
        ways: usize = 8, "ways", "associativity";
        latency_ns: f64 = 10.0, "ns", "hit latency";
        replacement: String = "lru".into(), "name", "replacement policy: lru | random";
    }
    llc: LlcCfg {
        size_kib: u64 = 16384, "KiB", "shared LLC size (inclusive; holds the directory)";
        ways: usize = 16, "ways", "associativity";
        latency_ns: f64 = 20.0, "ns", "hit latency (also the directory lookup)";
        replacement: String = "lru".into(), "name", "replacement policy: lru | random";
    }
    noc: NocCfg {
        hop_ns: f64 = 20.0, "ns", "on-chip message core<->core and core<->MC without data (forwards, ACK, commit, CDR, NACK)";
        writeback_ns: f64 = 60.0, "ns", "cache line write-back from a core's caches to an MC (clwb, non-temporal and LLC write-backs); the same data path as pb.flush_ns";
    }
    mc: McCfg {
        count: usize = 2, "MCs", "PM memory controllers";
        interleave: u64 = 4096, "bytes", "physical address interleaving across MCs (power of two, >= 64)";
        mapping: String = "interleave".into(), "name", "address mapper: interleave | xor (interleave with XOR of higher bits)";
        wpq_entries: usize = 16, "entries", "write pending queue per MC (inside the ADR persistence domain)";
    }
    pm: PmCfg {
        read_ns: f64 = 175.0, "ns", "media read latency";
        write_ns: f64 = 90.0, "ns", "media write latency";
        read_gbps: f64 = 6.6, "GB/s", "media read bandwidth per MC";
        write_gbps: f64 = 2.3, "GB/s", "media write bandwidth per MC";
        xpbuffer_lines: usize = 0, "lines", "on-DIMM buffer (Optane XPBuffer) per MC holding recently read or written lines; 0 = off";
        xpbuffer_ns: f64 = 40.0, "ns", "read latency of a line found in the on-DIMM buffer";
        model: String = "optane".into(), "name", "PM media model: optane (WPQ in ADR, latency + bandwidth per MC) | banked (banks with open-page row buffers, FR-FCFS with write drain; [bank] section, DESIGN.md section 9)";
    }
    bank: BankCfg {
        count: usize = 8, "banks", "banks per MC (banked model; power of two)";
        row_bytes: u64 = 2048, "bytes", "row buffer size; also the stride unit of the address mapping (a row-sized group of consecutive addresses stays in one bank, consecutive groups go to consecutive banks)";
        hit_ns: f64 = 36.0, "ns", "read or write that hits the open row";
        read_conflict_ns: f64 = 100.0, "ns", "read that must open another row";
        write_conflict_ns: f64 = 300.0, "ns", "write that must open another row";
        read_queue: usize = 64, "entries", "read queue per MC: reads in service or waiting at the banks";
        write_queue: usize = 64, "entries", "write queue per MC (takes the place of mc.wpq_entries under the banked model)";
        drain_high_pct: f64 = 75.0, "%", "write-queue occupancy at which the MC enters write drain (writes before reads)";
        drain_low_pct: f64 = 25.0, "%", "write-queue occupancy at which write drain ends";
        persist_at: String = "media".into(), "name", "where a write becomes persistent: media (acknowledged when its bank write completes; the seed's persistence domain) | queue (ADR: acknowledged on entering the write queue)";
    }
    dram: DramCfg {
        latency_ns: f64 = 60.0, "ns", "volatile DRAM access latency";
    }
    pb: PbCfg {
        entries: usize = 32, "entries", "persist buffer per core (64 B lines with byte masks)";
        flush_ns: f64 = 60.0, "ns", "PB -> MC flush latency";
        wbb_entries: usize = 8, "entries", "write-back buffer per core (ASAP: private evictions held until the PB flushes)";
    }
    et: EtCfg {
        entries: usize = 32, "entries", "epoch table per core (ASAP)";
    }
    rt: RtCfg {
        entries: usize = 32, "records", "recovery table per MC (ASAP undo + delay records)";
        bloom_counters: usize = 256, "counters", "counting Bloom filter per MC for NACKed lines";
        early_ack: String = "accept".into(), "name", "when an MC acknowledges an early flush that creates an undo record: accept (the record, in the ADR domain, holds the write while the PM read of the old line is in flight) | after_read (only once the read returned and the write entered the WPQ)";
    }
    broi: BroiCfg {
        sigma: f64 = 0.25, "", "Eq. 2 weight of a Ready subset's size against BLP: Priority(R_i) = BLP(R - R_i + N_i) - sigma * size(R_i); >= 0 (the seed gives no value; below 1 lets BLP dominate and size break ties)";
        entry_slots: usize = 8, "requests", "requests buffered per thread at the MC side (a BROI entry's units; the delegated baseline gets the same buffer)";
        barrier_regs: usize = 2, "registers", "barrier index registers per BROI entry: at most this many barriers (so regs+1 epochs) buffered per thread";
        remote_entries: usize = 2, "entries", "remote BROI entries (one per RDMA channel)";
        remote_threads: usize = 0, "cores", "the last this-many cores' persists enter the remote BROI queue instead of a local entry (the hybrid mode's remote-style stream)";
        starvation_ns: f64 = 2000.0, "ns", "a remote request blocked this long is scheduled ahead of local ones (starvation threshold)";
        remote_low_util_pct: f64 = 50.0, "%", "remote requests go to a bank with no local candidate only while the MC write queue is below this occupancy";
        step_ns: f64 = 0.4, "ns", "latency of one scheduling step (the seed's synthesised controller: 0.4 ns)";
    }
    hops: HopsCfg {
        poll_cycles: u64 = 500, "cycles", "global TS register polling period";
        access_cycles: u64 = 50, "cycles", "global TS register access latency";
    }
    sim: SimCfg {
        seed: u64 = 1, "", "seed of every random choice in the engine (random replacement)";
        watchdog_ms: f64 = 1000.0, "ms", "simulated time without progress after which a stuck core is reported";
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

    /// Applies `section.field=value` (also accepts `section_field`).
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
        *self = v.try_into().map_err(|e: toml::de::Error| param_err(&name, e.message().to_string()))?;
        self.validate()
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

    /// Checks ranges that would make the model meaningless.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let pos = |name: &str, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(param_err(name, format!("must be > 0, got {v}")))
            }
        };
        let nonneg = |name: &str, v: f64| {
            if v >= 0.0 && v.is_finite() {
                Ok(())
            } else {
                Err(param_err(name, format!("must be >= 0, got {v}")))
            }
        };
        if !(1..=64).contains(&self.core.count) {
            return Err(param_err("core.count", format!("must be in 1..=64, got {}", self.core.count)));
        }
        pos("core.freq_ghz", self.core.freq_ghz)?;
        pos("core.ipc", self.core.ipc)?;
        if self.core.store_buffer == 0 {
            return Err(param_err("core.store_buffer", "must be at least 1"));
        }
        for (n, size, ways, lat, repl) in [
            ("l1", self.l1.size_kib, self.l1.ways, self.l1.latency_ns, &self.l1.replacement),
            ("l2", self.l2.size_kib, self.l2.ways, self.l2.latency_ns, &self.l2.replacement),
            ("llc", self.llc.size_kib, self.llc.ways, self.llc.latency_ns, &self.llc.replacement),
        ] {
            let lines = size * 1024 / 64;
            if ways == 0 || lines == 0 || lines % ways as u64 != 0 || !(lines / ways as u64).is_power_of_two() {
                return Err(param_err(
                    &format!("{n}.size_kib"),
                    format!("{size} KiB with {ways} ways does not give a power-of-two number of sets"),
                ));
            }
            nonneg(&format!("{n}.latency_ns"), lat)?;
            if !["lru", "random"].contains(&repl.as_str()) {
                return Err(param_err(
                    &format!("{n}.replacement"),
                    format!("unknown policy '{repl}' (valid: lru, random)"),
                ));
            }
        }
        nonneg("noc.hop_ns", self.noc.hop_ns)?;
        nonneg("noc.writeback_ns", self.noc.writeback_ns)?;
        nonneg("pm.xpbuffer_ns", self.pm.xpbuffer_ns)?;
        if !(1..=16).contains(&self.mc.count) {
            return Err(param_err("mc.count", format!("must be in 1..=16, got {}", self.mc.count)));
        }
        if self.mc.interleave < 64 || !self.mc.interleave.is_power_of_two() {
            return Err(param_err(
                "mc.interleave",
                format!("must be a power of two >= 64, got {}", self.mc.interleave),
            ));
        }
        if !["interleave", "xor"].contains(&self.mc.mapping.as_str()) {
            return Err(param_err(
                "mc.mapping",
                format!("unknown mapper '{}' (valid: interleave, xor)", self.mc.mapping),
            ));
        }
        if !["accept", "after_read"].contains(&self.rt.early_ack.as_str()) {
            return Err(param_err(
                "rt.early_ack",
                format!("unknown policy '{}' (valid: accept, after_read)", self.rt.early_ack),
            ));
        }
        if self.mc.wpq_entries == 0 {
            return Err(param_err("mc.wpq_entries", "must be at least 1"));
        }
        if !["optane", "banked"].contains(&self.pm.model.as_str()) {
            return Err(param_err("pm.model", format!("unknown model '{}' (valid: optane, banked)", self.pm.model)));
        }
        if self.bank.count == 0 || !self.bank.count.is_power_of_two() || self.bank.count > 1024 {
            return Err(param_err(
                "bank.count",
                format!("must be a power of two in 1..=1024, got {}", self.bank.count),
            ));
        }
        if self.bank.row_bytes < 64 || !self.bank.row_bytes.is_power_of_two() {
            return Err(param_err(
                "bank.row_bytes",
                format!("must be a power of two >= 64 (one line), got {}", self.bank.row_bytes),
            ));
        }
        for (n, v) in [("bank.read_queue", self.bank.read_queue), ("bank.write_queue", self.bank.write_queue)] {
            if v == 0 {
                return Err(param_err(n, "must be at least 1"));
            }
        }
        nonneg("bank.hit_ns", self.bank.hit_ns)?;
        nonneg("bank.read_conflict_ns", self.bank.read_conflict_ns)?;
        nonneg("bank.write_conflict_ns", self.bank.write_conflict_ns)?;
        for (n, v) in
            [("bank.drain_high_pct", self.bank.drain_high_pct), ("bank.drain_low_pct", self.bank.drain_low_pct)]
        {
            if !(0.0..=100.0).contains(&v) {
                return Err(param_err(n, format!("must be in 0..=100, got {v}")));
            }
        }
        if self.bank.drain_low_pct > self.bank.drain_high_pct {
            return Err(param_err("bank.drain_low_pct", "must not exceed bank.drain_high_pct"));
        }
        if !["media", "queue"].contains(&self.bank.persist_at.as_str()) {
            return Err(param_err(
                "bank.persist_at",
                format!("unknown domain '{}' (valid: media, queue)", self.bank.persist_at),
            ));
        }
        nonneg("pm.read_ns", self.pm.read_ns)?;
        nonneg("pm.write_ns", self.pm.write_ns)?;
        pos("pm.read_gbps", self.pm.read_gbps)?;
        pos("pm.write_gbps", self.pm.write_gbps)?;
        nonneg("dram.latency_ns", self.dram.latency_ns)?;
        nonneg("pb.flush_ns", self.pb.flush_ns)?;
        for (n, v) in [
            ("pb.entries", self.pb.entries),
            ("pb.wbb_entries", self.pb.wbb_entries),
            ("et.entries", self.et.entries),
            ("rt.entries", self.rt.entries),
            ("rt.bloom_counters", self.rt.bloom_counters),
        ] {
            if v == 0 {
                return Err(param_err(n, "must be at least 1"));
            }
        }
        nonneg("broi.sigma", self.broi.sigma)?;
        nonneg("broi.starvation_ns", self.broi.starvation_ns)?;
        nonneg("broi.step_ns", self.broi.step_ns)?;
        if !(0.0..=100.0).contains(&self.broi.remote_low_util_pct) {
            return Err(param_err(
                "broi.remote_low_util_pct",
                format!("must be in 0..=100, got {}", self.broi.remote_low_util_pct),
            ));
        }
        for (n, v) in [
            ("broi.entry_slots", self.broi.entry_slots),
            ("broi.barrier_regs", self.broi.barrier_regs),
            ("broi.remote_entries", self.broi.remote_entries),
        ] {
            if v == 0 {
                return Err(param_err(n, "must be at least 1"));
            }
        }
        if self.broi.remote_threads > self.broi.remote_entries {
            return Err(param_err(
                "broi.remote_threads",
                format!(
                    "must not exceed broi.remote_entries ({}): each remote stream needs its own channel, got {}",
                    self.broi.remote_entries, self.broi.remote_threads
                ),
            ));
        }
        if self.broi.remote_threads >= self.core.count {
            return Err(param_err(
                "broi.remote_threads",
                format!("must be below core.count ({}), got {}", self.core.count, self.broi.remote_threads),
            ));
        }
        if self.hops.poll_cycles == 0 {
            return Err(param_err("hops.poll_cycles", "must be at least 1"));
        }
        pos("sim.watchdog_ms", self.sim.watchdog_ms)?;
        Ok(())
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
                "{field} = {val}  # {}{}\n",
                if p.unit.is_empty() { String::new() } else { format!("[{}] ", p.unit) },
                p.help
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
        assert!(e.contains("unknown policy 'fifo'"), "{e}");
    }
}
