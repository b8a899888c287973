//! The coordinator's requests, one function each. Handlers change the state through
//! its methods, journal the change before they answer, and call workers through
//! [`calls`](super::calls).

use std::sync::Arc;

use bytes::Bytes;
use std::time::Instant;

use crossdock_proto::codec::Appended;
use crossdock_proto::{
    AttemptId, CommitStatus, InputSample, Message, PartitionBytes, PartitionStat, RunStart,
    SampleCount,
};

use super::calls::{call_all, delete_app_on, delete_shuffle_on, notify_commit};
use super::error::ServiceError;
use super::journal::Record;
use super::metrics::CoordinatorMetrics;
use super::node::Coordinator;
use super::state::{invalid_runs, sample_shares, Labels, Load, Rejoin, StateError};
use super::{prediction, rebalance, recovery, split};
use crate::app_limits::AppLimits;
use crate::auth::unauthorized;
use crate::error::{NotAccepted, ServerError};

/// Registers (or renews the registration of) an app and answers with its token. A
/// caller that is not `owner` (has not authenticated for the app) may only register
/// an app id nobody holds: checked under the state's lock, so of two clients racing
/// for a new id, one gets it and the other is refused.
pub async fn register_app(
    coord: &Arc<Coordinator>,
    app_id: &str,
    lease_ms: u32,
    limits: AppLimits,
    owner: bool,
) -> Result<Message, ServerError> {
    limits.check().map_err(|e| ServerError {
        code: crossdock_proto::ErrorCode::InvalidArgument,
        message: format!("app '{app_id}' asked for {e}"),
    })?;
    {
        let mut st = coord.lock();
        if !owner && st.has_app(app_id) {
            return Err(unauthorized(&format!(
                "app '{app_id}' is registered already; only a client holding its token may \
                 register it again"
            )));
        }
        st.register_app(app_id, lease_ms, Instant::now())?;
        st.set_app_limits(app_id, limits);
    }
    coord
        .log(&[Record::App {
            app_id: app_id.to_string(),
            lease_ms,
            stored_quota: Appended::of(limits.stored_quota),
            memory_share_ppm: Appended::of(limits.memory_share_ppm),
        }])
        .await?;
    let token = match &coord.cfg.secret {
        Some(secret) => secret.app_token(app_id),
        None => Bytes::new(),
    };
    Ok(Message::AppRegistered { token })
}

