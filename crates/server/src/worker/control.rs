//! The coordinator's calls to a worker (placing partitions, commits, copy checks and
//! adoption, deletion) and `GetWorkerStats`. Each is one call into the storage layer.

use crate::app_limits::AppLimits;
use std::io;
use std::sync::Arc;

use crossdock_proto::{Durability, Message};

use super::node::Worker;
use super::reply::{answer, answer_when_done, Replies};
use super::storage::layout::ShuffleMeta;
use super::storage::StorageError;
use crate::error::{NotAccepted, ServerError};

/// Handles one control message and queues its reply. Replies that wait (a commit's
/// durability, an adoption) are computed by tasks of their own while the connection
/// goes on, and written when they are done, not in request order.
pub async fn handle(
    tx: &Replies,
    worker: &Arc<Worker>,
    request_id: u64,
    msg: Message,
) -> io::Result<()> {
    let store = &worker.store;
    let now = |res: Result<Message, ServerError>| answer(tx, request_id, res);
    match msg {
        Message::PrepareShuffle {
            app_id,
            shuffle_id,
            num_maps,
            num_partitions,
            partitions,
            forward_to,
            app_stored_quota,
            app_memory_share_ppm,
            continued_in,
            continued_at,
        } => {
            // Both lists or neither, each one entry per partition; checked before anything
            // of the message is applied.
            let continued: Vec<(u32, String)> = match (continued_in.0, continued_at.0) {
                (None, None) => Vec::new(),
                (Some(slots), Some(addrs))
                    if slots.len() == partitions.len() && addrs.len() == partitions.len() =>
                {
                    slots.into_iter().zip(addrs).collect()
                }
                (slots, addrs) => {
                    let err = StorageError::ContinuedCount {
                        slots: slots.map_or(0, |s| s.len()),
                        addrs: addrs.map_or(0, |a| a.len()),
                        partitions: partitions.len(),
                    };
                    return now(Err(err.into())).await;
                }
            };
            let limits = AppLimits {
                stored_quota: app_stored_quota.value(),
                memory_share_ppm: app_memory_share_ppm.value(),
            };
            // Absent: a coordinator that predates app limits, which changes nothing here.
            // Present, even as zeros, it is what the app asked for at its last registration.
            if app_stored_quota.0.is_some() || app_memory_share_ppm.0.is_some() {
                store.set_app_limits(&app_id, limits);
                worker
                    .fetch_budget
                    .set_app_share(&app_id, limits.memory_share());
            }
            let meta = ShuffleMeta {
                app_id,
                shuffle_id,
                num_maps,
                num_partitions,
            };
            let res = store.prepare(&meta, &partitions, &forward_to, &continued);
            now(res.map(|()| Message::Ok).map_err(Into::into)).await
        }
        Message::MapCommitted {
            app_id,
            shuffle_id,
            map_id,
            attempt_id,
            partitions,
            durability,
        } => match store.map_committed(&app_id, shuffle_id, map_id, attempt_id, &partitions) {
            Err(err) => now(Err(err.into())).await,
            Ok(()) if durability == Durability::Memory => now(Ok(Message::Ok)).await,
            // Answered once the map's batches are written and synced, or uploaded.
            Ok(()) => {
                let store = store.clone();
                answer_when_done(tx, request_id, async move {
                    store
                        .persist_map(&app_id, shuffle_id, map_id, attempt_id, durability)
                        .await
                        .map(|()| Message::Ok)
                        .map_err(Into::into)
                });
                Ok(())
            }
        },
        Message::CheckCopies {
            app_id,
            shuffle_id,
            map_attempts,
            partitions,
            expected_bytes,
            adopt,
        } => {
            let held = |res: Result<Vec<u32>, StorageError>| {
                res.map(|partitions| Message::CopiesHeld { partitions })
                    .map_err(ServerError::from)
            };
            if !adopt {
                let res = store.check_copies(
                    &app_id,
                    shuffle_id,
                    &map_attempts,
                    &partitions,
                    &expected_bytes,
                );
                return now(held(res)).await;
            }
            // Adoption reads from the object store: answered when done.
            let store = store.clone();
            answer_when_done(tx, request_id, async move {
                let res = store
                    .adopt(
                        &app_id,
                        shuffle_id,
                        &map_attempts,
                        &partitions,
                        &expected_bytes,
                    )
                    .await;
                held(res)
            });
            Ok(())
        }
        Message::DeleteShuffle {
            app_id,
            shuffle_id,
            everywhere,
        } => {
            store.delete_shuffle(&app_id, shuffle_id, everywhere);
            now(Ok(Message::Ok)).await
        }
        Message::DeleteApp { app_id, everywhere } => {
            store.delete_app(&app_id, everywhere);
            worker.metrics.apps.forget(&app_id);
            store.budget.forget(&app_id);
            worker.fetch_budget.forget(&app_id);
            now(Ok(Message::Ok)).await
        }
        Message::SyncCommits {
            app_id,
            shuffle_id,
            map_attempts,
        } => {
            let res = store.sync_commits(&app_id, shuffle_id, &map_attempts);
            now(res.map(|()| Message::Ok).map_err(Into::into)).await
        }
        Message::GetWorkerStats => now(Ok(worker.stats())).await,
        other => {
            let err = NotAccepted {
                endpoint: "a worker",
                kind: other.kind(),
            };
            now(Err(err.into())).await
        }
    }
}
