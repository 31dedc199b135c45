//! Concurrent persistent-memory indexes of the ASAP paper's Table III (CCEH, FAST_FAIR, Dash,
//! RECIPE), reimplemented from their published algorithms to reproduce each one's persist pattern.
use crate::Workload;

pub(crate) mod common;
pub mod keys;

mod cceh;
mod clht;
mod dash;
mod dash_eh;
mod dash_lh;
mod fastfair;
mod masstree;
mod part;

pub static WORKLOADS: &[&dyn Workload] = &[
    &cceh::CCEH,
    &fastfair::FAST_FAIR,
    &dash_eh::DASH_EH,
    &dash_lh::DASH_LH,
    &part::P_ART,
    &clht::P_CLHT,
    &masstree::P_MASSTREE,
];
