//! The worker's calls to others: pushes forwarded to a partition's replica, and reports
//! to the coordinator (an unreachable peer, a copy it lost: corrupt or missing data).

use std::time::Duration;

use bytes::Bytes;
use crossdock_client::{ClientError, Keyring, RpcConnection};
use crossdock_proto::{ErrorCode, Message, PushHeader, FLAG_REPLICA};

use crate::error::Coded;
use crate::peers::Peers;

/// Why a batch could not be replicated.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("could not replicate the batch to {addr}: {source}")]
    Unreachable { addr: String, source: ClientError },
    #[error("replica {addr}: {source}")]
    Refused { addr: String, source: ClientError },
}

/// The replica's own code when it refused, `worker_unavailable` when it could not be
/// reached.
impl Coded for ReplicaError {
    fn code(&self) -> ErrorCode {
        match self {
            ReplicaError::Refused {
                source: ClientError::Remote { code, .. },
                ..
            } => ErrorCode::from_u16(*code).unwrap_or(ErrorCode::WorkerUnavailable),
            _ => ErrorCode::WorkerUnavailable,
        }
    }
}

/// Connections to the coordinator and to the workers this one forwards to.
pub struct Links {
    coordinator: String,
    /// Connections to replicas, one per address.
    replicas: Peers,
}

impl Links {
    /// Links to `coordinator` and to replicas, each connection proving `keyring` (the
    /// cluster secret).
    pub fn new(coordinator: String, keyring: Keyring) -> Links {
        Links {
            coordinator,
            replicas: Peers::new(keyring),
        }
    }

    /// The keys this worker proves on its connections to other servers.
    pub fn keyring(&self) -> &Keyring {
        self.replicas.keyring()
    }

    /// The coordinator's address.
    pub fn coordinator(&self) -> &str {
        &self.coordinator
    }

    /// Sends a pushed batch on to the partition's replica at `addr`. Returns once the
    /// frame is written, with a task that resolves to the replica's answer. A replica
    /// that cannot be reached is reported to the coordinator.
    pub async fn forward(
        &self,
        addr: &str,
        header: &PushHeader,
        payload: &Bytes,
    ) -> Result<tokio::task::JoinHandle<Result<(), ReplicaError>>, ReplicaError> {
        let unreachable = |source| {
            self.report_failure(addr);
            ReplicaError::Unreachable {
                addr: addr.to_string(),
                source,
            }
        };
        // A cached connection may have broken since its last use: reconnect once.
        let mut retried = false;
        let (conn, rx) = loop {
            let conn = self.replicas.get(addr).await.map_err(unreachable)?;
            match conn.start_push_flagged(header, payload, FLAG_REPLICA).await {
                Ok(rx) => break (conn, rx),
                Err(e) if !retried => {
                    retried = true;
                    tracing::debug!(error = %e, %addr, "replica connection broke; reconnecting");
                }
                Err(e) => return Err(unreachable(e)),
            }
        };
        let (addr, coordinator) = (addr.to_string(), self.coordinator.clone());
        let keyring = self.keyring().clone();
        Ok(tokio::spawn(async move {
            conn.wait(rx).await.map(|_| ()).map_err(|source| {
                if source.is_transport() {
                    report_failure(coordinator, keyring.clone(), addr.clone());
                }
                ReplicaError::Refused { addr, source }
            })
        }))
    }

    /// Asks the coordinator for the split continuing `slot` of a shuffle: its slot and
    /// its primary's address. Gives up after 10 s.
    pub async fn ask_split(
        &self,
        app_id: &str,
        shuffle_id: u32,
        slot: u32,
    ) -> Result<(u32, String), ClientError> {
        let msg = Message::SplitPartition {
            app_id: app_id.to_string(),
            shuffle_id,
            slot,
        };
        let ask = async {
            let c = RpcConnection::connect(&self.coordinator, self.keyring()).await?;
            match c.call(&msg).await? {
                Message::PartitionSplit { slot, addr } => Ok((slot, addr)),
                other => Err(ClientError::unexpected(&self.coordinator, other)),
            }
        };
        match tokio::time::timeout(Duration::from_secs(10), ask).await {
            Ok(res) => res,
            Err(_) => Err(ClientError::Io {
                addr: self.coordinator.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no answer to a split request within 10 s",
                ),
            }),
        }
    }

    /// Tells the coordinator (in the background) that `addr` did not answer.
    pub fn report_failure(&self, addr: &str) {
        report_failure(
            self.coordinator.clone(),
            self.keyring().clone(),
            addr.to_string(),
        );
    }

    /// Tells the coordinator that this worker's (`own_addr`) copy of a partition is lost:
    /// a read of its committed data failed with `why` (corrupt or missing bytes). Waits up
    /// to 3 s for the coordinator to take note.
    pub async fn report_lost_copy(
        &self,
        own_addr: &str,
        app_id: &str,
        shuffle_id: u32,
        partition: u32,
        why: &(dyn std::fmt::Display + Sync),
    ) {
        tracing::error!(app = %app_id, shuffle_id, partition, error = %why, "committed data of a partition cannot be read here; reporting the copy as lost");
        let msg = Message::ReportLostCopy {
            app_id: app_id.to_string(),
            shuffle_id,
            partition,
            worker_addr: own_addr.to_string(),
        };
        let report = async {
            let c = RpcConnection::connect(&self.coordinator, self.keyring()).await?;
            c.call(&msg).await
        };
        match tokio::time::timeout(Duration::from_secs(3), report).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not report a lost copy"),
            Err(_) => {
                tracing::warn!("the coordinator did not take the lost-copy report within 3 s")
            }
        }
    }
}

fn report_failure(coordinator: String, keyring: Keyring, addr: String) {
    tokio::spawn(async move {
        let res = async {
            let c = RpcConnection::connect(&coordinator, &keyring).await?;
            c.call(&Message::ReportWorkerFailure { addr: addr.clone() })
                .await
        }
        .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, %addr, "could not report an unreachable worker");
        }
    });
}
