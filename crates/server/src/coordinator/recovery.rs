//! Losing copies: a worker lost or restarted, or one copy found corrupt or missing. The state
//! decides where partitions go ([`State::relocate`](super::state::State::relocate)); this module tells the workers,
//! has partitions that lost every copy adopted from the object store where it can, and
//! revokes the maps whose output is gone everywhere else.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crossdock_client::{ClientError, RpcConnection};
use crossdock_proto::{AttemptId, Message, PartitionBytes, NO_WORKER};

use super::calls::{call_all, notify_commit};
use super::error::ServiceError;
use super::journal::Record;
use super::metrics::CoordinatorMetrics;
use super::node::Coordinator;
use super::rebalance;
use super::state::{Relocation, ShuffleEntry, StateError};

/// Moves every shuffle off a worker just marked lost (see [`State::relocate`](super::state::State::relocate)) and
/// tells the workers: the new copies are prepared, forwarding to the lost replica
/// stops, and the commits of maps whose only copy was lost are revoked everywhere so
/// that a rerun of them is accepted.
pub async fn handle_loss(coord: &Arc<Coordinator>, lost: u32) {
    relocate_all(coord, lost, None).await
}

/// A worker found its copy of one partition corrupt or missing (a read of committed data
/// failed: `ReportLostCopy`): that copy is handled as lost (the
/// replica takes over, or the partition moves and the maps that wrote into it are
/// revoked), the rest of the worker is fine.
pub async fn handle_lost_copy(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    partition: u32,
    worker_addr: &str,
) -> Result<(), ServiceError> {
    let (s, worker) = {
        let st = coord.lock();
        let s = st.shuffle(app_id, shuffle_id)?;
        let worker = st
            .worker_by_addr(worker_addr)
            .ok_or_else(|| StateError::NoWorkerAt {
                addr: worker_addr.to_string(),
            })?;
        (s, worker)
    };
    let _serial = s.layout_guard().await;
    if !s.lock().holds(partition, worker) {
        return Ok(()); // already moved
    }
    let r = coord
        .lock()
        .relocate_one(app_id, shuffle_id, &s, worker, partition);
    let revoked = apply_relocation(coord, app_id, shuffle_id, &s, r).await;
    tracing::warn!(app = %app_id, shuffle_id, partition, worker, revoked_maps = revoked, "a copy its worker could not read no longer counts");
    Ok(())
}

/// A worker restarted (new incarnation) before anyone declared it lost: it recovered
/// its partition files, so it is asked which copies it still holds whole (committed
/// bytes all there); those stay where they are, the rest is handled as lost.
pub async fn handle_restart(coord: &Arc<Coordinator>, worker: u32, addr: &str) {
    relocate_all(coord, worker, Some(addr)).await
}

async fn relocate_all(coord: &Arc<Coordinator>, lost: u32, restarted_at: Option<&str>) {
    let shuffles = coord.lock().shuffles_on(lost);
    let mut predicted = Vec::new();
    for (app_id, shuffle_id, s) in shuffles {
        let _serial = s.layout_guard().await;
        let mut keep = BTreeSet::new();
        if let Some(addr) = restarted_at {
            let check = {
                let p = s.lock();
                p.copy_check(&app_id, shuffle_id, p.copies_of(lost), false)
            };
            match coord.call_worker(addr, &check).await {
                Ok(Message::CopiesHeld { partitions }) => keep.extend(partitions),
                Ok(other) => tracing::warn!(reply = ?other, "unexpected answer to CheckCopies"),
                Err(e) => {
                    tracing::warn!(error = %e, %addr, "a restarted worker could not be asked what it holds")
                }
            }
            tracing::info!(app = %app_id, shuffle_id, worker = lost, kept = keep.len(), "a restarted worker still holds these copies whole");
        }
        let r = coord.lock().relocate(&app_id, shuffle_id, &s, lost, &keep);
        let (lost_partitions, kept_by_replica) = (r.lost.len(), r.degraded_partitions);
        let revoked = apply_relocation(coord, &app_id, shuffle_id, &s, r).await;
        tracing::warn!(app = %app_id, shuffle_id, worker = lost, lost_partitions, kept_by_replica, revoked_maps = revoked, "moved a shuffle off a lost worker");
        if s.prediction().is_some() {
            predicted.push((app_id, shuffle_id));
        }
    }
    // A re-placement that met copies on the lost worker waited, undecided, for this
    // relocation (`state::rebalance::moves`); nothing else would ask again for a shuffle
    // already predicted. Asked once every shuffle is relocated: a join's sides are decided
    // together, and deciding while a partner's revoked bytes still counted would misjudge
    // them. (A group is decided once; the other sides' asks find it so.)
    for (app_id, shuffle_id) in predicted {
        rebalance::after_prediction(coord, &app_id, shuffle_id);
    }
}

