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
    // A split that cannot be made is refused without waiting for the layout (which
    // would hold the shuffle's commits up every time a worker asks again).
    plan(coord, app_id, shuffle_id, &shuffle, slot, None)?;
    // One layout change at a time; commits of the shuffle wait the few milliseconds.
    let _layout = shuffle.layout_guard().await;
    if let Some(answer) = existing(coord, &shuffle, slot)? {
        return Ok(answer);
    }
    let (new, addr) = make(coord, app_id, shuffle_id, &shuffle, slot, None).await?;
    Ok(Message::PartitionSplit { slot: new, addr })
}

/// Continues the partition of `slot` on the worker `target` (a re-placement decided by
/// the coordinator, `coordinator::rebalance`): a split of the chain's last slot, made as
/// any split, then the worker holding that slot is told, so that it redirects the next
/// pushes. Returns the new slot; `None` when, under the shuffle's layout guard, every map
/// has committed (nothing more would land there) or the chain's last slot is on the
/// target's host already (a worker's own split or a relocation put it there). The caller
/// holds no guard of the shuffle.
pub async fn split_to(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    shuffle: &Arc<ShuffleEntry>,
    slot: u32,
    target: u32,
) -> Result<Option<u32>, ServiceError> {
    let layout = shuffle.layout_guard().await;
    // A worker's own split may have come first: continue the chain's end.
    let tail = {
        let st = coord.lock();
        let p = shuffle.lock();
        let tail = p.chain_tail(slot);
        let host = |w: u32| st.worker(w).map(|e| e.labels.host.clone());
        if p.committed() >= shuffle.num_maps || host(p.copies(tail).0) == host(target) {
            return Ok(None);
        }
        tail
    };
    let (new, _) = make(coord, app_id, shuffle_id, shuffle, tail, Some(target)).await?;
    let tell: Vec<(String, Message)> = {
        let st = coord.lock();
        let p = shuffle.lock();
        let holder = p.copies(tail).0;
        let prepare =
            st.placer()
                .prepare_message(app_id, shuffle_id, shuffle, &p, holder, vec![tail]);
        vec![(st.addr_of(holder), prepare)]
    };
    // The shuffle's commits need not wait for the holder's answer.
    drop(layout);
    // Not telling it is no harm: the holder keeps taking the partition, which stays exact.
    if let Some(Err(e)) = call_all(coord, &tell).await.into_iter().next() {
        tracing::warn!(app = %app_id, shuffle_id, slot = tail, error = %e, "could not tell a slot's worker of its split");
    }
    Ok(Some(new))
}

/// Makes the split continuing `slot` (on `target` when given, else where
/// [`Placer::split_target`](super::state::Placer) puts it) under the caller's layout guard:
/// prepared on its workers, added to the layout, journaled. Returns its slot and its
/// primary's address.
async fn make(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    shuffle: &Arc<ShuffleEntry>,
    slot: u32,
    target: Option<u32>,
) -> Result<(u32, String), ServiceError> {
    let planned = plan(coord, app_id, shuffle_id, shuffle, slot, target)?;
    // Nobody learns of the split before its workers hold it and the journal has it.
    if let Some(err) = prepare_split(coord, &planned.calls, planned.slot).await {
        tracing::warn!(app = %app_id, shuffle_id, slot, error = %err, "could not prepare a split");
        return Err(err);
    }
    let (new, primary, replica) = (planned.slot, planned.primary, planned.replica);
    change_layout(coord, app_id, shuffle_id, shuffle, |p| {
        let added = p.add_split(slot, primary, replica);
        assert_eq!(added, new, "only the holder of the layout guard adds slots");
    });
    let logged = coord
        .log(&[Record::Split {
            app_id: app_id.to_string(),
            shuffle_id,
            slot: new,
            from: slot,
            primary,
            replica,
        }])
        .await;
    if let Err(e) = logged {
        change_layout(coord, app_id, shuffle_id, shuffle, |p| p.drop_last_split());
        return Err(e);
    }
    CoordinatorMetrics::add(&coord.metrics.splits, 1);
    let addr = coord.lock().addr_of(primary);
    let partition = planned.partition;
    let chosen = target.is_some();
    tracing::info!(app = %app_id, shuffle_id, partition, from = slot, split = new, worker = %addr, chosen, "partition split");
    Ok((new, addr))
}

/// A split as planned, not yet made.
struct Planned {
    /// Its slot number: the shuffle's next.
    slot: u32,
    primary: u32,
    replica: u32,
    /// The partition it belongs to.
    partition: u32,
    /// Per worker of it: (address, `PrepareShuffle`, `CheckCopies`).
    calls: Vec<(String, Message, Message)>,
}

/// Where the split continuing `slot` would go, and the calls that make it there; or why
/// there can be none.
fn plan(
    coord: &Coordinator,
    app_id: &str,
    shuffle_id: u32,
    shuffle: &ShuffleEntry,
    slot: u32,
    target: Option<u32>,
) -> Result<Planned, StateError> {
    let st = coord.lock();
    let mut p = shuffle.lock();
    if p.slots() >= slot_limit(shuffle.num_partitions) {
        return Err(StateError::SplitLimit {
            shuffle: shuffle_id,
            max: MAX_SPLITS,
        });
    }
    let partition = p.partition_of(slot);
    let placer = st.placer();
    let (primary, replica) = match target {
        Some(t) => placer.split_on(&p, slot, t),
        None => placer.split_target(&p, slot),
    }
    .ok_or(StateError::NoSplitTarget { partition })?;
    // The messages are those of the layout with the split; it is taken back at once,
    // under the same lock, so nobody sees it.
    let new = p.add_split(slot, primary, replica);
    // Each worker of the split creates it, then takes the commits as they stand (a worker
    // new to the shuffle knows none) and confirms it holds the split whole: none of the
    // committed maps wrote into it. Until then it would hold its reads back as it does a
    // copy moved from a lost worker.
    let check = p.copy_check(app_id, shuffle_id, vec![new], false);
    let calls = [primary, replica]
        .into_iter()
        .filter(|&w| w != NO_WORKER)
        .map(|w| {
            let prepare =
                st.placer()
                    .prepare_message(app_id, shuffle_id, shuffle, &p, w, vec![new]);
            (st.addr_of(w), prepare, check.clone())
        })
        .collect();
    p.drop_last_split();
    Ok(Planned {
        slot: new,
        primary,
        replica,
        partition,
        calls,
    })
}

/// Applies `change` to the shuffle's layout and keeps the tally of copies per worker.
fn change_layout(
    coord: &Coordinator,
    app_id: &str,
    shuffle_id: u32,
    shuffle: &ShuffleEntry,
    change: impl FnOnce(&mut crate::coordinator::state::Progress),
) {
    let st = coord.lock();
    let mut p = shuffle.lock();
    let before = p.copies_per_worker();
    change(&mut p);
    st.layout_changed(app_id, shuffle_id, shuffle, &before, &p.copies_per_worker());
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
