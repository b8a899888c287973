//! Crossdock's decision policies, written as pure code: inputs in, decision out.
//!
//! Nothing in this crate performs I/O, reads a clock or spawns a task, so every policy
//! can be unit-tested against its paper's own examples and driven at cluster scale by
//! `crossdock sim`. The service (coordinator, workers) and the clients call into it.
//! Randomized policies take the random source as an argument (`rand_below(n)`, uniform in
//! `0..n`), so callers keep them deterministic.
//!
//! | module | paper |
//! |---|---|
//! | [`load_aware`] | coordinator's LPT placement (no paper) |
//! | [`replica`] | where a partition's replica goes: another zone, else another host (no paper) |
//! | [`adaptive_fetch`] | Nicolae et al., TPDS 2017, Sections 4-5 |
//! | [`size_prediction`] | Fu & Qi, SCache, Sections 3.2.2 and 4.1.1 |
//! | [`placement`] | SCache Algorithms 1-2; Wang 2014 dissertation Section 5.6.1 |
//! | [`rebalance`] | SCache's MinHeap as the bound for re-placing a placed shuffle with few moves (no paper) |
//! | [`skew`] | Daikoku et al., IEICE 2019, Sections 2-3 |
//! | [`split`] | when a hot partition splits and which peer takes the rest (SMS's delegation, Daikoku et al. Section 3.3; Celeborn's split) |
//! | [`fair_completion`] | Wang 2014 dissertation, Chapter 4 |
//! | [`congestion`] | Wang 2014 dissertation, Section 5.6.2 |

pub mod adaptive_fetch;
pub mod congestion;
pub mod fair_completion;
pub mod load_aware;
pub mod placement;
pub mod rebalance;
pub mod replica;
pub mod size_prediction;
pub mod skew;
pub mod split;