/// Tells the workers of a relocation: new copies prepared, forwarding to lost replicas
/// stopped. Partitions that lost every copy are adopted from the object store by their
/// new workers where it holds them whole; the maps that wrote into the others are
/// revoked everywhere. Journals the outcome. The caller holds the layout guard. Returns
/// the number of maps revoked.
async fn apply_relocation(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    s: &ShuffleEntry,
    r: Relocation,
) -> usize {
    for res in call_all(coord, &r.prepares).await {
        if let Err(e) = res {
            tracing::warn!(error = %e, app = %app_id, shuffle_id, "could not prepare a moved partition");
        }
    }
    let adopted = adopt_lost(coord, app_id, shuffle_id, s, &r.lost).await;
    let revoked = {
        let mut p = s.lock();
        let not_adopted = r.lost.difference(&adopted).copied().collect();
        p.revoke_maps_touching(&not_adopted)
    };
    let (primary, replica) = s.lock().layout();
    let layout = Record::Layout {
        app_id: app_id.to_string(),
        shuffle_id,
        primary,
        replica,
    };
    let revoke = Record::Revoke {
        app_id: app_id.to_string(),
        shuffle_id,
        maps: revoked.clone(),
    };
    let _ = coord.log(&[layout, revoke]).await;
    let m = &coord.metrics;
    CoordinatorMetrics::add(&m.lost_partitions, r.lost.len() as u64);
    CoordinatorMetrics::add(&m.adopted_partitions, adopted.len() as u64);
    CoordinatorMetrics::add(&m.revoked_maps, revoked.len() as u64);
    let per_worker: Vec<(String, Vec<PartitionBytes>)> =
        r.holders.iter().map(|a| (a.clone(), Vec::new())).collect();
    for &map in &revoked {
        notify_commit(coord, app_id, shuffle_id, map, AttemptId::NONE, &per_worker).await;
    }
    release_restored(coord, app_id, shuffle_id, s, &r.lost).await;
    revoked.len()
}

/// The new copies of partitions that lost every copy are not served until checked
/// against the commits as they now stand (adopted, or their maps revoked): this check
/// lets them be read.
async fn release_restored(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    s: &ShuffleEntry,
    lost: &BTreeSet<u32>,
) {
    for (_, addr, msg) in copy_checks(coord, app_id, shuffle_id, s, lost, false) {
        let Message::CheckCopies { partitions, .. } = &msg else {
            unreachable!("built above")
        };
        let want = partitions.len();
        match coord.call_worker(&addr, &msg).await {
            Ok(Message::CopiesHeld { partitions }) if partitions.len() == want => {}
            Ok(other) => {
                tracing::error!(reply = ?other, %addr, app = %app_id, shuffle_id, "a moved partition does not match the commits; it is not served")
            }
            Err(e) => {
                tracing::error!(error = %e, %addr, app = %app_id, shuffle_id, "could not release a moved partition; it is not served")
            }
        }
    }
}

/// A `CheckCopies` (with `adopt` or not) for every live worker holding a copy of one of
/// `partitions`, over those it holds, against the commits as they stand: (worker id,
/// address, request).
fn copy_checks(
    coord: &Coordinator,
    app_id: &str,
    shuffle_id: u32,
    s: &ShuffleEntry,
    partitions: &BTreeSet<u32>,
    adopt: bool,
) -> Vec<(u32, String, Message)> {
    let st = coord.lock();
    let p = s.lock();
    let mut on: BTreeMap<u32, Vec<u32>> = Default::default();
    for &q in partitions {
        let (primary, replica) = p.copies(q);
        for w in [primary, replica] {
            if w != NO_WORKER && st.is_alive(w) {
                on.entry(w).or_default().push(q);
            }
        }
    }
    on.into_iter()
        .map(|(w, parts)| {
            let msg = p.copy_check(app_id, shuffle_id, parts, adopt);
            (w, st.addr_of(w), msg)
        })
        .collect()
}

