//! Microbenchmarks that exercise the engine and the designs directly.

pub mod array;
pub mod bandwidth;
pub mod hotline;
