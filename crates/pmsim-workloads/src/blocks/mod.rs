//! Building blocks: the persistence idioms several workloads share, each in one place, so a
//! workload file holds its data structure's logic and nothing else.
//!
//! - [`undo_tx`]: a persistent transaction with undo logging as a workload drives it (per-thread
//!   logs, the per-word history recovery checks against, commit-and-record, the recovery prelude
//!   that rolls the logs back). Used by the Atlas structures, the WHISPER PMDK/N-Store
//!   applications and BROI's Table IV structures.
//! - [`node`]: a persistent tree node with shifts and splits (a node image of 8-byte fields,
//!   routing, the "new node, ofence, link, ofence" publication and root growth). Used by
//!   FAST_FAIR, P-Masstree and P-ART.
//! - [`segment`]: a hashed segment with buckets and a directory (the extendible-hashing
//!   directory's recovery walk). Used by CCEH and Dash-EH.
//! - [`requests`]: a request loop over a key distribution (pick the operation by its share,
//!   draw the key, begin and charge the request's work). Used by memcached, vacation, N-Store,
//!   the Atlas structures and the BROI driver.

pub mod node;
pub mod requests;
pub mod segment;
pub mod undo_tx;
