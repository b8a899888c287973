//! Crossdock's decision policies, written as pure code: inputs in, decision out.
//!
//! Nothing in this crate performs I/O, reads a clock or spawns a task, so every policy
//! can be unit-tested against its paper's own examples and driven at cluster scale by
//! `crossdock sim`. The service (coordinator, workers) and the clients call into it.

pub mod load_aware;
