//! The coordinator's request handling.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crossdock_proto::io::{read_exact_bytes, read_header, write_message};
use crossdock_proto::{
    CommitStatus, ErrorCode, Message, PartitionBytes, PartitionStat, MAX_CONTROL_FRAME,
    PROTOCOL_VERSION,
};
use futures_util::future::join_all;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;

use super::journal::Record;
use super::state::{Rejoin, NO_ATTEMPT};
use super::Coordinator;
use crate::error::ServerError;

/// Requests on one connection are handled concurrently; responses are matched by id.
pub(super) async fn serve(stream: TcpStream, coord: Arc<Coordinator>) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    let mut r = BufReader::new(r);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, Message, bool)>();
    let writer = tokio::spawn(async move {
        let mut w = BufWriter::new(w);
        while let Some((id, msg, close)) = rx.recv().await {
            write_message(&mut w, id, &msg).await?;
            if rx.is_empty() || close {
                w.flush().await?;
            }
            if close {
                break;
            }
        }
        io::Result::Ok(())
    });
    let reject = |coord: &Coordinator, err: ServerError| {
        coord.metrics.errors.inc(err.code);
        tracing::debug!(code = %err.code, message = %err.message, "request rejected");
        err.to_message()
    };
    loop {
        let h = match read_header(&mut r).await {
            Ok(Some(h)) => h,
            Ok(None) => break,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let _ = tx.send((
                    0,
                    reject(
                        &coord,
                        ServerError::new(ErrorCode::MalformedFrame, e.to_string()),
                    ),
                    true,
                ));
                break;
            }
            Err(e) => return Err(e),
        };
        if h.version != PROTOCOL_VERSION {
            let err = ServerError::new(
                ErrorCode::UnsupportedVersion,
                format!("protocol version {} is not supported; this coordinator speaks version {PROTOCOL_VERSION}", h.version),
            );
            let _ = tx.send((h.request_id, reject(&coord, err), true));
            break;
        }
        if h.body_len > MAX_CONTROL_FRAME {
            let err = ServerError::new(
                ErrorCode::FrameTooLarge,
                format!(
                    "frame body of {} bytes exceeds the limit of {MAX_CONTROL_FRAME} bytes",
                    h.body_len
                ),
            );
            let _ = tx.send((h.request_id, reject(&coord, err), true));
            break;
        }
        let body = read_exact_bytes(&mut r, h.body_len as usize).await?;
        let msg = match Message::decode(h.kind, body) {
            Ok(m) => m,
            Err(e) => {
                let _ = tx.send((h.request_id, reject(&coord, e.into()), false));
                continue;
            }
        };
        let coord = coord.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let reply = match handle(&coord, msg).await {
                Ok(m) => m,
                Err(err) => reject(&coord, err),
            };
            let _ = tx.send((h.request_id, reply, false));
        });
    }
    drop(tx);
    writer.await.map_err(io::Error::other)?
}

