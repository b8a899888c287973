//! A push's answer when its partition is hot: `Ok`, or where the partition goes on.
//!
//! After each stored batch the worker asks the pure policy
//! (`crossdock_policy::split::split_due`) whether the slot should continue elsewhere: it
//! reached the split size, or the worker's memory is nearly spent and this slot holds a
//! large share of it (SMS's delegation to a peer with room). If so it asks the
//! coordinator once, in the background, and keeps taking the partition meanwhile; once
//! answered, every push of the slot is answered `PushRedirect` so the pushers send their
//! next batches to the split. Batches already on their way are still taken (a soft
//! split): the commit counts each map's bytes where they landed.

use std::sync::Arc;
use std::time::Instant;

use crossdock_policy::split::{pressed, split_due, SplitCheck};
use crossdock_proto::{Message, PushHeader};

use super::node::Worker;
use super::storage::partition::Partition;

/// The answer to a push of `header` stored in `part`, whose slot holds `taken` bytes
/// here. `primary`: the push came from a map, not forwarded by another worker (only the
/// primary splits).
pub fn answer(
    worker: &Arc<Worker>,
    header: &PushHeader,
    part: &Arc<Partition>,
    taken: u64,
    primary: bool,
) -> Message {
    // A slot split at this worker's ask, or one the coordinator said is split (its own
    // re-placement, a relocated split, a promoted replica), even with this worker's own
    // splits off; an atomic flag, no lock, for a slot never split.
    if let Some((slot, addr)) = part.split.continues() {
        return Message::PushRedirect {
            slot,
            addr: addr.to_string(),
        };
    }
    if worker.split_bytes == 0 {
        return Message::Ok;
    }
    if primary {
        let budget = &worker.store.budget;
        let (used, total) = (budget.used(), budget.total());
        let memory_only = worker.store.memory_only();
        // The slot's memory only matters (and its lock is only taken) when memory is short.
        let slot_memory = if pressed(used, total, memory_only) {
            part.state.lock().expect("partition lock").mem_bytes
        } else {
            0
        };
        let check = SplitCheck {
            slot_bytes: taken,
            slot_memory,
            split_bytes: worker.split_bytes,
            worker_used: used,
            worker_budget: total,
            memory_only,
        };
        if let Some(reason) = split_due(&check) {
            if part.split.begin(Instant::now()) {
                ask(worker, header, part, reason);
            }
        }
    }
    Message::Ok
}

/// Asks the coordinator for the split in the background and records its answer.
fn ask(
    worker: &Arc<Worker>,
    header: &PushHeader,
    part: &Arc<Partition>,
    reason: crossdock_policy::split::SplitReason,
) {
    let (worker, part) = (worker.clone(), part.clone());
    let (app, shuffle, slot) = (header.app_id.clone(), header.shuffle_id, part.id);
    tokio::spawn(async move {
        let res = worker.links.ask_split(&app, shuffle, slot).await;
        match &res {
            Ok((split, addr)) => {
                tracing::info!(app = %app, shuffle, slot, split, to = %addr, ?reason, "partition continues on another worker");
            }
            Err(e) => {
                tracing::warn!(app = %app, shuffle, slot, ?reason, error = %e, "no split: the partition stays whole here for now");
            }
        }
        part.split.settle(res.ok(), Instant::now());
    });
}
