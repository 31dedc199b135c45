//! (workloads of this family are registered here)
use crate::Workload;

pub static WORKLOADS: &[&dyn Workload] = &[];
