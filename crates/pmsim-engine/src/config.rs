//! The machine's parameters: one struct, readable from TOML and from `key=value` overrides.
//!
//! Every parameter has a unit and a default (docs/design.md §4, after ASAP's Table II and its
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

            /// Every numeric parameter's value with its unit (names and flags left out).
            pub fn numbers(&self) -> Vec<(&'static str, f64)> {
                let mut out = Vec::new();
                $( $(
                    if let Some(v) = AsNumber::as_number(&self.$section.$field) {
                        out.push(($unit, v));
                    }
                )* )*
                out
            }
        }
    };
    (@limit $lim:expr) => { $lim };
    (@limit) => { UNDECLARED };
}

config! {
    core: CoreCfg {
        count: usize = 4, "cores", @int(1, 64), "simulated cores, at most 64: one per trace thread, raised to the trace's thread count (cores without a thread stay idle and change no result)";
        freq_ghz: f64 = 2.0, "GHz", @num(0.01, 100.0), "core clock; simulated time is whole picoseconds, so the cycle is 1000/freq_ghz ps rounded (exact where that is whole: 2, 2.5, 4, 5 GHz; 3 GHz runs at 333 ps, 0.1% fast)";
        ipc: f64 = 2.0, "instr/cycle", @num(0.01, 64.0), "non-memory instructions retired per cycle (compute events)";
        store_buffer: usize = 32, "entries", @int(1, 4096), "TSO store buffer entries per core";
        wc_buffers: usize = 10, "entries", @int(1, 64), "write-combining buffers per core (non-temporal stores under baseline and eadr): a line's ntstores combine in one, sent to its MC when all 8 words are written, at a fence or locked instruction, to free a buffer, or at the thread's end; taken until the MC accepts the write; a core finding all taken waits (stall_cycles.wc_full)";
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
        ack_ns: f64 = 20.0, "ns", @LATENCY_NS, "an MC's acknowledgement of an accepted write back to its sender (the ASAP artifact: 10)";
        cdr_ns: f64 = 20.0, "ns", @LATENCY_NS, "ASAP's cross-thread dependency resolution (CDR) message core->core (the artifact's oracle map: one cycle, 0.5)";
    }
    mc: McCfg {
        count: usize = 2, "MCs", @int(1, 16), "PM memory controllers";
        interleave: u64 = 4096, "bytes", @pow2(64, 1 << 40), "physical address interleaving across MCs (power of two, >= 64)";
        mapping: String = "interleave".into(), "name", @one_of(&["interleave", "xor"]), "address mapper: interleave | xor (interleave with XOR of higher bits)";
        wpq_entries: usize = 16, "entries", @int(1, 4096), "write pending queue per MC (inside the ADR persistence domain; optane model: the banked model has bank.write_queue)";
        wpq_read_ns: f64 = 10.0, "ns", @LATENCY_NS, "a read served from the write queue (a queued write of its line forwards the data; no media access): the MC's own pipeline, gem5's memory-controller frontend latency, which the ASAP artifact ran with";
    }
    pm: PmCfg {
        read_ns: f64 = 175.0, "ns", @LATENCY_NS, "media read latency (optane model; banked: bank.*)";
        write_ns: f64 = 90.0, "ns", @LATENCY_NS, "media write latency (optane model; banked: bank.*)";
        read_gbps: f64 = 6.6, "GB/s", @num(0.001, 1e4), "media read bandwidth per MC (optane model)";
        write_gbps: f64 = 2.3, "GB/s", @num(0.001, 1e4), "media write bandwidth per MC (optane model)";
        xpbuffer_lines: usize = 0, "lines", @int(0, 1 << 20), "on-DIMM buffer (Optane XPBuffer) per MC holding recently read or written lines; 0 = off (optane model)";
        xpbuffer_ns: f64 = 40.0, "ns", @LATENCY_NS, "read latency of a line found in the on-DIMM buffer (optane model)";
        model: String = "optane".into(), "name", @one_of(&["optane", "banked"]), "PM media model: optane (WPQ in ADR, latency + bandwidth per MC) | banked (banks with open-page row buffers, FR-FCFS with write drain; [bank] section, docs/design.md §9)";
    }
    bank: BankCfg {
        count: usize = 8, "banks", @pow2(1, 1024), "banks per MC (banked model; power of two)";
        row_bytes: u64 = 2048, "bytes", @pow2(64, 1 << 30), "row buffer size; also the stride unit of the address mapping (a row-sized group of consecutive addresses stays in one bank, consecutive groups go to consecutive banks)";
        mapping: String = "stride".into(), "name", @one_of(&["stride", "xor"]), "bank address mapper: stride (the seed's: consecutive row-sized groups on consecutive banks) | xor (permutation-based interleaving, Zhang et al. MICRO'00: the stride bank XOR the row index's low bits, so regions a multiple of banks x rows apart do not start in one bank)";
        hit_ns: f64 = 36.0, "ns", @LATENCY_NS, "read or write that hits the open row";
        read_conflict_ns: f64 = 100.0, "ns", @LATENCY_NS, "read that must open another row";
        write_conflict_ns: f64 = 300.0, "ns", @LATENCY_NS, "write that must open another row";
        read_queue: usize = 64, "entries", @int(1, 4096), "read queue per MC: reads in service or waiting at the banks";
        write_queue: usize = 64, "entries", @int(1, 4096), "write queue per MC (takes the place of mc.wpq_entries under the banked model)";
        drain_high_pct: f64 = 75.0, "%", @num(0.0, 100.0), "write-queue occupancy at which the MC enters write drain (writes before reads)";
        drain_low_pct: f64 = 25.0, "%", @num(0.0, 100.0), "write-queue occupancy at which write drain ends";
        persist_at: String = "media".into(), "name", @one_of(&["media", "queue"]), "where a write becomes persistent: media (acknowledged when its bank write completes; the seed's persistence domain) | queue (ADR: acknowledged on entering the write queue)";
    }
    dram: DramCfg {
        latency_ns: f64 = 60.0, "ns", @LATENCY_NS, "volatile DRAM access latency";
    }
    pb: PbCfg {
        entries: usize = 32, "entries", @int(1, 4096), "persist buffer per core (64 B lines with byte masks)";
        flush_ns: f64 = 60.0, "ns", @LATENCY_NS, "PB -> MC flush latency";
        wbb_entries: usize = 8, "entries", @int(1, 4096), "write-back buffer per core (HOPS, ASAP): a private eviction of a line with writes still queued in the PB is held until the PB has sent the entry that was its tail; an eviction that finds it full makes the access that caused it, and the core's next store into the PB, wait for an entry (stall_cycles.wbb_full)";
        line_flushes_overlap: bool = false, "", @BOOL, "a flush of a line may leave the PB while an older flush of that line is unacknowledged: the core->MC path delivers them in order (the ASAP artifact); an MC that NACKs a flush then NACKs that core's later flushes of the line until the retry. false: it waits for the older one's ACK";
    }
    et: EtCfg {
        entries: usize = 32, "entries", @int(1, 4096), "epoch table per core (ASAP)";
        dep_epoch: String = "writer".into(), "name", @one_of(&["writer", "current"]), "which epoch of the source a cross-thread dependency waits for (HOPS, ASAP, delegated, BROI): writer (the epoch of the source's conflicting access, or the last one up to the release an acquire synchronises with; none if it has committed: design.md §6, each private line tagged with its last write's epoch) | current (the source's current epoch, closed then, whenever another core's access conflicts: the papers' 'replies with the data and current epoch number')";
    }
    rt: RtCfg {
        entries: usize = 32, "records", @int(1, 1 << 16), "recovery table per MC (ASAP undo + delay records)";
        bloom_counters: usize = 256, "counters", @int(1, 1 << 20), "counting Bloom filter per MC of NACKed lines (ASAP): an LLC eviction of a line it holds (or a false positive) waits, with the access that caused it and the core's next store into the PB, until the NACKed write is retried (stall_cycles.nack); fewer counters, more false positives";
        undo_reads_pm: bool = true, "", @BOOL, "an undo record is created by reading the line's old contents from PM (latency and read bandwidth); false: the ASAP artifact's free undo records";
        delay_through_wpq: bool = true, "", @BOOL, "a delay record is applied at its epoch's commit as a write through the WPQ (queue entry, media bandwidth); false: the ASAP artifact's functional application";
        early_ack: String = "accept".into(), "name", @one_of(&["accept", "after_read"]), "when an MC acknowledges an early flush that creates an undo record: accept (the record, in the ADR domain, holds the write while the PM read of the old line is in flight) | after_read (only once the read returned and the write entered the WPQ)";
    }
    broi: BroiCfg {
        sigma: f64 = 0.25, "", @num(0.0, 1e6), "Eq. 2 weight of a Ready subset's size against BLP: Priority(R_i) = BLP(R - R_i + N_i) - sigma * size(R_i); >= 0 (the seed gives no value; below 1 lets BLP dominate and size break ties)";
        entry_slots: usize = 8, "requests", @int(1, 4096), "requests buffered per thread at the MC side (a BROI entry's units; the delegated baseline gets the same buffer)";
        barrier_regs: usize = 2, "registers", @int(1, 4096), "barrier index registers per BROI entry: at most this many barriers (so regs+1 epochs) buffered per thread";
        remote_entries: usize = 2, "entries", @int(1, 64), "remote BROI entries (one per RDMA channel)";
        remote_threads: usize = 0, "cores", @int(0, 63), "the trace's last this-many threads' persists enter the remote BROI queue instead of a local entry (the hybrid mode's remote-style stream); at most broi.remote_entries and below the trace's threads";
        starvation_ns: f64 = 2000.0, "ns", @LATENCY_NS, "a remote request blocked this long is scheduled ahead of local ones (starvation threshold)";
        remote_low_util_pct: f64 = 50.0, "%", @num(0.0, 100.0), "remote requests go to a bank with no local candidate only while the MC write queue is below this occupancy";
        step_ns: f64 = 0.4, "ns", @LATENCY_NS, "latency of one scheduling step of the MC-side persist scheduler, `delegated`'s as well as `broi`'s (the seed's synthesised controller: 0.4 ns)";
    }
    baseline: BaselineCfg {
        flush: String = "clwb".into(), "name", @one_of(&["clwb", "clflush"]), "instruction the baseline's fences flush with: clwb (the line stays cached) | clflush (the line is invalidated, so its next access misses to PM: the ASAP artifact's baseline)";
    }
    hops: HopsCfg {
        poll_cycles: u64 = 500, "cycles", @int(1, 1_000_000_000), "global TS register polling period";
        access_cycles: u64 = 50, "cycles", @int(0, 1_000_000_000), "global TS register access latency";
    }
    net: NetCfg {
        strategy: String = "sync".into(), "name", @one_of(&["sync", "bsp", "broken-bsp-unordered"]), "remote persistence (rdma_pwrite, docs/design.md §9): sync (each region waits for its persist ACK) | bsp (regions stream in order; the client waits only at rdma_wait)";
        link_latency_ns: f64 = 1000.0, "ns", @LATENCY_NS, "one-way wire + switch latency per packet (a small RDMA write's round trip is ~2 x (this + 2 x nic_ns) = 3.2 us: 'a few us', ConnectX-class NICs)";
        link_gbps: f64 = 40.0, "Gb/s", @above(0.0, 1e6), "link bandwidth of every NIC port, each direction (40-100 Gb/s RDMA links; 40 = QDR InfiniBand / 40 GbE)";
        mtu_bytes: u64 = 4096, "bytes", @int(64, 1 << 20), "largest packet payload (InfiniBand / RoCE MTU); a region is sent as ceil(size / mtu) packets";
        packet_overhead_bytes: u64 = 78, "bytes", @int(0, 4096), "headers per packet on the wire (RoCEv2: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 + ICRC 4 + FCS 4); a persist ACK is one header-only packet";
        nic_ns: f64 = 300.0, "ns", @LATENCY_NS, "NIC processing per message at each end (send: WQE fetch + payload DMA; receive: PCIe write into the LLC / ACK generation)";
        post_ns: f64 = 100.0, "ns", @LATENCY_NS, "client CPU time to post one rdma_pwrite (work request + doorbell)";
        nic_msg_ns: f64 = 30.0, "ns", @LATENCY_NS, "NIC message rate as the interval between messages each NIC pipeline (send, receive) starts: a posted work request, a received packet, a persist ACK; the server's are shared by every client (30 ns = 33 M messages/s, ConnectX-3-class small-message rates)";
        send_queue: usize = 64, "regions", @int(1, 1 << 16), "client NIC send queue: rdma_pwrites in flight per client before posting blocks (bsp)";
        channels: usize = 2, "entries", @int(1, 64), "server remote BROI queue entries, one per RDMA channel; client i uses channel i mod channels";
        rpb_entries: usize = 8, "lines", @int(1, 1 << 16), "server remote persist buffer: lines per channel in flight from the LLC (DDIO) to the MCs";
    }
    sim: SimCfg {
        seed: u64 = 1, "", @int(0, i64::MAX as u64), "seed of every random choice in the engine (random replacement); at most 2^63-1 (a TOML integer)";
        watchdog_ms: f64 = 1000.0, "ms", @above(0.0, 1e6), "simulated time without progress after which a stuck core is reported (raised to 256 times the longest latency in ns or core cycles, line transfer or RDMA region transfer the configuration names)";
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

/// The dotted key (`pb.entries`) a `key = value` line of a TOML file sets, so a type error names
/// the parameter and not only the line; `None` for a header or a line that is not a plain key.
fn key_at_line(text: &str, line: usize) -> Option<String> {
    let mut section = String::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.starts_with('[') {
            section = l.trim_matches(|c| c == '[' || c == ']').trim().to_string();
        }
        if i + 1 == line {
            let (key, _) = l.split_once('=').filter(|_| !l.starts_with('[') && !l.starts_with('#'))?;
            let key = key.trim().trim_matches('"');
            return Some(if section.is_empty() { key.to_string() } else { format!("{section}.{key}") });
        }
    }
    None
}

/// The line of a TOML file that sets the dotted parameter `name`, if one does.
fn line_of(text: &str, name: &str) -> Option<usize> {
    (1..=text.lines().count()).find(|&l| key_at_line(text, l).as_deref() == Some(name))
}

/// A TOML deserialiser's message in the words of the configuration reference: Rust's type names
/// (`usize`, `f64`, `struct PbCfg`) mean nothing to a user.
fn plain_types(msg: &str) -> String {
    let mut out = msg.to_string();
    for (rust, plain) in [
        ("expected usize", "expected an integer >= 0"),
        ("expected u64", "expected an integer >= 0"),
        ("expected u32", "expected an integer >= 0"),
        ("expected u16", "expected an integer >= 0"),
        ("expected u8", "expected an integer >= 0"),
        ("expected i64", "expected an integer"),
        ("expected f64", "expected a number"),
        // TOML dates and times reach serde as maps, as tables do.
        ("invalid type: map", "invalid type: a table or date-time"),
    ] {
        out = out.replace(rust, plain);
    }
    match out.find("expected struct ") {
        Some(i) => format!("{}expected a table (a [section] of parameters)", &out[..i]),
        None => out,
    }
}

fn param_err(name: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Param { name: name.to_string(), msg: msg.into() }
}

impl Config {
    /// This configuration for a run of `threads` trace threads: the core count raised to the
    /// thread count when smaller, as the machine does. Build the design from it too, so every
    /// part sized by cores sees the same count (delegated/BROI once indexed past theirs).
    pub fn for_threads(&self, threads: usize) -> Config {
        let mut c = self.clone();
        c.core.count = c.core.count.max(threads);
        c
    }

    /// Reads a TOML file; unknown sections or keys are errors naming them.
    pub fn from_toml_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError::File { file: file.clone(), msg: e.to_string() })?;
        Config::from_toml_str(&file, &text)
    }

    pub fn from_toml_str(file: &str, text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| {
            let mut msg = plain_types(e.message());
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let source = line.and_then(|l| text.lines().nth(l - 1)).unwrap_or("").trim();
            // Top-level names are sections: say which mistake it is in the file's own terms.
            if let Some(rest) = msg.strip_prefix("unknown field ") {
                let header = source.trim_matches(|c| c == '[' || c == ']').trim();
                if let (true, Some((sec, _))) = (source.starts_with('['), header.rsplit_once('.')) {
                    // `[pm.extra]`: a table inside a section, whose fields are parameters.
                    msg = format!("[{header}]: [{sec}] holds parameters, not tables; unknown parameter {rest}");
                } else if source.starts_with('[') {
                    msg = format!("unknown section {rest}");
                } else if !text.lines().take(line.unwrap_or(0)).any(|l| l.trim_start().starts_with('[')) {
                    msg = format!(
                        "a parameter outside any [section]: sections are {}",
                        rest.split_once(", expected one of ").map_or(rest, |(_, s)| s)
                    );
                }
            } else if source.starts_with('[') && !source.starts_with("[[") && msg.starts_with("invalid type") {
                // `[core.count]`: a parameter written as a table.
                let name = source.trim_matches(|c| c == '[' || c == ']').trim();
                let (sec, field) = name.rsplit_once('.').unwrap_or(("", name));
                msg = format!(
                    "[{name}] makes {name} a table, but it is a parameter: write `{field} = VALUE` under [{sec}]"
                );
            } else if source.starts_with("[[") {
                let name = source.trim_matches(|c| c == '[' || c == ']').trim();
                msg = format!("[[{name}]] is an array of tables; parameters go in one table, [{name}]");
            }
            match line {
                Some(l) => match key_at_line(text, l) {
                    Some(key) => {
                        // A value of the wrong type or sign: say what the parameter takes
                        // (`count = -1` read "expected an integer >= 0" where 1 to 64 is valid).
                        if let Some(p) = PARAMS.iter().find(|p| p.name == key).filter(|_| msg.starts_with("invalid")) {
                            msg = format!("{msg} (valid: {})", p.limit.describe());
                        }
                        ConfigError::File { file: format!("{file}:{l}"), msg: format!("{key}: {msg}") }
                    }
                    None => ConfigError::File { file: format!("{file}:{l}"), msg },
                },
                None => ConfigError::File { file: file.to_string(), msg },
            }
        })?;
        // A value out of its range, or parameters at odds, named with the file (and the line
        // that sets the parameter, when one does).
        c.validate().map_err(|e| match e {
            ConfigError::Param { name, msg } => match line_of(text, &name) {
                Some(l) => ConfigError::File { file: format!("{file}:{l}"), msg: format!("{name}: {msg}") },
                None => ConfigError::File { file: file.to_string(), msg: format!("parameter '{name}': {msg}") },
            },
            other => other,
        })?;
        Ok(c)
    }

    /// Applies `section.field=value` (also accepts `section_field`); on error nothing changes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        self.set_all([(key, value)])
    }

    /// Applies several overrides together and validates the result once, so parameters that
    /// constrain each other can move together whatever their order (`l1.size_kib=48` with
    /// `l1.ways=12`, or `bank.drain_high_pct=10` with `drain_low_pct=5`, each invalid beside the
    /// other's default). On error nothing changes.
    pub fn set_all<'a>(&mut self, overrides: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<(), ConfigError> {
        let mut next = self.clone();
        for (key, value) in overrides {
            next.assign(key, value)?;
        }
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Parses `value` into the parameter's field, checking its type and its own range only.
    fn assign(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let name = self.canonical(key)?;
        let (sec, field) = name.split_once('.').unwrap_or(("", ""));
        let mut v = toml::Value::try_from(&*self).map_err(|e| param_err(key, e.to_string()))?;
        let slot = v.get_mut(sec).and_then(|s| s.get_mut(field)).ok_or_else(|| param_err(key, "unknown parameter"))?;
        let parsed = match slot {
            toml::Value::Integer(_) => {
                let digits = value.trim().replace('_', "");
                let parsed = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
                    // Hex, as everywhere else in pmsim (addresses, `--seed`).
                    Some(hex) => i64::from_str_radix(hex, 16),
                    None => digits.parse::<i64>(),
                };
                let parsed = parsed.map(toml::Value::Integer).map_err(|_| {
                    // TOML integers are 64-bit signed: a larger one cannot be a parameter value.
                    if digits.parse::<i128>().is_ok() {
                        param_err(&name, format!("'{value}' is out of range (at most {})", i64::MAX))
                    } else {
                        param_err(&name, format!("'{value}' is not an integer"))
                    }
                })?;
                // Every integer parameter is unsigned: say its range, not the type's.
                if let toml::Value::Integer(n @ i64::MIN..=-1) = parsed {
                    if let Some(p) = PARAMS.iter().find(|p| p.name == name) {
                        return Err(p.limit.err(&name, n));
                    }
                }
                parsed
            }
            toml::Value::Float(_) => value
                .trim()
                .parse::<f64>()
                .map(toml::Value::Float)
                .map_err(|_| param_err(&name, format!("'{value}' is not a number")))?,
            toml::Value::String(_) => toml::Value::String(value.to_string()),
            toml::Value::Boolean(_) => match value.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "on" | "yes" => toml::Value::Boolean(true),
                "false" | "0" | "off" | "no" => toml::Value::Boolean(false),
                _ => {
                    return Err(param_err(
                        &name,
                        format!("'{value}' is not a boolean (true, false, or 1/0, on/off, yes/no)"),
                    ))
                }
            },
            _ => return Err(param_err(&name, "cannot be set")),
        };
        *slot = parsed;
        let next: Config = v.try_into().map_err(|e: toml::de::Error| param_err(&name, plain_types(e.message())))?;
        // The value's own range is reported here, naming it, rather than as whatever other
        // check the whole configuration fails first.
        next.check_limits()?;
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
        if key.trim().is_empty() {
            return Err(param_err(key, "the parameter name is missing (expected NAME=VALUE, e.g. pm.write_ns=120)"));
        }
        let prefix = key.split(['.', '_']).next().unwrap_or("");
        let close: Vec<&str> = if prefix.is_empty() {
            Vec::new()
        } else {
            PARAMS.iter().map(|p| p.name).filter(|n| n.starts_with(prefix)).collect()
        };
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
                    format!("{size} KiB with {n}.ways {ways} does not give a power-of-two number of sets"),
                ));
            }
        }
        if self.bank.drain_low_pct > self.bank.drain_high_pct {
            return Err(param_err(
                "bank.drain_low_pct",
                format!(
                    "{} must not exceed bank.drain_high_pct ({}): the write drain stops below where it starts \
                     (set either mark)",
                    self.bank.drain_low_pct, self.bank.drain_high_pct
                ),
            ));
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

    /// The longest single step the configuration names (ps): its longest latency (in ns or in
    /// core cycles, such as HOPS's polling period), a line at its slowest media bandwidth, the
    /// largest RDMA region at its link bandwidth. A run may go this long, many times over,
    /// without a core making progress, so the watchdog scales with it.
    pub fn longest_step_ps(&self) -> u64 {
        let line = pmsim_trace::LINE_BYTES as f64;
        let region_bits = 8.0 * pmsim_trace::MAX_REGION_BYTES as f64;
        let cycle_ns = self.cycle_ps() as f64 / 1000.0;
        let ns = self
            .numbers()
            .into_iter()
            .map(|(unit, v)| match unit {
                "ns" => v,
                "cycles" => v * cycle_ns,
                "GB/s" => line / v,
                "Gb/s" => region_bits / v,
                _ => 0.0,
            })
            .fold(0.0, f64::max);
        (ns * 1000.0).min(u64::MAX as f64 / 4.0) as u64
    }

    /// Simulated time without progress after which a run is reported stuck (ps):
    /// `sim.watchdog_ms`, raised to 256 of the configuration's longest steps.
    pub fn watchdog_ps(&self) -> u64 {
        ((self.sim.watchdog_ms * 1e9) as u64).max(self.longest_step_ps().saturating_mul(256))
    }
}

