//! The memory hierarchy below the cores: caches, the coherence directory, memory controllers,
//! and the NVM and coherent-memory contents.

pub mod banked;
pub mod cache;
pub mod coherence;
pub mod hierarchy;
pub mod mc;
pub mod nvm;
