//! A shuffle re-placed once its partition sizes are predicted (SCache's placement on
//! predicted sizes, paper 003; issue 13).
//!
//! The coordinator places a shuffle when it registers, before any size is known, in
//! contiguous blocks sized by the app's history. When the first maps' commits predict the
//! sizes (`state/prediction.rs`), [`after_prediction`] asks the pure policy
//! ([`crossdock_policy::rebalance`], through `State::rebalance_moves`) which partitions
//! should continue on another host for the hosts' predicted loads to stay within 10% of
//! SCache's MinHeap, and continues each there as a split the coordinator chooses
//! ([`split::split_to`]; a decision that meets copies on a lost worker waits for their
//! relocation, after which `recovery` asks again): the bytes of the remaining maps land on
//! the new host, the bytes already pushed stay where they are and are read from there (the
//! reader reads every slot). A Spark driver that asks for the placement after the map
//! stage sees the partition's new host as the one holding most of it, and runs the reduce
//! task there.
//!
//! Shuffles sharing a layout (a join's sides) are decided together, their sizes summed,
//! and a partition moves in each of them to the same worker (`state/rebalance.rs`).
//!
//! Moves are soft: a failed one leaves the partition where it is, which stays exact.

use std::sync::Arc;

use super::metrics::CoordinatorMetrics;
use super::node::Coordinator;
use super::split;
use super::state::rebalance::REBALANCE_TOLERANCE;

/// Re-places the shuffle, with those sharing its layout once each has its prediction, in
/// the background, if the coordinator does (`--rebalance`). Called by the commit that made
/// the shuffle's prediction, under that commit's guard (the moves take the shuffle's
/// layout guard, so they must not be awaited there), and again once the shuffles on a lost
/// worker were relocated (`recovery`: a decision that met the lost worker's copies waited
/// for that). A group already decided is not decided again.
pub fn after_prediction(coord: &Arc<Coordinator>, app_id: &str, shuffle_id: u32) {
    if !coord.cfg.rebalance {
        return;
    }
    let (coord, app_id) = (coord.clone(), app_id.to_string());
    tokio::spawn(async move { run(&coord, &app_id, shuffle_id).await });
}

async fn run(coord: &Arc<Coordinator>, app_id: &str, shuffle_id: u32) {
    let decided = coord
        .lock()
        .rebalance_moves(app_id, shuffle_id, REBALANCE_TOLERANCE);
    let Some(decided) = decided else {
        return;
    };
    let ids: Vec<u32> = decided.shuffles.iter().map(|(id, _)| *id).collect();
    for m in decided.moves {
        // A shuffle that registered since took this layout (a join's other side), or a
        // side went away: the rest of the moves would part the sides, so none is made.
        if coord.lock().layout_group(app_id, shuffle_id).as_ref() != Some(&ids) {
            tracing::info!(app = %app_id, shuffle_id, shuffles = ?ids, "layout changed; re-placement stopped");
            break;
        }
        let mut moved = false;
        let mut failed = false;
        for (id, shuffle) in &decided.shuffles {
            match split::split_to(coord, app_id, *id, shuffle, m.partition, m.target).await {
                // Every map committed meanwhile, or the partition already continues there.
                Ok(None) => {}
                Ok(Some(slot)) => {
                    moved = true;
                    tracing::info!(app = %app_id, shuffle_id = *id, partition = m.partition, slot, worker = m.target, predicted_bytes = m.bytes, "partition continued on another host");
                }
                Err(e) => {
                    failed = true;
                    tracing::warn!(app = %app_id, shuffle_id = *id, partition = m.partition, error = %e, "could not continue a partition on another host");
                    // The sides not moved yet stay with the others that did not move.
                    break;
                }
            }
        }
        if moved {
            CoordinatorMetrics::add(&coord.metrics.rebalanced_partitions, 1);
            CoordinatorMetrics::add(&coord.metrics.rebalanced_bytes, m.bytes);
        }
        if failed && decided.shuffles.len() > 1 {
            // A side may now continue the partition elsewhere than another: no more moves,
            // so that at most this partition's sides are parted (its reduce task reads the
            // parted side across hosts; the data stays exact).
            tracing::warn!(app = %app_id, shuffle_id, partition = m.partition, shuffles = ?ids, "a join side's move failed; re-placement stopped");
            break;
        }
    }
}