/// Handles one request.
pub async fn handle(coord: &Arc<Coordinator>, msg: Message) -> Result<Message, ServerError> {
    let now = Instant::now();
    match msg {
        Message::RegisterWorker {
            addr,
            memory_budget,
            incarnation,
            host,
            zone,
        } => {
            let labels = Labels::new(&addr, &host, &zone);
            let (worker_id, rejoin) = coord.lock().register_labelled_worker(
                &addr,
                labels.clone(),
                memory_budget,
                incarnation,
                now,
            );
            match rejoin {
                Rejoin::Restarted => {
                    // What it still holds is checked, the rest handled as lost, before
                    // it takes part in placement again.
                    tracing::warn!(worker_id, %addr, "worker restarted; checking which of its copies survived");
                    recovery::handle_restart(coord, worker_id, &addr).await;
                    coord.lock().register_labelled_worker(
                        &addr,
                        labels,
                        memory_budget,
                        incarnation,
                        now,
                    );
                }
                Rejoin::Revived => wipe_revived_worker(coord, worker_id),
                Rejoin::New | Rejoin::Reconnected => {}
            }
            coord
                .log(&[Record::Worker {
                    id: worker_id,
                    addr: addr.clone(),
                    incarnation,
                }])
                .await?;
            // The worker may have missed commits or revocations (or the coordinator may
            // have restarted): give it the coordinator's view of its shuffles.
            let c = coord.clone();
            tokio::spawn(async move { sync_worker(&c, worker_id).await });
            tracing::info!(worker_id, %addr, memory_budget, "worker registered");
            Ok(Message::WorkerRegistered {
                worker_id,
                heartbeat_ms: coord.cfg.heartbeat.as_millis() as u32,
            })
        }
        Message::Heartbeat {
            worker_id,
            buffered_bytes,
            stored_bytes,
            disk_full,
            pushed_bytes,
            fetched_bytes,
            object_bytes,
        } => {
            let load = Load {
                buffered: buffered_bytes,
                stored: stored_bytes,
                pushed: pushed_bytes.value(),
                fetched: fetched_bytes.value(),
                object: object_bytes.value(),
            };
            let revived = coord.lock().heartbeat(worker_id, load, disk_full, now)?;
            if revived {
                wipe_revived_worker(coord, worker_id);
            }
            Ok(Message::Ok)
        }
        Message::RegisterApp {
            app_id,
            lease_ms,
            stored_quota,
            memory_share_ppm,
        } => {
            let limits = AppLimits {
                stored_quota: stored_quota.value(),
                memory_share_ppm: memory_share_ppm.value(),
            };
            register_app(coord, &app_id, lease_ms, limits, true).await
        }
        Message::RenewLease { app_id } => {
            coord.lock().renew_lease(&app_id, now)?;
            Ok(Message::Ok)
        }
        Message::UnregisterApp { app_id } => {
            let (existed, workers) = {
                let mut st = coord.lock();
                (st.remove_app(&app_id), st.live_worker_addrs())
            };
            if existed {
                coord
                    .log(&[Record::AppGone {
                        app_id: app_id.clone(),
                    }])
                    .await?;
                delete_app_on(coord, &app_id, &workers, true).await;
            }
            Ok(Message::Ok)
        }
        Message::RegisterShuffle {
            app_id,
            shuffle_id,
            num_maps,
            num_partitions,
            sample_inputs,
            sample_counts,
        } => {
            let sample = (
                sample_inputs.0.as_deref().unwrap_or_default(),
                sample_counts.0.as_deref().unwrap_or_default(),
            );
            register_shuffle(coord, &app_id, shuffle_id, num_maps, num_partitions, sample).await
        }
        Message::CommitMap {
            app_id,
            shuffle_id,
            map_id,
            attempt_id,
            partitions,
            run_starts,
        } => {
            let started = std::time::Instant::now();
            let commit = Commit {
                map_id,
                attempt_id,
                stats: partitions,
                runs: run_starts.0.unwrap_or_default(),
            };
            let answer = commit_map(coord, &app_id, shuffle_id, commit).await;
            coord.metrics.commit_latency.observe(started.elapsed());
            Ok(answer?)
        }
        Message::ReportLostCopy {
            app_id,
            shuffle_id,
            partition,
            worker_addr,
        } => {
            recovery::handle_lost_copy(coord, &app_id, shuffle_id, partition, &worker_addr).await?;
            Ok(Message::Ok)
        }
        Message::ReportWorkerFailure { addr } => {
            recovery::check_reported_worker(coord, &addr).await;
            Ok(Message::Ok)
        }
        Message::UnregisterShuffle { app_id, shuffle_id } => {
            let (removed, workers) = {
                let mut st = coord.lock();
                let removed = st.remove_shuffle(&app_id, shuffle_id);
                // Every live worker: a copy may have moved, or a worker come back.
                (removed, st.live_worker_addrs())
            };
            if removed.is_some() {
                coord
                    .log(&[Record::ShuffleGone {
                        app_id: app_id.clone(),
                        shuffle_id,
                    }])
                    .await?;
                delete_shuffle_on(coord, &app_id, shuffle_id, &workers).await;
            }
            Ok(Message::Ok)
        }
        Message::SplitPartition {
            app_id,
            shuffle_id,
            slot,
        } => Ok(split::split_partition(coord, &app_id, shuffle_id, slot).await?),
        Message::GetShuffleStatus {
            app_id,
            shuffle_id,
            runs_from,
            runs_to,
        } => {
            let st = coord.lock();
            let s = st.shuffle(&app_id, shuffle_id)?;
            Ok(st.status(&s, runs_from.value()..runs_to.value()))
        }
        other => Err(NotAccepted {
            endpoint: "the coordinator",
            kind: other.kind(),
        }
        .into()),
    }
}

