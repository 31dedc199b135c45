//! Workload parameters: a common set (threads, ops, seed, key/value sizes) plus each workload's
//! own, all given as `name=value` strings from the CLI, TOML or Python keyword arguments.

use std::collections::BTreeMap;

/// One parameter a workload accepts, with its default and documentation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ParamSpec {
    pub name: &'static str,
    pub default: &'static str,
    pub unit: &'static str,
    pub help: &'static str,
}

/// Parameters every workload accepts.
pub const COMMON: &[ParamSpec] = &[
    ParamSpec { name: "threads", default: "4", unit: "threads", help: "worker threads (one per simulated core)" },
    ParamSpec { name: "ops", default: "2000", unit: "operations", help: "operations per thread" },
    ParamSpec { name: "seed", default: "1", unit: "", help: "seed of every random choice (keys, interleaving)" },
    ParamSpec { name: "key_size", default: "16", unit: "bytes", help: "key size (16..=128)" },
    ParamSpec { name: "value_size", default: "64", unit: "bytes", help: "value size (16..=128)" },
    ParamSpec {
        name: "durable_every",
        default: "1",
        unit: "operations",
        help: "operations per durability fence where an operation ends with one (1: each is durable when it returns, as in the original programs; K: a dfence after every K-th, which makes the K-1 before it durable too)",
    },
];

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
        for (k, v) in given {
            if !vals.contains_key(k) {
                let names: Vec<&str> = COMMON.iter().chain(own).map(|s| s.name).collect();
                return Err(err(format!("unknown parameter '{k}' (valid: {})", names.join(", "))));
            }
            let spec = COMMON.iter().chain(own).find(|s| s.name == k.as_str());
            let n = match spec {
                Some(s) if is_choice(s) => parse_value(s, v).ok_or_else(|| {
                    err(format!("parameter '{k}' = '{v}' is not one of {}", s.unit.replace('|', ", ")))
                })?,
                _ => {
                    parse_u64(v).ok_or_else(|| err(format!("parameter '{k}' = '{v}' is not a non-negative integer")))?
                }
            };
            vals.insert(k.clone(), n);
        }
        let threads = vals["threads"] as usize;
        if !(1..=64).contains(&threads) {
            return Err(err(format!("threads = {threads} is not in 1..=64")));
        }
        let key_size = vals["key_size"] as usize;
        let value_size = vals["value_size"] as usize;
        if !(8..=128).contains(&key_size) || !(8..=128).contains(&value_size) {
            return Err(err("key_size and value_size must be in 8..=128".into()));
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
