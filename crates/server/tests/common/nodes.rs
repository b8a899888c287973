//! A coordinator and workers started one by one (each with its own shutdown), for the
//! failure tests: workers are killed, restarted on their directories, given small disks
//! or object stores.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crossdock_client::{ClientError, CoordinatorClient, Keyring, Placement, ShuffleStatus};
use crossdock_proto::{AttemptId, CommitStatus, Durability};
use crossdock_server::coordinator::{Coordinator, CoordinatorConfig};
use crossdock_server::worker::config::{Tenancy, DEFAULT_SPLIT_BYTES};
use crossdock_server::worker::{Worker, WorkerConfig};

use super::{payload, push_batch, read_batches, reader, stat};

pub struct Node {
    pub worker: Arc<Worker>,
    pub stop: tokio::sync::watch::Sender<bool>,
}

pub struct Cluster {
    pub coord: CoordinatorClient,
    /// The coordinator itself, for what no request shows (its counters).
    pub coordinator: std::sync::Arc<crossdock_server::coordinator::Coordinator>,
    pub coord_addr: String,
    pub nodes: Vec<Node>,
    pub dir: tempfile::TempDir,
    /// The workers' object-store tier.
    pub tier: Option<TierCfg>,
    /// Stops the coordinator when dropped.
    pub stop: tokio::sync::watch::Sender<bool>,
}

/// How a test worker splits, whether it has a disk tier, and the hosts a cluster's
/// workers say they run on (worker `i` on `hosts[i % len]`; none: all on 127.0.0.1).
#[derive(Clone, Copy)]
pub struct WorkerOpts {
    pub split_bytes: u64,
    pub memory_only: bool,
    pub hosts: &'static [&'static str],
}

impl WorkerOpts {
    /// Splits at `split_bytes`, spills to disk, unlabelled.
    pub fn splitting(split_bytes: u64) -> WorkerOpts {
        WorkerOpts {
            split_bytes,
            memory_only: false,
            hosts: &[],
        }
    }
}

/// A worker's object store and disk quota.
#[derive(Clone)]
pub struct TierCfg {
    pub url: String,
    pub disk_quota: Option<u64>,
}

pub async fn start_worker(coordinator: &str, listen: &str, dir: std::path::PathBuf) -> Node {
    start_worker_on(coordinator, listen, vec![dir], None).await
}

pub async fn start_worker_on(
    coordinator: &str,
    listen: &str,
    dirs: Vec<std::path::PathBuf>,
    tier: Option<&TierCfg>,
) -> Node {
    start_worker_shared(
        coordinator,
        listen,
        dirs,
        tier,
        64 << 20,
        Tenancy::default(),
        WorkerOpts::splitting(DEFAULT_SPLIT_BYTES),
        "",
    )
    .await
}

/// A worker with `memory` bytes of budget shared between apps as `tenancy` says, saying
/// it runs on `host` (empty: its address's).
#[allow(clippy::too_many_arguments)]
pub async fn start_worker_shared(
    coordinator: &str,
    listen: &str,
    dirs: Vec<std::path::PathBuf>,
    tier: Option<&TierCfg>,
    memory: u64,
    tenancy: Tenancy,
    opts: WorkerOpts,
    host: &str,
) -> Node {
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let (dir, extra) = (dirs[0].clone(), dirs[1..].to_vec());
    let worker = Worker::start(
        WorkerConfig {
            listen: listen.into(),
            advertise: None,
            host: host.into(),
            zone: String::new(),
            coordinator: coordinator.into(),
            memory,
            data_dir: dir,
            extra_data_dirs: extra,
            object_store: tier.map(|t| t.url.clone()),
            disk_quota: tier.and_then(|t| t.disk_quota),
            limits: Default::default(),
            secret: Some(super::secret()),
            tls: None,
            tenancy,
            split_bytes: opts.split_bytes,
            memory_only: opts.memory_only,
            zero_copy_fetch: true,
        },
        shutdown,
    )
    .await
    .unwrap();
    Node { worker, stop }
}

impl Cluster {
    pub async fn start(workers: usize, replication: u32) -> Cluster {
        Cluster::start_with(workers, replication, Durability::Memory).await
    }

    pub async fn start_with(workers: usize, replication: u32, durability: Durability) -> Cluster {
        Cluster::start_tiered(workers, replication, durability, None).await
    }

    pub async fn start_tiered(
        workers: usize,
        replication: u32,
        durability: Durability,
        tier: Option<TierCfg>,
    ) -> Cluster {
        Cluster::start_full(
            workers,
            replication,
            durability,
            tier,
            64 << 20,
            Tenancy::default(),
            WorkerOpts::splitting(DEFAULT_SPLIT_BYTES),
        )
        .await
    }

    /// `workers` workers that split a partition once they hold `split_bytes` of it.
    pub async fn start_splitting(workers: usize, replication: u32, split_bytes: u64) -> Cluster {
        let durability = Durability::Memory;
        Cluster::start_splitting_in(workers, replication, split_bytes, 64 << 20, durability).await
    }

    /// As [`Cluster::start_splitting`], with `memory` bytes of budget per worker and the
    /// commit rule `durability`.
    pub async fn start_splitting_in(
        workers: usize,
        replication: u32,
        split_bytes: u64,
        memory: u64,
        durability: Durability,
    ) -> Cluster {
        let tenancy = Tenancy::default();
        Cluster::start_full(
            workers,
            replication,
            durability,
            None,
            memory,
            tenancy,
            WorkerOpts::splitting(split_bytes),
        )
        .await
    }