async fn handle(coord: &Arc<Coordinator>, msg: Message) -> Result<Message, ServerError> {
    let now = Instant::now();
    match msg {
        Message::RegisterWorker {
            addr,
            memory_budget,
            incarnation,
        } => {
            let (worker_id, rejoin) =
                coord
                    .lock()
                    .register_worker(&addr, memory_budget, incarnation, now);
            match rejoin {
                Rejoin::Restarted => {
                    // What it still holds is checked, the rest handled as lost, before
                    // it takes part in placement again.
                    tracing::warn!(worker_id, %addr, "worker restarted; checking which of its copies survived");
                    super::handle_restart(coord, worker_id, &addr).await;
                    coord
                        .lock()
                        .register_worker(&addr, memory_budget, incarnation, now);
                }
                Rejoin::Revived => wipe_revived_worker(coord, worker_id),
                Rejoin::New | Rejoin::Reconnected => {}
            }
            coord.log(&[Record::Worker {
                id: worker_id,
                addr: addr.clone(),
                incarnation,
            }])?;
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
        } => {
            let revived = {
                let mut st = coord.lock();
                let revived = st.heartbeat(worker_id, buffered_bytes, stored_bytes, now)?;
                st.set_disk_full(worker_id, disk_full);
                revived
            };
            if revived {
                wipe_revived_worker(coord, worker_id);
            }
            Ok(Message::Ok)
        }
        Message::RegisterApp { app_id, lease_ms } => {
            coord.lock().register_app(&app_id, lease_ms, now)?;
            coord.log(&[Record::App { app_id, lease_ms }])?;
            Ok(Message::Ok)
        }
        Message::RenewLease { app_id } => {
            coord.lock().renew_lease(&app_id, now)?;
            Ok(Message::Ok)
        }
        Message::UnregisterApp { app_id } => {
            let (existed, workers) = {
                let mut st = coord.lock();
                (st.apps.remove(&app_id).is_some(), st.live_worker_addrs())
            };
            if existed {
                coord.log(&[Record::AppGone {
                    app_id: app_id.clone(),
                }])?;
                delete_app_on(coord, &app_id, &workers, true).await;
            }
            Ok(Message::Ok)
        }
        Message::RegisterShuffle {
            app_id,
            shuffle_id,
            num_maps,
            num_partitions,
        } => register_shuffle(coord, &app_id, shuffle_id, num_maps, num_partitions).await,
        Message::CommitMap {
            app_id,
            shuffle_id,
            map_id,
            attempt_id,
            partitions,
        } => commit_map(coord, &app_id, shuffle_id, map_id, attempt_id, partitions).await,
        Message::ReportCorruption {
            app_id,
            shuffle_id,
            partition,
            worker_addr,
        } => {
            super::handle_corruption(coord, &app_id, shuffle_id, partition, &worker_addr).await?;
            Ok(Message::Ok)
        }
        Message::ReportWorkerFailure { addr } => {
            super::check_reported_worker(coord, &addr).await;
            Ok(Message::Ok)
        }
        Message::UnregisterShuffle { app_id, shuffle_id } => {
            let (removed, workers) = {
                let mut st = coord.lock();
                let removed = st
                    .apps
                    .get_mut(&app_id)
                    .and_then(|a| a.shuffles.remove(&shuffle_id));
                // Every live worker: a copy may have moved, or a worker come back.
                (removed, st.live_worker_addrs())
            };
            if removed.is_some() {
                coord.log(&[Record::ShuffleGone {
                    app_id: app_id.clone(),
                    shuffle_id,
                }])?;
                let msg = Message::DeleteShuffle {
                    app_id: app_id.clone(),
                    shuffle_id,
                    everywhere: true,
                };
                let calls = workers.iter().map(|addr| coord.call_worker(addr, &msg));
                for res in join_all(calls).await {
                    if let Err(e) = res {
                        tracing::warn!(error = %e, app = %app_id, shuffle_id, "could not delete shuffle data on a worker");
                    }
                }
            }
            Ok(Message::Ok)
        }
        Message::GetShuffleStatus { app_id, shuffle_id } => {
            let st = coord.lock();
            let s = st.shuffle(&app_id, shuffle_id)?;
            Ok(st.status(&s))
        }
        other => Err(ServerError::new(
            ErrorCode::UnknownMessageKind,
            format!(
                "the coordinator does not accept {:?} messages",
                other.kind()
            ),
        )),
    }
}

