//! Workload parameters: a common set (threads, ops, seed, key/value sizes) plus each workload's
//! own, all given as `name=value` strings from the CLI, TOML or Python keyword arguments.

use std::collections::BTreeMap;

/// One parameter a workload accepts, with its default, unit, valid range and documentation.
/// The range is checked before anything is generated and printed by `pmsim workloads`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ParamSpec {
    pub name: &'static str,
    pub default: &'static str,
    pub unit: &'static str,
    pub range: Range,
    pub help: &'static str,
}

/// The valid values of a workload parameter: `min..=max`, multiples of `step`, and powers of
/// two only if `pow2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Range {
    pub min: u64,
    pub max: u64,
    pub step: u64,
    pub pow2: bool,
}

/// Any integer in `min..=max`.
pub const fn int(min: u64, max: u64) -> Range {
    Range { min, max, step: 1, pow2: false }
}

/// Multiples of `step` in `min..=max`.
pub const fn multiple(step: u64, min: u64, max: u64) -> Range {
    Range { min, max, step, pow2: false }
}

/// Powers of two in `min..=max`.
pub const fn power_of_two(min: u64, max: u64) -> Range {
    Range { min, max, step: 1, pow2: true }
}

impl Range {
    pub fn contains(&self, v: u64) -> bool {
        (self.min..=self.max).contains(&v) && v.is_multiple_of(self.step.max(1)) && (!self.pow2 || v.is_power_of_two())
    }

    /// `1 to 64`, or `multiples of 64 from 64 to 1048576`.
    pub fn describe(&self) -> String {
        let span = if self.max == u64::MAX {
            format!("at least {}", self.min)
        } else {
            format!("{} to {}", self.min, self.max)
        };
        if self.pow2 {
            format!("powers of two from {span}")
        } else if self.step > 1 {
            let from = if self.max == u64::MAX { span } else { format!("from {span}") };
            format!("multiples of {} {from}", self.step)
        } else {
            span
        }
    }
}

/// A workload's share of one operation kind, in percent (`0..=100`).
pub const fn percent(name: &'static str, default: &'static str, help: &'static str) -> ParamSpec {
    ParamSpec { name, default, unit: "%", range: int(0, 100), help }
}

/// `compute`: the non-memory instructions a workload runs per operation (`0..=10^6`).
pub const fn compute(default: &'static str, help: &'static str) -> ParamSpec {
    ParamSpec { name: "compute", default, unit: "instructions", range: int(0, 1_000_000), help }
}

/// `compute` where a whole request's CPU work (up to 2^32 instructions) is one parameter.
pub const fn compute_up_to_2_32(default: &'static str, help: &'static str) -> ParamSpec {
    ParamSpec { range: int(0, 1 << 32), ..compute(default, help) }
}

/// Threads × ops above which a workload is refused: the trace is built in memory before it is
/// simulated, up to about 4 KB per operation (fastfair: 80,000 operations took 440 MB of host
/// memory, measured with `trace stats`), so 10^6 operations stay within ~4 GB.
pub const MAX_TOTAL_OPS: u64 = 1_000_000;

/// Parameters every workload accepts.
pub const COMMON: &[ParamSpec] = &[
    ParamSpec { name: "threads", default: "4", unit: "threads", range: int(1, 64), help: "worker threads (one per simulated core)" },
    ParamSpec { name: "ops", default: "2000", unit: "operations", range: int(1, 1_000_000), help: "operations per thread" },
    ParamSpec { name: "seed", default: "1", unit: "", range: int(0, u64::MAX), help: "seed of every random choice (keys, interleaving)" },
    ParamSpec { name: "key_size", default: "16", unit: "bytes", range: int(8, 128), help: "key size" },
    ParamSpec { name: "value_size", default: "64", unit: "bytes", range: int(8, 128), help: "value size" },
    ParamSpec {
        name: "durable_every",
        default: "1",
        unit: "operations", range: int(1, 1 << 20),
        help: "operations per durability fence where an operation ends with one (1: each is durable when it returns, as in the original programs; K: a dfence after every K-th, which makes the K-1 before it durable too)",
    },
];

