//! The worker's standing with the coordinator: it registers, sends heartbeats with its
//! load, registers again when the coordinator forgot it, and reconnects (with backoff)
//! when the coordinator is unreachable.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossdock_client::{ClientError, RpcConnection};
use crossdock_proto::{Appended, ErrorCode, Message};

use super::node::Worker;
use crate::net::ShutdownSignal;

/// Runs until `shutdown` fires.
pub async fn run(worker: Arc<Worker>, mut shutdown: ShutdownSignal) {
    let mut backoff = Duration::from_millis(100);
    loop {
        tokio::select! {
            res = session(&worker) => {
                match res {
                    Ok(()) => backoff = Duration::from_millis(100),
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?backoff, "coordinator unreachable");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// One registration and the heartbeats after it. Returns `Ok` when the coordinator no
/// longer knows this worker (register again), an error when it cannot be reached.
async fn session(worker: &Worker) -> Result<(), ClientError> {
    let coordinator = worker.links.coordinator();
    let conn = RpcConnection::connect(coordinator, worker.links.keyring()).await?;
    let reply = conn
        .call(&Message::RegisterWorker {
            addr: worker.advertised.clone(),
            memory_budget: worker.memory,
            incarnation: worker.incarnation,
            host: worker.host.clone(),
            zone: worker.zone.clone(),
        })
        .await?;
    let Message::WorkerRegistered {
        worker_id,
        heartbeat_ms,
    } = reply
    else {
        return Err(ClientError::unexpected(coordinator, reply));
    };
    worker.metrics.worker_id.store(worker_id, Ordering::Relaxed);
    tracing::info!(worker_id, %coordinator, "registered with the coordinator");
    loop {
        tokio::time::sleep(Duration::from_millis(heartbeat_ms.max(10) as u64)).await;
        let hb = Message::Heartbeat {
            worker_id,
            buffered_bytes: worker.store.budget.used(),
            stored_bytes: worker.store.stored_bytes(),
            disk_full: worker.store.disk_full(),
            pushed_bytes: Appended::of(worker.metrics.pushed_bytes.load(Ordering::Relaxed)),
            fetched_bytes: Appended::of(worker.metrics.fetched_bytes.load(Ordering::Relaxed)),
            object_bytes: Appended::of(worker.store.object_bytes()),
        };
        match conn.call(&hb).await {
            Ok(_) => {}
            Err(e) if e.code() == Some(ErrorCode::UnknownWorker) => {
                tracing::warn!("coordinator no longer knows this worker; registering again");
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
}