/// Sends a (re-)registered worker the current layout and commits of every shuffle it
/// holds copies of, so it serves exactly what the coordinator counts.
async fn sync_worker(coord: &Arc<Coordinator>, worker_id: u32) {
    let shuffles = coord.lock().shuffles_on(worker_id);
    for (app_id, shuffle_id, s) in shuffles {
        let _serial = s.layout_guard().await;
        let (addr, prepare, attempts) = {
            let st = coord.lock();
            let Some(addr) = st.worker(worker_id).map(|w| w.addr.clone()) else {
                return;
            };
            let p = s.lock();
            let parts = p.copies_of(worker_id);
            let prepare = st
                .placer()
                .prepare_message(&app_id, shuffle_id, &s, &p, worker_id, parts);
            (addr, prepare, p.map_attempts().to_vec())
        };
        let sync = Message::SyncCommits {
            app_id: app_id.clone(),
            shuffle_id,
            map_attempts: attempts,
        };
        for msg in [prepare, sync] {
            if let Err(e) = coord.call_worker(&addr, &msg).await {
                tracing::warn!(error = %e, worker = worker_id, app = %app_id, shuffle_id, "could not bring a worker up to date");
                return;
            }
        }
    }
}

/// A worker marked lost had all its partitions moved elsewhere; whatever it still holds
/// is stale (and, for a rerun indeterminate stage, would be wrong to serve). Deletes every
/// registered app's data on it, in the background.
fn wipe_revived_worker(coord: &Arc<Coordinator>, worker_id: u32) {
    let coord = coord.clone();
    tokio::spawn(async move {
        let (apps, addr) = {
            let st = coord.lock();
            let addr = st.worker(worker_id).map(|w| w.addr.clone());
            (st.app_ids(), addr)
        };
        let Some(addr) = addr else { return };
        for app in apps {
            // Unless a partition was placed on it again since it came back.
            let placed_again = coord
                .lock()
                .shuffles_on(worker_id)
                .iter()
                .any(|(a, _, _)| *a == app);
            if !placed_again {
                // Its own copies only: the object store holds what others uploaded.
                delete_app_on(&coord, &app, std::slice::from_ref(&addr), false).await;
            }
        }
    });
}

/// Registers a shuffle. Its `sample` (the engine's sample of its input: inputs and counts,
/// both empty for none) is read only for a new registration (a repeated one keeps what the
/// first had), after the app and its quotas have been checked.
async fn register_shuffle(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    num_maps: u32,
    num_partitions: u32,
    sample: (&[InputSample], &[SampleCount]),
) -> Result<Message, ServerError> {
    let planned = coord
        .lock()
        .plan_shuffle(app_id, shuffle_id, num_maps, num_partitions)?;
    let entry = match planned {
        Ok(existing) => return Ok(coord.lock().placement(&existing)),
        Err(new) => new,
    };
    // O(partitions): after the quota on partitions, so a request cannot size it at will.
    let shares = sample_shares(num_maps, num_partitions, sample.0, sample.1)
        .map_err(|reason| StateError::InvalidSample { reason })?;
    let sampled = shares.is_some();
    if let Some(shares) = shares {
        entry.use_sample(shares);
    }
    let prepares: Vec<(String, Message)> = {
        let st = coord.lock();
        let p = entry.lock();
        p.holders()
            .into_iter()
            .map(|w| {
                let parts = p.copies_of(w);
                let msg = st
                    .placer()
                    .prepare_message(app_id, shuffle_id, &entry, &p, w, parts);
                (st.addr_of(w), msg)
            })
            .collect()
    };
    for res in call_all(coord, &prepares).await {
        res?;
    }
    CoordinatorMetrics::add(&coord.metrics.registered_shuffles, 1);
    CoordinatorMetrics::add(&coord.metrics.sampled_shuffles, u64::from(sampled));
    let recorded = coord.lock().record_shuffle(app_id, shuffle_id, entry)?;
    let (primary, replica) = recorded.lock().layout();
    let record = Record::Shuffle {
        app_id: app_id.to_string(),
        shuffle_id,
        num_maps,
        num_partitions,
        primary,
        replica,
    };
    coord.log(&[record]).await?;
    tracing::info!(app = %app_id, shuffle_id, num_maps, num_partitions, workers = prepares.len(), sampled, "shuffle registered");
    Ok(coord.lock().placement(&recorded))
}

/// What a `CommitMap` asks to record.
struct Commit {
    map_id: u32,
    attempt_id: AttemptId,
    stats: Vec<PartitionStat>,
    runs: Vec<RunStart>,
}