/// The common parameters a workload's generator never reads: they are not listed for it and
/// are refused when given, so a sweep over one cannot come out silently flat. The test
/// `common_parameters_change_the_trace_exactly_where_listed` checks this table against the
/// generators.
pub fn unused_common(workload: &str) -> &'static [&'static str] {
    match workload {
        "bandwidth" | "array" | "cwl" | "2lc" => &["key_size", "value_size", "durable_every"],
        "hotline" | "vacation" | "rdma-tpcc" | "rdma-ycsb" | "hash" | "rbtree" | "sps" | "btree" | "ssca2" => {
            &["key_size", "value_size"]
        }
        "rdma-ctree" | "rdma-hashmap" => &["key_size"],
        "echo" => &["durable_every"],
        _ => &[],
    }
}

/// The common parameters `workload` uses, in listing order.
pub fn common_for(workload: &str) -> impl Iterator<Item = &'static ParamSpec> {
    let unused = unused_common(workload);
    COMMON.iter().filter(move |s| !unused.contains(&s.name))
}

#[derive(Debug, thiserror::Error)]
#[error("workload '{workload}': {msg}")]
pub struct ParamsError {
    pub workload: String,
    pub msg: String,
}

/// Validated parameters: the common ones as fields, the workload's own by name.
#[derive(Clone, Debug)]
pub struct Params {
    pub threads: usize,
    pub ops: u64,
    pub seed: u64,
    pub key_size: usize,
    pub value_size: usize,
    extra: BTreeMap<String, u64>,
}

impl Params {
    /// Parses `given` against COMMON plus `own`; unknown names and bad numbers are errors.
    pub fn parse(workload: &str, own: &[ParamSpec], given: &BTreeMap<String, String>) -> Result<Params, ParamsError> {
        let err = |msg: String| ParamsError { workload: workload.to_string(), msg };
        let mut vals: BTreeMap<String, u64> = BTreeMap::new();
        for spec in COMMON.iter().chain(own) {
            let v = parse_value(spec, spec.default).ok_or_else(|| err(format!("bad default for {}", spec.name)))?;
            vals.insert(spec.name.to_string(), v);
        }
        let unused = unused_common(workload);
        for (k, v) in given {
            if !vals.contains_key(k) || unused.contains(&k.as_str()) {
                let names: Vec<&str> = common_for(workload).map(|s| s.name).chain(own.iter().map(|s| s.name)).collect();
                let what = if unused.contains(&k.as_str()) {
                    format!("parameter '{k}' does not apply to this workload (its generator never reads it)")
                } else {
                    format!("unknown parameter '{k}'")
                };
                return Err(err(format!("{what} (valid: {})", names.join(", "))));
            }
            let spec = COMMON.iter().chain(own).find(|s| s.name == k.as_str());
            let n = match spec {
                Some(s) if is_choice(s) => parse_value(s, v).ok_or_else(|| {
                    err(format!("parameter '{k}' = '{v}' is not one of {}", s.unit.replace('|', ", ")))
                })?,
                _ => parse_u64(v).ok_or_else(|| {
                    let valid = spec.map(|s| format!(" (valid: {})", s.range.describe())).unwrap_or_default();
                    err(format!("parameter '{k}' = '{v}' is not a non-negative integer{valid}"))
                })?,
            };
            if let Some(spec) = spec {
                if !spec.range.contains(n) {
                    return Err(err(format!(
                        "parameter '{k}' = {v} is out of range (valid: {})",
                        if is_choice(spec) { spec.unit.replace('|', ", ") } else { spec.range.describe() }
                    )));
                }
            }
            vals.insert(k.clone(), n);
        }
        let total = vals["threads"].saturating_mul(vals["ops"]);
        if total > MAX_TOTAL_OPS {
            return Err(err(format!(
                "threads x ops = {total} operations exceeds {MAX_TOTAL_OPS} (the trace is built in memory before it is simulated, up to ~4 KB per operation; use fewer ops)"
            )));
        }
        let threads = vals["threads"] as usize;
        if !(1..=64).contains(&threads) {
            return Err(err(format!("threads = {threads} is not from 1 to 64")));
        }
        // The hybrid remote stream runs on one thread beyond the workers (broi/common.rs).
        if threads == 64 && vals.get("remote_gap").is_some_and(|&g| g > 0) {
            return Err(err(
                "threads = 64 with remote_gap > 0 makes 65 threads (the remote stream runs on one more); at most 63 \
                 with a remote stream"
                    .into(),
            ));
        }
        let key_size = vals["key_size"] as usize;
        let value_size = vals["value_size"] as usize;
        if !(8..=128).contains(&key_size) || !(8..=128).contains(&value_size) {
            return Err(err("key_size and value_size must be from 8 to 128".into()));
        }
        if vals["ops"] == 0 {
            return Err(err("ops must be at least 1".into()));
        }
        Ok(Params { threads, ops: vals["ops"], seed: vals["seed"], key_size, value_size, extra: vals })
    }

