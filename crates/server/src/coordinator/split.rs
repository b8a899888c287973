//! A hot partition continued on another worker.
//!
//! A worker that holds enough of a partition (or of one of its splits), or whose memory a
//! hot partition crowds, asks for a split (`SplitPartition`, decided by
//! `crossdock_policy::split`). The split is a new slot of the shuffle, numbered after its
//! partitions, placed on the peer with the most free memory that holds none of the
//! partition yet, replicated like a partition, prepared on its workers and journaled
//! before the answer. The asking worker then redirects the partition's pushers there in
//! its push answers; the coordinator is asked once per split, not per batch. Commits,
//! relocation, restarts and reads treat a split as a partition: they go by slot.

use std::sync::Arc;

use crossdock_proto::{slot_limit, Message, MAX_SPLITS, NO_WORKER};

use super::calls::call_all;
use super::error::ServiceError;
use super::journal::Record;
use super::metrics::CoordinatorMetrics;
use super::node::Coordinator;
use super::state::{ShuffleEntry, StateError};

/// Answers the split that continues `slot` of a shuffle, making it first if there is
/// none. Asking again (another pusher's batch, a worker that restarted) answers the same
/// split.
pub async fn split_partition(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    slot: u32,
) -> Result<Message, ServiceError> {
    let shuffle = coord.lock().shuffle(app_id, shuffle_id)?;
    if let Some(answer) = existing(coord, &shuffle, slot)? {
        return Ok(answer);
    }
    // One layout change at a time; commits of the shuffle wait the few milliseconds.
    let _layout = shuffle.layout_guard().await;
    if let Some(answer) = existing(coord, &shuffle, slot)? {
        return Ok(answer);
    }
    let (new, primary, replica, calls, partition) = {
        let st = coord.lock();
        let mut p = shuffle.lock();
        if p.slots() >= slot_limit(shuffle.num_partitions) {
            return Err(StateError::SplitLimit {
                shuffle: shuffle_id,
                max: MAX_SPLITS,
            }
            .into());
        }
        let partition = p.partition_of(slot);
        let (primary, replica) = st
            .placer()
            .split_target(&p, slot)
            .ok_or(StateError::NoSplitTarget { partition })?;
        let before = p.copies_per_worker();
        let new = p.add_split(slot, primary, replica);
        st.layout_changed(
            app_id,
            shuffle_id,
            &shuffle,
            &before,
            &p.copies_per_worker(),
        );
        // Each worker of the split creates it, then takes the commits as they stand (a
        // worker new to the shuffle knows none) and confirms it holds the split whole: none
        // of the committed maps wrote into it. Until then it would hold its reads back as
        // it does a copy moved from a lost worker.
        let check = p.copy_check(app_id, shuffle_id, vec![new], false);
        let calls: Vec<(String, Message, Message)> = [primary, replica]
            .into_iter()
            .filter(|&w| w != NO_WORKER)
            .map(|w| {
                let prepare =
                    st.placer()
                        .prepare_message(app_id, shuffle_id, &shuffle, &p, w, vec![new]);
                (st.addr_of(w), prepare, check.clone())
            })
            .collect();
        (new, primary, replica, calls, partition)
    };
    if let Some(err) = prepare_split(coord, &calls, new).await {
        let st = coord.lock();
        let mut p = shuffle.lock();
        let before = p.copies_per_worker();
        p.drop_last_split();
        st.layout_changed(
            app_id,
            shuffle_id,
            &shuffle,
            &before,
            &p.copies_per_worker(),
        );
        tracing::warn!(app = %app_id, shuffle_id, slot, error = %err, "could not prepare a split");
        return Err(err);
    }
    coord.log(&[Record::Split {
        app_id: app_id.to_string(),
        shuffle_id,
        from: slot,
        primary,
        replica,
    }])?;
    CoordinatorMetrics::add(&coord.metrics.splits, 1);
    let addr = coord.lock().addr_of(primary);
    tracing::info!(app = %app_id, shuffle_id, partition, from = slot, split = new, worker = %addr, "partition split");
    Ok(Message::PartitionSplit { slot: new, addr })
}

/// Prepares a new split on its workers and has each confirm it holds it whole; the first
/// failure, if any.
async fn prepare_split(
    coord: &Arc<Coordinator>,
    calls: &[(String, Message, Message)],
    slot: u32,
) -> Option<ServiceError> {
    let prepares: Vec<(String, Message)> = calls
        .iter()
        .map(|(a, p, _)| (a.clone(), p.clone()))
        .collect();
    if let Some(err) = call_all(coord, &prepares)
        .await
        .into_iter()
        .find_map(|r| r.err())
    {
        return Some(err);
    }
    let checks: Vec<(String, Message)> = calls
        .iter()
        .map(|(a, _, c)| (a.clone(), c.clone()))
        .collect();
    for (res, (addr, _)) in call_all(coord, &checks).await.into_iter().zip(&checks) {
        match res {
            Ok(Message::CopiesHeld { partitions }) if partitions.contains(&slot) => {}
            Ok(other) => {
                let e = crossdock_client::ClientError::unexpected(addr, other);
                return Some(ServiceError::worker(addr, e));
            }
            Err(e) => return Some(e),
        }
    }
    None
}

/// The split continuing `slot`, if there is one.
fn existing(
    coord: &Coordinator,
    shuffle: &ShuffleEntry,
    slot: u32,
) -> Result<Option<Message>, StateError> {
    let st = coord.lock();
    let p = shuffle.lock();
    if slot >= p.slots() {
        return Err(StateError::PartitionOutOfRange {
            partition: slot,
            partitions: p.slots(),
        });
    }
    Ok(p.split_of(slot).map(|s| Message::PartitionSplit {
        slot: s,
        addr: st.addr_of(p.copies(s).0),
    }))
}