/// A parameter's value as a number, for the ones that are numbers.
trait AsNumber {
    fn as_number(&self) -> Option<f64>;
}
impl AsNumber for f64 {
    fn as_number(&self) -> Option<f64> {
        Some(*self)
    }
}
impl AsNumber for u64 {
    fn as_number(&self) -> Option<f64> {
        Some(*self as f64)
    }
}
impl AsNumber for usize {
    fn as_number(&self) -> Option<f64> {
        Some(*self as f64)
    }
}
impl AsNumber for bool {
    fn as_number(&self) -> Option<f64> {
        None
    }
}
impl AsNumber for String {
    fn as_number(&self) -> Option<f64> {
        None
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
        // A wrongly typed value names the parameter, not only the line.
        let e = Config::from_toml_str("t.toml", "# x\n[pb]\n\nentries = \"x\"\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:4: pb.entries: invalid type"), "{e}");
        let e = Config::from_toml_str("t.toml", "[pm]\nwrite_ns = true\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:2: pm.write_ns: invalid type"), "{e}");
        // In the reference's words, not Rust's types.
        let e = Config::from_toml_str("t.toml", "[pb]\nentries = -3\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:2: pb.entries:") && e.contains("expected an integer >= 0"), "{e}");
        let e = Config::from_toml_str("t.toml", "pb = 3\n").unwrap_err().to_string();
        assert!(e.contains("expected a table") && !e.contains("struct"), "{e}");
        // A value out of range, or two at odds, names the file and the line that sets it.
        let e = Config::from_toml_str("t.toml", "[pm]\n\n[core]\ncount = 65\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:4: core.count: must be 1 to 64"), "{e}");
        let e = Config::from_toml_str("t.toml", "[l1]\nsize_kib = 48\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:2: l1.size_kib:") && e.contains("power-of-two"), "{e}");
        let e = Config::default().set("", "3").unwrap_err().to_string();
        assert!(e.contains("name is missing") && !e.contains("did you mean"), "{e}");
        let mut c = Config::default();
        let e = c.set("pm.write", "1").unwrap_err().to_string();
        assert!(e.contains("pm.write_ns"), "{e}");
        c.set("core.count", "0x8").unwrap();
        assert_eq!(c.core.count, 8);
        let e = c.set("core.count", "abc").unwrap_err().to_string();
        assert!(e.contains("'abc' is not an integer"), "{e}");
        let e = c.set("l1.replacement", "fifo").unwrap_err().to_string();
        assert!(e.contains("unknown value 'fifo' (valid: lru, random)"), "{e}");
        let e = c.set("mc.count", "-1").unwrap_err().to_string();
        assert_eq!(e, "parameter 'mc.count': must be 1 to 16, got -1");
        // Mistakes of the file's structure, in its own terms.
        let toml_err = |src: &str| Config::from_toml_str("t.toml", src).unwrap_err().to_string();
        let e = toml_err("[mcx]\ncount = 2\n");
        assert!(e.starts_with("t.toml:1: unknown section `mcx`"), "{e}");
        // Tester Y's Y6: a value the type cannot hold names the parameter's valid range.
        let e = Config::from_toml_str("t.toml", "[core]\ncount = -1\n").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:2: core.count: ") && e.ends_with("(valid: 1 to 64)"), "{e}");
        // Tester Y's Y6: a table inside a section is not a section of its own.
        let e = Config::from_toml_str("t.toml", "[pm]\nwrite_ns = 90.0\n[pm.extra]\nx = 1\n").unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml:3: [pm.extra]: [pm] holds parameters, not tables; unknown parameter `extra`"),
            "{e}"
        );
        let e = toml_err("count = 2\n[mc]\n");
        assert!(e.starts_with("t.toml:1: count: a parameter outside any [section]: sections are `core`"), "{e}");
        let e = toml_err("[[mc]]\ncount = 2\n");
        assert!(e.starts_with("t.toml:1: [[mc]] is an array of tables; parameters go in one table, [mc]"), "{e}");
        let e = toml_err("[core.count]\nx = 1\n");
        assert!(e.starts_with("t.toml:1: [core.count] makes core.count a table, but it is a parameter: write `count = VALUE` under [core]"), "{e}");
        let e = toml_err("[pm]\nwrite_ns = 1979-05-27\n");
        assert!(e.starts_with("t.toml:2: pm.write_ns: invalid type: a table or date-time, expected a number"), "{e}");
    }

    #[test]
    fn a_refused_set_leaves_the_configuration_unchanged() {
        // Found by the set_overrides fuzz target: set() used to assign before validating.
        let mut c = Config::default();
        assert!(c.set("l1.ways", "3").is_err());
        assert_eq!(c, Config::default());
    }

    #[test]
    fn parameters_that_constrain_each_other_move_together() {
        // A 48 KiB 12-way L1 (Ice Lake): either override is invalid beside the other's default.
        // A write drain between 5% and 10%: the high mark is invalid beside the default low one.
        // Each pair is valid together, in either order.
        let pairs: [[(&str, &str); 2]; 2] =
            [[("l1.size_kib", "48"), ("l1.ways", "12")], [("bank.drain_high_pct", "10"), ("bank.drain_low_pct", "5")]];
        for (k, v) in [pairs[0][0], pairs[0][1], pairs[1][0]] {
            assert!(Config::default().set(k, v).is_err(), "{k}={v} alone");
        }
        for pair in pairs {
            for order in [pair, [pair[1], pair[0]]] {
                let mut c = Config::default();
                c.set_all(order).unwrap();
                for (k, v) in order {
                    let shown = c.show();
                    let field = k.split_once('.').unwrap().1;
                    assert!(shown.lines().any(|l| l.starts_with(&format!("{field} = {v}"))), "{k}={v}: {shown}");
                }
            }
        }
        // The whole set is refused together, naming the parameter, and nothing changes.
        let mut c = Config::default();
        let e = c.set_all([("l1.ways", "12"), ("pm.write_ns", "120")]).unwrap_err().to_string();
        assert!(e.contains("l1.size_kib"), "{e}");
        assert_eq!(c, Config::default());
        let e = c.set_all([("l1.size_kib", "48"), ("l1.ways", "x")]).unwrap_err().to_string();
        assert!(e.contains("l1.ways") && e.contains("'x' is not an integer"), "{e}");
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
