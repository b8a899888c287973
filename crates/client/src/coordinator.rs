//! Typed calls to the coordinator.

use std::sync::Arc;

use bytes::Bytes;
use crossdock_proto::codec::Appended;
use crossdock_proto::{
    AttemptId, CommitStatus, InputSample, Message, PartitionStat, SampleCount, WorkerInfo,
};
use tokio::sync::Mutex;

use crate::connection::RpcConnection;
use crate::error::{ClientError, Result};
use crate::keyring::Keyring;

/// Where each partition of a shuffle lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub workers: Vec<WorkerInfo>,
    /// Primary worker id per partition.
    pub partition_workers: Vec<u32>,
    /// Replica worker id per partition ([`crossdock_proto::NO_WORKER`] if none).
    pub partition_replicas: Vec<u32>,
}

impl Placement {
    /// The worker that holds `partition`.
    pub fn worker_of(&self, partition: u32) -> Option<&WorkerInfo> {
        let id = *self.partition_workers.get(partition as usize)?;
        self.workers.iter().find(|w| w.id == id)
    }

    /// The worker that holds the replica of `partition`, if it has one.
    pub fn replica_of(&self, partition: u32) -> Option<&WorkerInfo> {
        let id = *self.partition_replicas.get(partition as usize)?;
        self.workers.iter().find(|w| w.id == id)
    }
}

/// A shuffle's commit progress and layout, as a reducer needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShuffleStatus {
    pub num_maps: u32,
    pub num_partitions: u32,
    pub committed_maps: u32,
    pub placement: Placement,
    /// Committed attempt per map; `None` for a map that has not committed.
    pub map_attempts: Vec<Option<AttemptId>>,
    /// Per slot (partitions, then splits), like the placement's lists.
    pub partition_bytes: Vec<u64>,
    pub partition_records: Vec<u64>,
    /// The partition each split continues, for the slots from `num_partitions` on.
    pub split_parents: Vec<u32>,
}

impl ShuffleStatus {
    /// True once every map has committed.
    pub fn is_complete(&self) -> bool {
        self.committed_maps == self.num_maps
    }

    /// The slots a reader of `partition` reads: the partition, then its splits in the
    /// order they were made.
    pub fn slots_of(&self, partition: u32) -> Vec<u32> {
        let splits = self
            .split_parents
            .iter()
            .enumerate()
            .filter(|&(_, &p)| p == partition)
            .map(|(i, _)| self.num_partitions + i as u32);
        std::iter::once(partition).chain(splits).collect()
    }
}

/// A client of the coordinator. Reconnects on the next call after a transport failure,
/// proving again every key of its keyring (including tokens of the apps it registered).
pub struct CoordinatorClient {
    addr: String,
    keyring: Keyring,
    conn: Mutex<Option<Arc<RpcConnection>>>,
}

impl CoordinatorClient {
    /// Connects to the coordinator at `addr` with the keys of `keyring` (none for a
    /// driver that is about to register its app); fails fast when it cannot be reached.
    pub async fn connect(addr: &str, keyring: &Keyring) -> Result<CoordinatorClient> {
        let conn = RpcConnection::connect(addr, keyring).await?;
        Ok(CoordinatorClient {
            addr: addr.to_string(),
            keyring: keyring.clone(),
            conn: Mutex::new(Some(Arc::new(conn))),
        })
    }

    /// The keys this client proves; after [`CoordinatorClient::register_app`] it holds
    /// the app's token, which the app's worker clients need.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// The coordinator's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends any request and returns the response.
    pub async fn call(&self, msg: &Message) -> Result<Message> {
        // The lock covers only taking (or re-opening) the connection: calls run side by
        // side on it, matched by request id, so a call that waits at the coordinator (a
        // commit held by a slow worker) does not hold back the others.
        let conn = {
            let mut guard = self.conn.lock().await;
            if guard.as_ref().is_none_or(|c| c.is_closed()) {
                let fresh = RpcConnection::connect(&self.addr, &self.keyring).await?;
                *guard = Some(Arc::new(fresh));
            }
            guard.as_ref().expect("connected above").clone()
        };
        conn.call(msg).await
    }

    async fn expect_ok(&self, msg: Message) -> Result<()> {
        match self.call(&msg).await? {
            Message::Ok => Ok(()),
            other => Err(ClientError::unexpected(&self.addr, other)),
        }
    }

    /// Registers an app whose lease lasts `lease_ms` after each renewal, and returns its
    /// token (empty when the cluster runs without authentication), which this client's
    /// keyring keeps from now on. Registering an app id that is already registered
    /// succeeds only for a client that holds its token.
    pub async fn register_app(&self, app_id: &str, lease_ms: u32) -> Result<Bytes> {
        self.register_app_limited(app_id, lease_ms, 0, 0).await
    }

