//! WHISPER-like workloads (ASAP Table III): N-Store and Echo (native PM code) and the
//! PMDK-transaction applications Vacation and Memcached, reimplemented as generators that
//! reproduce their persist patterns. The undo log they share with Atlas is
//! [`crate::atlas::undo_log`]; [`common`] holds the value tagging and history checks.
use crate::Workload;

pub mod common;
pub mod echo;
pub mod memcached;
pub mod nstore;
pub mod vacation;

pub static WORKLOADS: &[&dyn Workload] = &[&nstore::NSTORE, &echo::ECHO, &vacation::VACATION, &memcached::MEMCACHED];