async fn commit_map(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    commit: Commit,
) -> Result<Message, ServiceError> {
    let Commit {
        map_id,
        attempt_id,
        stats,
        runs,
    } = commit;
    let shuffle = coord.lock().shuffle(app_id, shuffle_id)?;
    if map_id >= shuffle.num_maps {
        return Err(StateError::MapOutOfRange {
            map: map_id,
            shuffle: shuffle_id,
            maps: shuffle.num_maps,
        }
        .into());
    }
    if attempt_id.is_none() {
        return Err(StateError::ReservedAttempt.into());
    }
    let _serial = shuffle.commit_guard(map_id).await;
    // Under the guard: a split that could not be journaled is taken back under it.
    let slots = shuffle.lock().slots();
    if let Some(s) = stats.iter().find(|s| s.partition >= slots) {
        return Err(StateError::PartitionOutOfRange {
            partition: s.partition,
            partitions: slots,
        }
        .into());
    }
    if let Some(reason) = invalid_runs(&stats, &runs) {
        return Err(StateError::InvalidRuns { reason }.into());
    }
    if let Some((status, winner)) = shuffle.commit_precheck(map_id, attempt_id) {
        if status == CommitStatus::Rejected {
            CoordinatorMetrics::add(&coord.metrics.rejected_commits, 1);
            tracing::info!(app = %app_id, shuffle_id, map_id, %attempt_id, %winner, "commit rejected: another attempt won");
        }
        return Ok(Message::CommitResult {
            status,
            winning_attempt: winner,
        });
    }
    // Every copy of every partition checks that it holds exactly the reported bytes:
    // the map counts only once its data is held at the configured replication.
    let per_worker: Vec<(String, Vec<PartitionBytes>)> = {
        let st = coord.lock();
        let p = shuffle.lock();
        p.holders()
            .into_iter()
            .map(|w| {
                let parts = stats
                    .iter()
                    .filter(|s| s.bytes > 0 && p.holds(s.partition, w))
                    .map(|s| PartitionBytes {
                        partition: s.partition,
                        bytes: s.bytes,
                    })
                    .collect();
                (st.addr_of(w), parts)
            })
            .collect()
    };
    let results = notify_commit(coord, app_id, shuffle_id, map_id, attempt_id, &per_worker).await;
    if let Some(err) = results.into_iter().find_map(|r| r.err()) {
        if let ServiceError::WorkerUnreachable { .. } = err {
            // Whoever it was, find out now rather than at its heartbeat deadline.
            for (addr, _) in &per_worker {
                let coord = coord.clone();
                let addr = addr.clone();
                tokio::spawn(async move { recovery::check_reported_worker(&coord, &addr).await });
            }
        }
        // Undo on the workers that accepted, so a retried attempt can push again.
        let none = AttemptId::NONE;
        let _ = notify_commit(coord, app_id, shuffle_id, map_id, none, &per_worker).await;
        tracing::warn!(app = %app_id, shuffle_id, map_id, %attempt_id, error = %err, "commit failed");
        return Err(err);
    }
    let recorded = shuffle.record_commit(map_id, attempt_id, &stats, &runs);
    if let Some(old) = recorded.replaced {
        tracing::info!(app = %app_id, shuffle_id, map_id, %attempt_id, replaced = %old, "a rerun of the stage replaced the map's output");
    }
    // Before the journal append, which may fail: the commit holds in memory either way,
    // and the forecast will not hand out this event again.
    let predicted = recorded.forecast.predicted.is_some();
    prediction::report(coord, app_id, shuffle_id, recorded.forecast);
    if predicted {
        rebalance::after_prediction(coord, app_id, shuffle_id);
    }
    // Durable before it is acknowledged. If the journal cannot be written the commit
    // still holds in memory; the client sees an error and retries, and a restart of the
    // coordinator before that would make the map look uncommitted (recomputed, never
    // read wrong).
    coord
        .log(&[Record::Commit {
            app_id: app_id.to_string(),
            shuffle_id,
            map_id,
            attempt_id,
            stats,
            run_starts: Appended(Some(runs).filter(|r| !r.is_empty())),
        }])
        .await?;
    CoordinatorMetrics::add(&coord.metrics.commits, 1);
    Ok(Message::CommitResult {
        status: CommitStatus::Committed,
        winning_attempt: attempt_id,
    })
}