    /// [`register_app`](Self::register_app), asking every worker to hold the app to at
    /// most `stored_quota` bytes stored and `memory_share_ppm` parts per million of its
    /// memory where that is stricter than the worker's own settings (0: no request).
    pub async fn register_app_limited(
        &self,
        app_id: &str,
        lease_ms: u32,
        stored_quota: u64,
        memory_share_ppm: u64,
    ) -> Result<Bytes> {
        let msg = Message::RegisterApp {
            app_id: app_id.into(),
            lease_ms,
            stored_quota: Appended::of(stored_quota),
            memory_share_ppm: Appended::of(memory_share_ppm),
        };
        match self.call(&msg).await? {
            Message::AppRegistered { token } => {
                self.keyring.add_app(app_id, token.clone());
                Ok(token)
            }
            other => Err(ClientError::unexpected(&self.addr, other)),
        }
    }

    /// Renews an app's lease.
    pub async fn renew_lease(&self, app_id: &str) -> Result<()> {
        self.expect_ok(Message::RenewLease {
            app_id: app_id.into(),
        })
        .await
    }

    /// Unregisters an app; the workers delete its data.
    pub async fn unregister_app(&self, app_id: &str) -> Result<()> {
        self.expect_ok(Message::UnregisterApp {
            app_id: app_id.into(),
        })
        .await
    }

    /// Registers a shuffle and returns its placement. Registering the same shuffle
    /// again with the same sizes returns the same placement.
    pub async fn register_shuffle(
        &self,
        app_id: &str,
        shuffle_id: u32,
        num_maps: u32,
        num_partitions: u32,
    ) -> Result<Placement> {
        self.register_sampled_shuffle(app_id, shuffle_id, num_maps, num_partitions, None)
            .await
    }

    /// Registers a shuffle with a range partitioner's sample of its map stage's input
    /// (see `docs/protocol.md`, `RegisterShuffle`), from which the coordinator predicts
    /// how its bytes divide among its partitions; `None`: no sample.
    pub async fn register_sampled_shuffle(
        &self,
        app_id: &str,
        shuffle_id: u32,
        num_maps: u32,
        num_partitions: u32,
        sample: Option<(Vec<InputSample>, Vec<SampleCount>)>,
    ) -> Result<Placement> {
        let (inputs, counts) = match sample {
            Some((i, c)) => (Appended(Some(i)), Appended(Some(c))),
            None => (Appended(None), Appended(None)),
        };
        match self
            .call(&Message::RegisterShuffle {
                app_id: app_id.into(),
                shuffle_id,
                num_maps,
                num_partitions,
                sample_inputs: inputs,
                sample_counts: counts,
            })
            .await?
        {
            Message::ShufflePlacement {
                workers,
                partition_workers,
                partition_replicas,
            } => Ok(Placement {
                workers,
                partition_workers,
                partition_replicas,
            }),
            other => Err(ClientError::unexpected(&self.addr, other)),
        }
    }

    /// Commits a map attempt with its per-partition sizes (non-empty partitions only).
    /// Returns the commit status and the attempt that counts for the map.
    pub async fn commit_map(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map_id: u32,
        attempt_id: AttemptId,
        partitions: Vec<PartitionStat>,
    ) -> Result<(CommitStatus, AttemptId)> {
        match self
            .call(&Message::CommitMap {
                app_id: app_id.into(),
                shuffle_id,
                map_id,
                attempt_id,
                partitions,
                run_starts: Default::default(),
            })
            .await?
        {
            Message::CommitResult {
                status,
                winning_attempt,
            } => Ok((status, winning_attempt)),
            other => Err(ClientError::unexpected(&self.addr, other)),
        }
    }

    /// Tells the coordinator that `addr` could not be reached, so it checks the worker
    /// at once instead of waiting for its heartbeat deadline.
    pub async fn report_worker_failure(&self, addr: &str) -> Result<()> {
        self.expect_ok(Message::ReportWorkerFailure { addr: addr.into() })
            .await
    }

    /// Unregisters a shuffle; the workers delete its data.
    pub async fn unregister_shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<()> {
        self.expect_ok(Message::UnregisterShuffle {
            app_id: app_id.into(),
            shuffle_id,
        })
        .await
    }

    /// The shuffle's commit progress and placement.
    pub async fn shuffle_status(&self, app_id: &str, shuffle_id: u32) -> Result<ShuffleStatus> {
        match self
            .call(&Message::GetShuffleStatus {
                app_id: app_id.into(),
                shuffle_id,
                runs_from: Default::default(),
                runs_to: Default::default(),
            })
            .await?
        {
            Message::ShuffleStatus {
                num_maps,
                num_partitions,
                committed_maps,
                workers,
                partition_workers,
                map_attempts,
                partition_bytes,
                partition_records,
                partition_replicas,
                split_parents,
                ..
            } => Ok(ShuffleStatus {
                num_maps,
                num_partitions,
                committed_maps,
                placement: Placement {
                    workers,
                    partition_workers,
                    partition_replicas,
                },
                map_attempts: map_attempts.into_iter().map(AttemptId::some).collect(),
                partition_bytes,
                partition_records,
                split_parents: split_parents.0.unwrap_or_default(),
            }),
            other => Err(ClientError::unexpected(&self.addr, other)),
        }
    }
}