    /// Defaults only (tests).
    pub fn defaults(workload: &str, own: &[ParamSpec]) -> Params {
        Params::parse(workload, own, &BTreeMap::new()).expect("defaults are valid")
    }

    /// A workload-specific parameter (declared in its `ParamSpec`s, so always present).
    pub fn get(&self, name: &str) -> u64 {
        self.extra.get(name).copied().unwrap_or(0)
    }
}

/// A parameter whose `unit` lists names separated by `|` takes one of those names; its value is
/// the name's index (so `Params::get` stays numeric).
fn is_choice(spec: &ParamSpec) -> bool {
    spec.unit.contains('|')
}

fn parse_value(spec: &ParamSpec, v: &str) -> Option<u64> {
    if is_choice(spec) {
        spec.unit.split('|').position(|c| c == v.trim()).map(|i| i as u64)
    } else {
        parse_u64(v)
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim().replace('_', "");
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(k: &str, v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn every_declared_default_is_in_its_range() {
        for w in crate::list() {
            for spec in COMMON.iter().chain(w.params()) {
                let d = parse_value(spec, spec.default).unwrap();
                assert!(
                    spec.range.contains(d),
                    "{}: {} default {d} not in {}",
                    w.name(),
                    spec.name,
                    spec.range.describe()
                );
            }
        }
    }

    #[test]
    fn values_outside_the_declared_range_are_refused() {
        let cases = [
            ("array", "array_bytes", "0"),
            ("array", "stripes", "0"),
            ("nstore", "durable_every", "0"),
            ("bandwidth", "block", "0"),
            ("bandwidth", "block", "65"),
            ("bandwidth", "stride", "0"),
            ("array", "threads", "65"),
            ("array", "ops", "1000000000"),
            ("nstore", "update_pct", "101"),
        ];
        for (w, k, v) in cases {
            let wl = crate::list().into_iter().find(|x| x.name() == w).unwrap();
            let e = Params::parse(w, wl.params(), &given(k, v)).unwrap_err().to_string();
            assert!(e.contains(&format!("'{k}' = {v}")) && e.contains("out of range (valid: "), "{w} {k}={v}: {e}");
        }
        let e = Params::parse(
            "array",
            &[],
            &BTreeMap::from([("threads".into(), "64".into()), ("ops".into(), "100000".into())]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("exceeds"), "{e}");
    }

    #[test]
    fn a_remote_stream_counts_against_the_thread_limit() {
        let hash = crate::list().into_iter().find(|x| x.name() == "hash").unwrap();
        let p = |t: &str| BTreeMap::from([("threads".into(), t.to_string()), ("remote_gap".into(), "100".into())]);
        let e = Params::parse("hash", hash.params(), &p("64")).unwrap_err().to_string();
        assert!(e.contains("65 threads") && e.contains("at most 63"), "{e}");
        assert!(Params::parse("hash", hash.params(), &p("63")).is_ok());
    }
}
