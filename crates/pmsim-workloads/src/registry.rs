//! The list of built-in workloads, by name.

use crate::params::{ParamSpec, Params, ParamsError};
use crate::recovery::Recovery;
use pmsim_trace::Trace;
use std::collections::BTreeMap;

/// A generated workload: its trace and the recovery check that goes with it.
pub struct Generated {
    pub trace: Trace,
    pub recovery: Box<dyn Recovery>,
}

/// A built-in workload generator.
pub trait Workload: Sync {
    fn name(&self) -> &'static str;
    /// One line: what it is and what persist pattern it reproduces.
    fn description(&self) -> &'static str;
    /// Its own parameters (the common ones are in `params::COMMON`).
    fn params(&self) -> &'static [ParamSpec];
    fn generate(&self, p: &Params) -> Generated;
}

/// A workload given as plain data: its listing and the function that generates it. Each workload
/// file declares one as a `static`, so the file holds its data structure's logic and nothing else.
pub struct WorkloadSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [ParamSpec],
    pub generate: fn(&Params) -> Generated,
}

impl Workload for WorkloadSpec {
    fn name(&self) -> &'static str {
        self.name
    }
    fn description(&self) -> &'static str {
        self.description
    }
    fn params(&self) -> &'static [ParamSpec] {
        self.params
    }
    fn generate(&self, p: &Params) -> Generated {
        (self.generate)(p)
    }
}

/// Every built-in workload, grouped as in the ASAP paper's Table III.
pub static WORKLOADS: &[&dyn Workload] =
    &[&crate::micro::bandwidth::BANDWIDTH, &crate::micro::array::ARRAY_UPDATE, &crate::micro::hotline::HOT_LINE];

pub fn names() -> Vec<&'static str> {
    all().map(|w| w.name()).collect()
}

fn all() -> impl Iterator<Item = &'static dyn Workload> {
    WORKLOADS
        .iter()
        .copied()
        .chain(crate::whisper::WORKLOADS.iter().copied())
        .chain(crate::atlas::WORKLOADS.iter().copied())
        .chain(crate::index::WORKLOADS.iter().copied())
        .chain(crate::remote::WORKLOADS.iter().copied())
        .chain(crate::persistency::WORKLOADS.iter().copied())
        .chain(crate::broi::WORKLOADS.iter().copied())
}

/// Looks a workload up by name.
pub fn find(name: &str) -> Option<&'static dyn Workload> {
    all().find(|w| w.name() == name)
}

/// All workloads, in listing order.
pub fn list() -> Vec<&'static dyn Workload> {
    all().collect()
}

/// Checks `params` (given as strings) for workload `name` as [`generate`] does, without
/// generating: a sweep refuses a bad value before its first run.
pub fn check_params(name: &str, params: &BTreeMap<String, String>) -> Result<(), ParamsError> {
    let w = find(name).ok_or_else(|| ParamsError {
        workload: name.to_string(),
        msg: format!("unknown workload (valid: {})", names().join(", ")),
    })?;
    Params::parse(name, w.params(), params).map(|_| ())
}

/// Generates workload `name` with `params` given as strings.
pub fn generate(name: &str, params: &BTreeMap<String, String>) -> Result<Generated, ParamsError> {
    check_params(name, params)?;
    let w = find(name).expect("checked");
    Ok(w.generate(&Params::parse(name, w.params(), params)?))
}