/// How long a worker may take to adopt partitions from the object store.
const ADOPT_TIMEOUT: Duration = Duration::from_secs(600);

/// Asks the new workers of partitions that lost every copy to restore them from the
/// object store. Returns the partitions whose new primary now holds them whole. A
/// replica that could not adopt one is dropped (the partition runs on its primary
/// alone); a worker without an object store adopts nothing.
async fn adopt_lost(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    s: &ShuffleEntry,
    lost: &BTreeSet<u32>,
) -> std::collections::BTreeSet<u32> {
    if lost.is_empty() {
        return BTreeSet::new();
    }
    let calls = copy_checks(coord, app_id, shuffle_id, s, lost, true);
    // Each on a connection of its own: an adoption may take minutes, longer than the
    // shared connection's call timeout.
    let answers = futures_util::future::join_all(calls.iter().map(|(_, addr, msg)| async move {
        let call = async {
            let conn = RpcConnection::connect(addr, coord.keyring()).await?;
            conn.call(msg).await
        };
        tokio::time::timeout(ADOPT_TIMEOUT, call)
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Io {
                    addr: addr.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "no answer to an adoption within {} s",
                            ADOPT_TIMEOUT.as_secs()
                        ),
                    ),
                })
            })
    }))
    .await;
    let mut held: BTreeSet<(u32, u32)> = BTreeSet::new();
    for ((w, addr, _), answer) in calls.iter().zip(answers) {
        match answer {
            Ok(Message::CopiesHeld { partitions }) => {
                held.extend(partitions.into_iter().map(|q| (*w, q)))
            }
            Ok(other) => tracing::warn!(reply = ?other, %addr, "unexpected answer to an adoption"),
            Err(e) => tracing::warn!(error = %e, %addr, "a worker could not adopt partitions"),
        }
    }
    let mut adopted = BTreeSet::new();
    let mut drop_replica = Vec::new();
    {
        let st = coord.lock();
        let mut p = s.lock();
        let before = p.copies_per_worker();
        for &q in lost {
            let (primary, replica) = p.copies(q);
            if !held.contains(&(primary, q)) {
                continue;
            }
            adopted.insert(q);
            if replica != NO_WORKER && !held.contains(&(replica, q)) {
                p.drop_replica(q);
                drop_replica.push(q);
            }
        }
        st.layout_changed(app_id, shuffle_id, s, &before, &p.copies_per_worker());
    }
    if !drop_replica.is_empty() {
        // The primaries of those partitions stop forwarding to the replica.
        let prepares: Vec<(String, Message)> = {
            let st = coord.lock();
            let p = s.lock();
            let mut by_primary: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for &q in &drop_replica {
                by_primary.entry(p.copies(q).0).or_default().push(q);
            }
            by_primary
                .into_iter()
                .map(|(w, parts)| {
                    (
                        st.addr_of(w),
                        st.placer()
                            .prepare_message(app_id, shuffle_id, s, &p, w, parts),
                    )
                })
                .collect()
        };
        for (addr, msg) in prepares {
            if let Err(e) = coord.call_worker(&addr, &msg).await {
                tracing::warn!(error = %e, %addr, "could not stop forwarding to a replica that did not adopt");
            }
        }
    }
    if !adopted.is_empty() {
        tracing::info!(app = %app_id, shuffle_id, adopted = adopted.len(), lost = lost.len(), "partitions adopted from the object store; their maps stand");
    }
    adopted
}

/// A client or worker could not reach `addr`. The coordinator asks the worker itself,
/// and handles it as lost at once if it does not answer, instead of waiting for the
/// heartbeat deadline while tasks fail against it.
pub async fn check_reported_worker(coord: &Arc<Coordinator>, addr: &str) {
    let Some(id) = coord.lock().worker_by_addr(addr) else {
        return;
    };
    if !coord.lock().is_alive(id) {
        return;
    }
    let probe = async {
        let c = RpcConnection::connect(addr, coord.keyring()).await?;
        c.call(&Message::GetWorkerStats).await
    };
    let answered = matches!(
        tokio::time::timeout(Duration::from_secs(3), probe).await,
        Ok(Ok(_))
    );
    if answered {
        tracing::info!(worker = id, %addr, "a reported worker answers; it stays");
        return;
    }
    if coord.lock().mark_lost(id) {
        tracing::warn!(worker = id, %addr, "a reported worker does not answer; marked lost");
        handle_loss(coord, id).await;
    }
}
