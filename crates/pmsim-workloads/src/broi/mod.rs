//! The BROI seed's Table IV microbenchmarks (Hu et al., HPCA'19): `hash`, `rbtree`, `sps`,
//! `btree`, `ssca2` — persistent updates through five data structures, each operation an
//! undo-logged transaction (log record, barrier, data store; commit barrier, log truncation).
//!
//! Why a module of their own: the seed evaluates the memory bus under *independent* threads
//! (its §IV-C: "most threads are independent from each other"), so each thread updates its own
//! instance of the structure in its own PM region ([`common`]); the footprint parameter scales
//! the region (the seed's 256 MB / 1 GB / 16 MB divided by 64 by default). `remote_gap` adds the
//! hybrid mode's remote-style stream: one more thread writing sequential barrier regions.

pub mod btree;
pub mod common;
pub mod hash;
pub mod rbtree;
pub mod sps;
pub mod ssca2;

use crate::Workload;

pub static WORKLOADS: &[&dyn Workload] = &[&hash::HASH, &rbtree::RBTREE, &sps::SPS, &btree::BTREE, &ssca2::SSCA2];