    /// One worker of `memory` bytes shared between apps as `tenancy` says.
    pub async fn start_shared(memory: u64, tenancy: Tenancy) -> Cluster {
        let split = DEFAULT_SPLIT_BYTES;
        let opts = WorkerOpts::splitting(split);
        Cluster::start_full(1, 1, Durability::Memory, None, memory, tenancy, opts).await
    }

    pub async fn start_full(
        workers: usize,
        replication: u32,
        durability: Durability,
        tier: Option<TierCfg>,
        memory: u64,
        tenancy: Tenancy,
        opts: WorkerOpts,
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let mut cfg = CoordinatorConfig::new("127.0.0.1:0", dir.path().join("coordinator"));
        cfg.replication = replication;
        cfg.durability = durability;
        cfg.heartbeat = Duration::from_millis(50);
        cfg.secret = Some(super::secret());
        // Re-placement needs hosts: on for clusters whose workers are labelled with them.
        cfg.rebalance = !opts.hosts.is_empty();
        let coordinator = Coordinator::start(cfg, shutdown).await.unwrap();
        let coord_addr = coordinator.addr.to_string();
        let mut nodes = Vec::new();
        for i in 0..workers {
            let dir = dir.path().join(format!("w{i}"));
            let host = match opts.hosts {
                [] => "",
                hosts => hosts[i % hosts.len()],
            };
            nodes.push(
                start_worker_shared(
                    &coord_addr,
                    "127.0.0.1:0",
                    vec![dir],
                    tier.as_ref(),
                    memory,
                    tenancy,
                    opts,
                    host,
                )
                .await,
            );
        }
        super::eventually("every worker registered", || async {
            coordinator.lock().counts().2 == workers as u64
        })
        .await;
        let coord = CoordinatorClient::connect(&coord_addr, &Keyring::new())
            .await
            .unwrap();
        Cluster {
            coord,
            coordinator,
            coord_addr,
            nodes,
            dir,
            tier,
            stop,
        }
    }

    pub fn node(&self, addr: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.worker.addr.to_string() == addr)
            .unwrap()
    }

    /// Stops the worker at `addr` and has the coordinator find out at once.
    pub async fn kill(&self, addr: &str) {
        self.node(addr).stop.send(true).unwrap();
        super::until_closed(addr).await;
        self.coord.report_worker_failure(addr).await.unwrap();
    }

    pub async fn status(&self, app: &str) -> ShuffleStatus {
        self.coord.shuffle_status(app, 0).await.unwrap()
    }

    /// Commits attempt 0 of `map` of shuffle `shuffle` with `bytes` per slot (one record
    /// each), as a map task that pushed them does.
    pub async fn commit_slots(
        &self,
        app: &str,
        shuffle: u32,
        map: u32,
        bytes: &std::collections::BTreeMap<u32, u64>,
    ) -> CommitStatus {
        let stats = bytes
            .iter()
            .map(|(&partition, &bytes)| crossdock_proto::PartitionStat {
                partition,
                bytes,
                records: 1,
            })
            .collect();
        self.coord
            .commit_map(app, shuffle, map, AttemptId(0), stats)
            .await
            .unwrap()
            .0
    }
}

/// Pushes one batch (sequence number 0) to the worker at `addr`.
pub async fn push_to(
    addr: &str,
    app: &str,
    partition: u32,
    map: u32,
    attempt: u32,
    data: &[u8],
) -> Result<(), ClientError> {
    push_batch(addr, app, partition, (map, attempt, 0), data).await
}

/// Pushes one batch of `map` to every partition's primary and commits it.
pub async fn run_map(
    c: &Cluster,
    placement: &Placement,
    app: &str,
    map: u32,
    attempt: u32,
    partitions: u32,
) -> Result<(CommitStatus, u32), ClientError> {
    let mut stats = Vec::new();
    for p in 0..partitions {
        let data = payload(map, p, attempt, 1000 + p as usize);
        push_to(
            &placement.worker_of(p).unwrap().addr,
            app,
            p,
            map,
            attempt,
            &data,
        )
        .await?;
        stats.push(stat(p, data.len()));
    }
    let (status, winner) = c
        .coord
        .commit_map(app, 0, map, AttemptId(attempt), stats)
        .await?;
    Ok((status, winner.0))
}

pub async fn read_from(
    addr: &str,
    app: &str,
    partition: u32,
    maps: u32,
) -> Result<Vec<(u32, Bytes)>, ClientError> {
    let r = reader(addr, app, partition, 0, maps).with_max_resumes(0);
    let batches = read_batches(r).await?;
    Ok(batches.into_iter().map(|(m, _, b)| (m, b)).collect())
}

pub fn expected(partition: u32, attempts: &[u32]) -> Vec<(u32, Bytes)> {
    attempts
        .iter()
        .enumerate()
        .map(|(m, &a)| {
            (
                m as u32,
                Bytes::from(payload(m as u32, partition, a, 1000 + partition as usize)),
            )
        })
        .collect()
}

/// Stops the worker at `addr` and starts a new process of it on the same address with
/// the same data directory, within the heartbeat deadline.
pub async fn restart_in_place(c: &Cluster, addr: &str) -> Node {
    let i = c
        .nodes
        .iter()
        .position(|n| n.worker.addr.to_string() == addr)
        .unwrap();
    c.nodes[i].stop.send(true).unwrap();
    super::until_closed(addr).await;
    let dir = c.dir.path().join(format!("w{i}"));
    start_worker_on(&c.coord_addr, addr, vec![dir], c.tier.as_ref()).await
}

/// A worker tier for [`Cluster::start_tiered`].
pub fn tiered(url: &str, disk_quota: Option<u64>) -> Option<TierCfg> {
    Some(TierCfg {
        url: url.to_string(),
        disk_quota,
    })
}
