//! What the coordinator tells workers, to several at once: commits and revocations,
//! placements, deletions.

use crossdock_proto::{AttemptId, Durability, Message, PartitionBytes};
use futures_util::future::join_all;

use super::error::ServiceError;
use super::node::Coordinator;

/// Sends every call in `calls` (address, message) at once. Returns each answer.
pub async fn call_all(
    coord: &Coordinator,
    calls: &[(String, Message)],
) -> Vec<Result<Message, ServiceError>> {
    let calls = calls.iter().map(|(addr, msg)| async move {
        coord
            .call_worker(addr, msg)
            .await
            .map_err(|e| ServiceError::worker(addr, e))
    });
    join_all(calls).await
}

/// Tells each worker of `per_worker` (address, the map's bytes in its partitions) that
/// `attempt_id` is the one that counts for `map_id`, or, with [`AttemptId::NONE`], that
/// the map's commit is revoked. A commit is answered at the configured durability.
pub async fn notify_commit(
    coord: &Coordinator,
    app_id: &str,
    shuffle_id: u32,
    map_id: u32,
    attempt_id: AttemptId,
    per_worker: &[(String, Vec<PartitionBytes>)],
) -> Vec<Result<(), ServiceError>> {
    let durability = if attempt_id.is_none() {
        Durability::Memory
    } else {
        coord.cfg.durability
    };
    let calls: Vec<(String, Message)> = per_worker
        .iter()
        .map(|(addr, partitions)| {
            let msg = Message::MapCommitted {
                app_id: app_id.to_string(),
                shuffle_id,
                map_id,
                attempt_id,
                partitions: partitions.clone(),
                durability,
            };
            (addr.clone(), msg)
        })
        .collect();
    call_all(coord, &calls)
        .await
        .into_iter()
        .map(|r| r.map(|_| ()))
        .collect()
}

/// Deletes an app's data on `workers`; `everywhere` also deletes its object-store
/// copies (the app is gone for good).
pub async fn delete_app_on(
    coord: &Coordinator,
    app_id: &str,
    workers: &[String],
    everywhere: bool,
) {
    let msg = Message::DeleteApp {
        app_id: app_id.to_string(),
        everywhere,
    };
    let calls: Vec<(String, Message)> = workers.iter().map(|a| (a.clone(), msg.clone())).collect();
    for res in call_all(coord, &calls).await {
        if let Err(e) = res {
            tracing::warn!(error = %e, app = %app_id, "could not delete app data on a worker");
        }
    }
}

/// Deletes a shuffle's data on `workers`, object-store copies included.
pub async fn delete_shuffle_on(
    coord: &Coordinator,
    app_id: &str,
    shuffle_id: u32,
    workers: &[String],
) {
    let msg = Message::DeleteShuffle {
        app_id: app_id.to_string(),
        shuffle_id,
        everywhere: true,
    };
    let calls: Vec<(String, Message)> = workers.iter().map(|a| (a.clone(), msg.clone())).collect();
    for res in call_all(coord, &calls).await {
        if let Err(e) = res {
            tracing::warn!(error = %e, app = %app_id, shuffle_id, "could not delete shuffle data on a worker");
        }
    }
}