/// Sends a (re-)registered worker the current layout and commits of every shuffle it
/// holds copies of, so it serves exactly what the coordinator counts.
async fn sync_worker(coord: &Arc<Coordinator>, worker_id: u32) {
    let shuffles = coord.lock().shuffles_on(worker_id);
    for (app_id, shuffle_id, s) in shuffles {
        let _serial = s.commit_lock.lock().await;
        let (addr, prepare, attempts) = {
            let st = coord.lock();
            let Some(addr) = st.workers.get(&worker_id).map(|w| w.addr.clone()) else {
                return;
            };
            let p = s.lock();
            let parts = p.copies_of(worker_id);
            let prepare = st.prepare_message(&app_id, shuffle_id, &s, &p, worker_id, parts);
            (addr, prepare, p.map_attempts.clone())
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
            let addr = st.workers.get(&worker_id).map(|w| w.addr.clone());
            (st.apps.keys().cloned().collect::<Vec<_>>(), addr)
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

/// Deletes an app's data on `workers`; `everywhere` also deletes its object-store
/// copies (the app is gone for good).
pub(super) async fn delete_app_on(
    coord: &Coordinator,
    app_id: &str,
    workers: &[String],
    everywhere: bool,
) {
    let msg = Message::DeleteApp {
        app_id: app_id.to_string(),
        everywhere,
    };
    let calls = workers.iter().map(|addr| coord.call_worker(addr, &msg));
    for res in join_all(calls).await {
        if let Err(e) = res {
            tracing::warn!(error = %e, app = %app_id, "could not delete app data on a worker");
        }
    }
}

fn worker_failed(addr: &str, e: crossdock_client::ClientError) -> ServerError {
    match e {
        crossdock_client::ClientError::Remote { code, message, .. } => ServerError::new(
            ErrorCode::from_u16(code).unwrap_or(ErrorCode::Internal),
            format!("worker {addr}: {message}"),
        ),
        other => ServerError::new(
            ErrorCode::WorkerUnavailable,
            format!("worker {addr}: {other}"),
        ),
    }
}

async fn register_shuffle(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    num_maps: u32,
    num_partitions: u32,
) -> Result<Message, ServerError> {
    let planned = coord
        .lock()
        .plan_shuffle(app_id, shuffle_id, num_maps, num_partitions)?;
    let entry = match planned {
        Ok(existing) => return Ok(coord.lock().placement(&existing)),
        Err(new) => new,
    };
    let prepares: Vec<(String, Message)> = {
        let st = coord.lock();
        let p = entry.lock();
        p.holders()
            .into_iter()
            .map(|w| {
                let parts = p.copies_of(w);
                let addr = st.workers[&w].addr.clone();
                (
                    addr,
                    st.prepare_message(app_id, shuffle_id, &entry, &p, w, parts),
                )
            })
            .collect()
    };
    let calls = prepares.iter().map(|(addr, msg)| async move {
        coord
            .call_worker(addr, msg)
            .await
            .map_err(|e| worker_failed(addr, e))
    });
    for res in join_all(calls).await {
        res?;
    }
    coord
        .metrics
        .registered_shuffles
        .fetch_add(1, Ordering::Relaxed);
    let recorded = coord.lock().record_shuffle(app_id, shuffle_id, entry)?;
    let record = {
        let p = recorded.lock();
        Record::Shuffle {
            app_id: app_id.to_string(),
            shuffle_id,
            num_maps,
            num_partitions,
            primary: p.primary.clone(),
            replica: p.replica.clone(),
        }
    };
    coord.log(&[record])?;
    tracing::info!(app = %app_id, shuffle_id, num_maps, num_partitions, workers = prepares.len(), "shuffle registered");
    Ok(coord.lock().placement(&recorded))
}

async fn commit_map(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    map_id: u32,
    attempt_id: u32,
    stats: Vec<PartitionStat>,
) -> Result<Message, ServerError> {
    let shuffle = coord.lock().shuffle(app_id, shuffle_id)?;
    if map_id >= shuffle.num_maps {
        return Err(ServerError::new(
            ErrorCode::UnknownMap,
            format!(
                "map {map_id} is out of range: shuffle {shuffle_id} has {} maps",
                shuffle.num_maps
            ),
        ));
    }
    if attempt_id == NO_ATTEMPT {
        return Err(ServerError::new(
            ErrorCode::InvalidArgument,
            "attempt id 4294967295 is reserved",
        ));
    }
    if let Some(s) = stats.iter().find(|s| s.partition >= shuffle.num_partitions) {
        return Err(ServerError::new(
            ErrorCode::InvalidArgument,
            format!(
                "commit names partition {} but the shuffle has {}",
                s.partition, shuffle.num_partitions
            ),
        ));
    }
    let _serial = shuffle.commit_lock.lock().await;
    if let Some((status, winner)) = shuffle.commit_precheck(map_id, attempt_id) {
        if status == CommitStatus::Rejected {
            coord
                .metrics
                .rejected_commits
                .fetch_add(1, Ordering::Relaxed);
            tracing::info!(app = %app_id, shuffle_id, map_id, attempt_id, winner, "commit rejected: another attempt won");
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
                    .filter(|s| {
                        let i = s.partition as usize;
                        s.bytes > 0 && (p.primary[i] == w || p.replica[i] == w)
                    })
                    .map(|s| PartitionBytes {
                        partition: s.partition,
                        bytes: s.bytes,
                    })
                    .collect();
                let addr = st
                    .workers
                    .get(&w)
                    .map(|x| x.addr.clone())
                    .unwrap_or_default();
                (addr, parts)
            })
            .collect()
    };
    let results = notify_commit(coord, app_id, shuffle_id, map_id, attempt_id, &per_worker).await;
    if let Some(err) = results.into_iter().find_map(|r| r.err()) {
        if err.code == ErrorCode::WorkerUnavailable {
            // Whoever it was, find out now rather than at its heartbeat deadline.
            for (addr, _) in &per_worker {
                let coord = coord.clone();
                let addr = addr.clone();
                tokio::spawn(async move { super::check_reported_worker(&coord, &addr).await });
            }
        }
        // Undo on the workers that accepted, so a retried attempt can push again.
        let _ = notify_commit(coord, app_id, shuffle_id, map_id, NO_ATTEMPT, &per_worker).await;
        tracing::warn!(app = %app_id, shuffle_id, map_id, attempt_id, error = %err, "commit failed");
        return Err(err);
    }
    if let Some(old) = shuffle.record_commit(map_id, attempt_id, &stats) {
        tracing::info!(app = %app_id, shuffle_id, map_id, attempt_id, replaced = old, "a rerun of the stage replaced the map's output");
    }
    // Durable before it is acknowledged. If the journal cannot be written the commit
    // still holds in memory; the client sees an error and retries, and a restart of the
    // coordinator before that would make the map look uncommitted (recomputed, never
    // read wrong).
    coord.log(&[Record::Commit {
        app_id: app_id.to_string(),
        shuffle_id,
        map_id,
        attempt_id,
        stats,
    }])?;
    coord.metrics.commits.fetch_add(1, Ordering::Relaxed);
    Ok(Message::CommitResult {
        status: CommitStatus::Committed,
        winning_attempt: attempt_id,
    })
}

pub(super) async fn notify_commit(
    coord: &Coordinator,
    app_id: &str,
    shuffle_id: u32,
    map_id: u32,
    attempt_id: u32,
    per_worker: &[(String, Vec<PartitionBytes>)],
) -> Vec<Result<(), ServerError>> {
    let calls = per_worker.iter().map(|(addr, partitions)| {
        let msg = Message::MapCommitted {
            app_id: app_id.to_string(),
            shuffle_id,
            map_id,
            attempt_id,
            partitions: partitions.clone(),
            durability: if attempt_id == NO_ATTEMPT {
                crossdock_proto::Durability::Memory
            } else {
                coord.cfg.durability
            },
        };
        async move {
            coord
                .call_worker(addr, &msg)
                .await
                .map(|_| ())
                .map_err(|e| worker_failed(addr, e))
        }
    });
    join_all(calls).await
}
