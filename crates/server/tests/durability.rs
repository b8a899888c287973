//! What survives what: replication, losing workers, restarts, reruns and corruption,
//! with a real coordinator and real workers on loopback. "Killing" a worker stops its
//! listener and drops every connection it had, as the end of its process would.

use std::time::Duration;

use bytes::Bytes;
use crossdock_client::{
    ClientError, CoordinatorClient, FetchRange, PartitionReader, Placement, ShuffleStatus,
    WorkerClient,
};
use crossdock_proto::{
    checksum, CommitStatus, Durability, ErrorCode, PartitionStat, PushHeader, NO_WORKER,
};
use crossdock_server::coordinator::{Coordinator, CoordinatorConfig};
use crossdock_server::worker::object_store::ObjectStore;
use crossdock_server::worker::{Worker, WorkerConfig};
use std::sync::Arc;

struct Node {
    worker: Arc<Worker>,
    stop: tokio::sync::watch::Sender<bool>,
}

struct Cluster {
    coord: CoordinatorClient,
    coord_addr: String,
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
    /// The workers' object-store tier.
    tier: Option<TierCfg>,
    _stop: tokio::sync::watch::Sender<bool>,
}

/// A worker's object store and disk quota.
#[derive(Clone)]
struct TierCfg {
    url: String,
    disk_quota: Option<u64>,
}

async fn start_worker(coordinator: &str, listen: &str, dir: std::path::PathBuf) -> Node {
    start_worker_on(coordinator, listen, vec![dir], None).await
}

async fn start_worker_on(
    coordinator: &str,
    listen: &str,
    dirs: Vec<std::path::PathBuf>,
    tier: Option<&TierCfg>,
) -> Node {
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let (dir, extra) = (dirs[0].clone(), dirs[1..].to_vec());
    let worker = Worker::start(
        WorkerConfig {
            listen: listen.into(),
            advertise: None,
            coordinator: coordinator.into(),
            memory: 64 << 20,
            data_dir: dir,
            extra_data_dirs: extra,
            object_store: tier.map(|t| t.url.clone()),
            disk_quota: tier.and_then(|t| t.disk_quota),
        },
        shutdown,
    )
    .await
    .unwrap();
    Node { worker, stop }
}

impl Cluster {
    async fn start(workers: usize, replication: u32) -> Cluster {
        Cluster::start_with(workers, replication, Durability::Memory).await
    }

    async fn start_with(workers: usize, replication: u32, durability: Durability) -> Cluster {
        Cluster::start_tiered(workers, replication, durability, None).await
    }

    async fn start_tiered(
        workers: usize,
        replication: u32,
        durability: Durability,
        tier: Option<TierCfg>,
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let mut cfg = CoordinatorConfig::new("127.0.0.1:0", dir.path().join("coordinator"));
        cfg.replication = replication;
        cfg.durability = durability;
        cfg.heartbeat = Duration::from_millis(50);
        let coordinator = Coordinator::start(cfg, shutdown).await.unwrap();
        let coord_addr = coordinator.addr.to_string();
        let mut nodes = Vec::new();
        for i in 0..workers {
            let dir = dir.path().join(format!("w{i}"));
            nodes.push(start_worker_on(&coord_addr, "127.0.0.1:0", vec![dir], tier.as_ref()).await);
        }
        for _ in 0..500 {
            if coordinator.state.lock().unwrap().counts().2 == workers as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(coordinator.state.lock().unwrap().counts().2, workers as u64);
        let coord = CoordinatorClient::connect(&coord_addr).await.unwrap();
        Cluster {
            coord,
            coord_addr,
            nodes,
            dir,
            tier,
            _stop: stop,
        }
    }

    fn node(&self, addr: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.worker.addr.to_string() == addr)
            .unwrap()
    }

    /// Stops the worker at `addr` and has the coordinator find out at once.
    async fn kill(&self, addr: &str) {
        self.node(addr).stop.send(true).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.coord.report_worker_failure(addr).await.unwrap();
    }

    async fn status(&self, app: &str) -> ShuffleStatus {
        self.coord.shuffle_status(app, 0).await.unwrap()
    }
}

fn payload(map: u32, partition: u32, attempt: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32 ^ map.wrapping_mul(31) ^ partition.wrapping_mul(7) ^ attempt) as u8)
        .collect()
}

async fn push_to(
    addr: &str,
    app: &str,
    partition: u32,
    map: u32,
    attempt: u32,
    data: &[u8],
) -> Result<(), ClientError> {
    let w = WorkerClient::connect(addr).await?;
    let h = PushHeader {
        app_id: app.into(),
        shuffle_id: 0,
        partition,
        map_id: map,
        attempt_id: attempt,
        batch_seq: 0,
        crc32c: checksum(data),
    };
    let p = w.push(&h, data).await?;
    w.finish_push(p).await
}

/// Pushes one batch of `map` to every partition's primary and commits it.
async fn run_map(
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
        stats.push(PartitionStat {
            partition: p,
            bytes: data.len() as u64,
            records: 1,
        });
    }
    c.coord.commit_map(app, 0, map, attempt, stats).await
}

async fn read_from(
    addr: &str,
    app: &str,
    partition: u32,
    maps: u32,
) -> Result<Vec<(u32, Bytes)>, ClientError> {
    let mut r = PartitionReader::new(
        addr,
        FetchRange {
            app_id: app.into(),
            shuffle_id: 0,
            partition,
            start_map: 0,
            end_map: maps,
        },
    )
    .with_max_resumes(0);
    let mut out = Vec::new();
    while let Some(b) = r.next_batch().await? {
        out.push((b.map_id, b.payload));
    }
    Ok(out)
}

fn expected(partition: u32, attempts: &[u32]) -> Vec<(u32, Bytes)> {
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

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_partition_survives_losing_its_primary() {
    let c = Cluster::start(3, 2).await;
    c.coord.register_app("r", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("r", 0, 2, 3).await.unwrap();
    for p in 0..3 {
        let (primary, replica) = (
            placement.worker_of(p).unwrap(),
            placement.replica_of(p).unwrap(),
        );
        assert_ne!(
            primary.id, replica.id,
            "partition {p}: replica on another worker"
        );
    }
    for m in 0..2 {
        assert_eq!(
            run_map(&c, &placement, "r", m, 0, 3).await.unwrap().0,
            CommitStatus::Committed
        );
    }
    // The replica holds exactly what the primary holds: the push was acknowledged only
    // once both had it, and the commit checked both.
    for p in 0..3 {
        let replica = &placement.replica_of(p).unwrap().addr;
        assert_eq!(
            read_from(replica, "r", p, 2).await.unwrap(),
            expected(p, &[0, 0])
        );
    }
    let victim = placement.worker_of(0).unwrap().addr.clone();
    c.kill(&victim).await;
    let status = c.status("r").await;
    assert_eq!(status.committed_maps, 2, "nothing had to be recomputed");
    for p in 0..3 {
        let primary = status.placement.worker_of(p).unwrap();
        assert_ne!(primary.addr, victim);
        assert_eq!(
            read_from(&primary.addr, "r", p, 2).await.unwrap(),
            expected(p, &[0, 0])
        );
    }
    assert_eq!(
        status.placement.partition_replicas[0], NO_WORKER,
        "partition 0 now has one copy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_only_copy_revokes_the_maps_and_their_rerun_is_read() {
    let c = Cluster::start(2, 1).await;
    c.coord.register_app("s", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("s", 0, 2, 2).await.unwrap();
    let victim = placement.worker_of(0).unwrap().addr.clone();
    let survivor = placement.worker_of(1).unwrap().addr.clone();
    assert_ne!(
        victim, survivor,
        "the two partitions are spread over the two workers"
    );
    for m in 0..2 {
        run_map(&c, &placement, "s", m, 0, 2).await.unwrap();
    }
    c.kill(&victim).await;
    let status = c.status("s").await;
    assert_eq!(
        status.map_attempts,
        vec![None, None],
        "both maps wrote into the lost partition"
    );
    assert_eq!(
        status.placement.worker_of(0).unwrap().addr,
        survivor,
        "partition 0 moved"
    );
    // Reading now would mix old and missing outputs: the worker refuses.
    let err = read_from(&survivor, "s", 1, 2).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::ShuffleNotComplete));
    // The engine reruns the maps; their new attempts are accepted and are what is read.
    let fresh = c.coord.register_shuffle("s", 0, 2, 2).await.unwrap();
    for m in 0..2 {
        assert_eq!(
            run_map(&c, &fresh, "s", m, 1, 2).await.unwrap(),
            (CommitStatus::Committed, 1)
        );
    }
    for p in 0..2 {
        assert_eq!(
            read_from(&survivor, "s", p, 2).await.unwrap(),
            expected(p, &[1, 1])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_fails_while_its_replica_is_down_and_succeeds_once_it_is_dropped() {
    let c = Cluster::start(2, 2).await;
    c.coord.register_app("f", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("f", 0, 1, 1).await.unwrap();
    let primary = placement.worker_of(0).unwrap().addr.clone();
    let replica = placement.replica_of(0).unwrap().addr.clone();
    c.node(&replica).stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let data = payload(0, 0, 0, 500);
    let err = push_to(&primary, "f", 0, 0, 0, &data).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::WorkerUnavailable), "{err}");
    // The primary reported its replica; the coordinator drops it from the partition and
    // tells the primary to stop forwarding.
    eventually("the replica is dropped", || async {
        c.status("f").await.placement.partition_replicas[0] == NO_WORKER
    })
    .await;
    eventually("the primary accepts pushes alone", || async {
        push_to(&primary, "f", 0, 0, 1, &data).await.is_ok()
    })
    .await;
    let stats = vec![PartitionStat {
        partition: 0,
        bytes: 500,
        records: 1,
    }];
    assert_eq!(
        c.coord.commit_map("f", 0, 0, 1, stats).await.unwrap().0,
        CommitStatus::Committed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_restarted_on_the_same_address_is_handled_as_lost() {
    let c = Cluster::start(2, 1).await;
    c.coord.register_app("x", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("x", 0, 1, 2).await.unwrap();
    run_map(&c, &placement, "x", 0, 0, 2).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    c.node(&addr).stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Back within the heartbeat deadline, with nothing of what it held in memory.
    let _again = start_worker(&c.coord_addr, &addr, c.dir.path().join("restarted")).await;
    eventually("the restart is noticed and the map revoked", || async {
        c.status("x").await.map_attempts == vec![None]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_file_is_detected_and_the_replica_serves_the_data() {
    let c = Cluster::start(2, 2).await;
    c.coord.register_app("k", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("k", 0, 1, 1).await.unwrap();
    run_map(&c, &placement, "k", 0, 0, 1).await.unwrap();
    let primary = placement.worker_of(0).unwrap().addr.clone();
    let node = c.node(&primary);
    node.worker.store.flush_all();
    let file = node.worker.store.root().join("k").join("0").join("0.data");
    eventually("the partition is on disk", || async {
        std::fs::metadata(&file)
            .map(|m| m.len() >= 1000)
            .unwrap_or(false)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let err = read_from(&primary, "k", 0, 1).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::CorruptData), "{err}");
    let replica = &placement.replica_of(0).unwrap().addr;
    assert_eq!(
        read_from(replica, "k", 0, 1).await.unwrap(),
        expected(0, &[0])
    );
    // The worker reported its copy before answering: the replica is the primary now.
    let status = c.status("k").await;
    assert_eq!(&status.placement.worker_of(0).unwrap().addr, replica);
    assert_eq!(status.map_attempts, vec![Some(0)], "nothing to recompute");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_only_copy_revokes_the_maps_that_wrote_into_it() {
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    c.coord.register_app("q", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("q", 0, 3, 2).await.unwrap();
    for m in 0..3 {
        run_map(&c, &placement, "q", m, 0, 2).await.unwrap();
    }
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let file = c.nodes[0]
        .worker
        .store
        .root()
        .join("q")
        .join("0")
        .join("0.data");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[30] ^= 0xff; // inside map 0's first payload
    std::fs::write(&file, bytes).unwrap();
    let err = read_from(&addr, "q", 0, 3).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::CorruptData), "{err}");
    // Every map that wrote into the partition is revoked, so the reader can name them
    // and the engine recomputes them; none is served from the damaged copy.
    let status = c.status("q").await;
    assert_eq!(status.map_attempts, vec![None, None, None]);
    assert_eq!(
        read_from(&addr, "q", 1, 3).await.unwrap_err().code(),
        Some(ErrorCode::ShuffleNotComplete)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_stage_replaces_a_map_and_older_attempts_cannot_return() {
    let c = Cluster::start(1, 1).await;
    c.coord.register_app("g", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("g", 0, 1, 1).await.unwrap();
    run_map(&c, &placement, "g", 0, 0, 1).await.unwrap();
    // Stage attempt 1 (the high 16 bits), task attempt 0: replaces attempt 0.
    let rerun = 1 << 16;
    assert_eq!(
        run_map(&c, &placement, "g", 0, rerun, 1).await.unwrap(),
        (CommitStatus::Committed, rerun)
    );
    let addr = &placement.worker_of(0).unwrap().addr;
    assert_eq!(
        read_from(addr, "g", 0, 1).await.unwrap(),
        expected(0, &[rerun])
    );
    let status = c.status("g").await;
    assert_eq!(
        status.partition_bytes,
        vec![1000],
        "the old attempt's bytes no longer count"
    );
    // A straggler of the first stage attempt is refused at the push.
    let err = push_to(addr, "g", 0, 0, 1, b"late").await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::PushAfterCommit));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_recovers_apps_shuffles_placements_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("coordinator");
    let start = |listen: String| {
        let state_dir = state_dir.clone();
        async move {
            let (stop, shutdown) = tokio::sync::watch::channel(false);
            let mut cfg = CoordinatorConfig::new(listen, state_dir);
            cfg.heartbeat = Duration::from_millis(50);
            cfg.replication = 2;
            (Coordinator::start(cfg, shutdown).await.unwrap(), stop)
        }
    };
    let (coord, stop) = start("127.0.0.1:0".into()).await;
    let addr = coord.addr.to_string();
    let nodes = [
        start_worker(&addr, "127.0.0.1:0", dir.path().join("w0")).await,
        start_worker(&addr, "127.0.0.1:0", dir.path().join("w1")).await,
    ];
    let client = CoordinatorClient::connect(&addr).await.unwrap();
    eventually("both workers registered", || async {
        coord.state.lock().unwrap().counts().2 == 2
    })
    .await;
    client.register_app("c", 60_000).await.unwrap();
    let placement = client.register_shuffle("c", 0, 2, 2).await.unwrap();
    let c = Cluster {
        coord: client,
        coord_addr: addr.clone(),
        nodes: Vec::new(),
        dir: tempfile::tempdir().unwrap(),
        tier: None,
        _stop: tokio::sync::watch::channel(false).0,
    };
    run_map(&c, &placement, "c", 0, 0, 2).await.unwrap();
    // The coordinator goes away (its connections with it) and comes back on the same
    // address with the same state directory.
    stop.send(true).unwrap();
    drop(coord);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (coord, _stop2) = start(addr.clone()).await;
    let status = c.status("c").await;
    assert_eq!(
        status.map_attempts,
        vec![Some(0), None],
        "the commit survived"
    );
    assert_eq!(status.placement, placement, "so did the placement");
    eventually("the workers registered again", || async {
        coord.state.lock().unwrap().counts().2 == 2
    })
    .await;
    // The job goes on: the second map commits (checked on both copies) and reads are whole.
    assert_eq!(
        run_map(&c, &placement, "c", 1, 0, 2).await.unwrap().0,
        CommitStatus::Committed
    );
    for p in 0..2 {
        let primary = &placement.worker_of(p).unwrap().addr;
        assert_eq!(
            read_from(primary, "c", p, 2).await.unwrap(),
            expected(p, &[0, 0])
        );
    }
    assert_eq!(
        run_map(&c, &placement, "c", 0, 1, 2)
            .await
            .unwrap_err()
            .code(),
        Some(ErrorCode::PushAfterCommit),
        "the workers still know map 0 committed"
    );
    drop(nodes);
}

/// Stops the worker at `addr` and starts a new process of it on the same address with
/// the same data directory, within the heartbeat deadline.
async fn restart_in_place(c: &Cluster, addr: &str) -> Node {
    let i = c
        .nodes
        .iter()
        .position(|n| n.worker.addr.to_string() == addr)
        .unwrap();
    c.nodes[i].stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let dir = c.dir.path().join(format!("w{i}"));
    start_worker_on(&c.coord_addr, addr, vec![dir], c.tier.as_ref()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_restarted_on_its_data_dir_serves_what_it_had_written_to_disk() {
    let c = Cluster::start_with(2, 1, Durability::Disk).await;
    c.coord.register_app("d", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("d", 0, 2, 2).await.unwrap();
    for m in 0..2 {
        // The commit answers only once both maps' batches are on disk and synced.
        run_map(&c, &placement, "d", m, 0, 2).await.unwrap();
    }
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let _again = restart_in_place(&c, &addr).await;
    // Until the coordinator checked its copies the restarted worker counts nothing as
    // committed, so a successful read means the check happened.
    eventually(
        "the restarted worker was checked and registered",
        || async {
            read_from(&addr, "d", 0, 2).await.is_ok()
                && c.status("d")
                    .await
                    .placement
                    .workers
                    .iter()
                    .all(|w| w.alive)
        },
    )
    .await;
    let status = c.status("d").await;
    assert_eq!(
        status.map_attempts,
        vec![Some(0), Some(0)],
        "nothing was revoked"
    );
    assert_eq!(status.placement, placement, "nothing moved");
    assert_eq!(
        read_from(&addr, "d", 0, 2).await.unwrap(),
        expected(0, &[0, 0])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_restarted_after_losing_data_held_in_memory_reports_it_lost() {
    let c = Cluster::start_with(2, 1, Durability::Memory).await;
    c.coord.register_app("e", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("e", 0, 1, 2).await.unwrap();
    run_map(&c, &placement, "e", 0, 0, 2).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let _again = restart_in_place(&c, &addr).await;
    // The batches were only in memory: the copy is incomplete and never served.
    eventually("the lost copy is handled", || async {
        c.status("e").await.map_attempts == vec![None]
    })
    .await;
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "mounting a tmpfs needs root (CI runs as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_a_full_disk_fails_commits_clearly_and_gets_no_new_partitions() {
    let disk = SmallDisk::mount("256k");
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    let full = start_worker(&c.coord_addr, "127.0.0.1:0", disk.dir.path().join("w")).await;
    let full_addr = full.worker.addr.to_string();
    eventually("the second worker registered", || async {
        c.coord.register_app("probe", 60_000).await.unwrap();
        let p = c.coord.register_shuffle("probe", 0, 1, 2).await.unwrap();
        p.workers.len() == 2
    })
    .await;
    c.coord.register_app("z", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("z", 0, 1, 2).await.unwrap();
    let p = (0..2)
        .find(|&p| placement.worker_of(p).unwrap().addr == full_addr)
        .expect("one partition on the small disk");
    // 1 MiB does not fit in 256 KiB: the commit (durability disk) fails, saying why.
    let data = vec![7u8; 1 << 20];
    push_to(&full_addr, "z", p, 0, 0, &data).await.unwrap();
    let stats = vec![PartitionStat {
        partition: p,
        bytes: data.len() as u64,
        records: 1,
    }];
    let err = c.coord.commit_map("z", 0, 0, 0, stats).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Io), "{err}");
    assert!(err.to_string().contains("disk full"), "{err}");
    // The worker says so in its heartbeats, and new shuffles avoid it.
    eventually("new placements avoid the full disk", || async {
        let q = c
            .coord
            .register_shuffle("z", 1 + rand_id(), 1, 4)
            .await
            .unwrap();
        q.workers.iter().all(|w| w.addr != full_addr)
    })
    .await;
    drop(full);
}

fn rand_id() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_spread_over_several_data_dirs_and_are_recovered_from_all() {
    let c = Cluster::start_with(0, 1, Durability::Disk).await;
    let dirs = vec![c.dir.path().join("disk-a"), c.dir.path().join("disk-b")];
    let w = start_worker_on(&c.coord_addr, "127.0.0.1:0", dirs.clone(), None).await;
    let addr = w.worker.addr.to_string();
    c.coord.register_app("m", 60_000).await.unwrap();
    let mut placement = None;
    for _ in 0..200 {
        if let Ok(p) = c.coord.register_shuffle("m", 0, 1, 4).await {
            placement = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let placement = placement.expect("the worker registered");
    run_map(&c, &placement, "m", 0, 0, 4).await.unwrap();
    for p in 0..4u32 {
        let file = dirs[p as usize % 2]
            .join("m")
            .join("0")
            .join(format!("{p}.data"));
        assert!(
            std::fs::metadata(&file)
                .map(|m| m.len() > 0)
                .unwrap_or(false),
            "{}",
            file.display()
        );
    }
    w.stop.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _again = start_worker_on(&c.coord_addr, &addr, dirs, None).await;
    eventually("recovered from both directories", || async {
        let mut all = true;
        for p in 0..4 {
            all &= read_from(&addr, "m", p, 1).await.ok() == Some(expected(p, &[0]));
        }
        all
    })
    .await;
    assert_eq!(c.status("m").await.map_attempts, vec![Some(0)]);
}

// ---- The object-store tier -------------------------------------------------------
//
// These run against a directory store (`file://`, what a mounted DFS looks like) and,
// when the test scripts started one (`CROSSDOCK_TEST_S3`), against a real S3 server.

/// The object stores to test against: a directory always, and the S3 server the test
/// scripts started, if any. With `CROSSDOCK_REQUIRE_S3` set (CI), a missing S3 server
/// fails the test instead of being skipped.
fn object_stores(dir: &std::path::Path) -> Vec<String> {
    let mut urls = vec![format!("file://{}", dir.join("store").display())];
    match std::env::var("CROSSDOCK_TEST_S3") {
        Ok(url) => urls.push(own_prefix(&url)),
        Err(_) if std::env::var_os("CROSSDOCK_REQUIRE_S3").is_some() => {
            panic!("CROSSDOCK_REQUIRE_S3 is set but no S3 server was started (CROSSDOCK_TEST_S3)")
        }
        Err(_) => {
            eprintln!("no S3 server (CROSSDOCK_TEST_S3 unset): testing the directory store only")
        }
    }
    urls
}

/// Gives an S3 URL a prefix of its own (`s3://bucket?endpoint=..` becomes
/// `s3://bucket/t<pid>-<nanos>?endpoint=..`), so runs never see each other's objects.
fn own_prefix(url: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{base}/t{}-{nanos}?{query}", std::process::id())
}

fn tiered(url: &str, disk_quota: Option<u64>) -> Option<TierCfg> {
    Some(TierCfg {
        url: url.to_string(),
        disk_quota,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_durability_object_store_losing_every_copy_recomputes_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    for url in object_stores(scratch.path()) {
        let c = Cluster::start_tiered(2, 1, Durability::ObjectStore, tiered(&url, None)).await;
        c.coord.register_app("o", 60_000).await.unwrap();
        let placement = c.coord.register_shuffle("o", 0, 3, 2).await.unwrap();
        let victim = placement.worker_of(0).unwrap().addr.clone();
        let survivor = placement.worker_of(1).unwrap().addr.clone();
        assert_ne!(victim, survivor);
        for m in 0..3 {
            // Answered only once the map's batches are uploaded.
            assert_eq!(
                run_map(&c, &placement, "o", m, 0, 2).await.unwrap().0,
                CommitStatus::Committed
            );
        }
        // Both partitions are in the store before anything is lost.
        let store = ObjectStore::open(&url).unwrap();
        for p in 0..2 {
            assert!(
                !store.segments("o", 0, p).await.unwrap().is_empty(),
                "{url}: {p}"
            );
        }
        c.kill(&victim).await;
        let status = c.status("o").await;
        assert_eq!(
            status.map_attempts,
            vec![Some(0), Some(0), Some(0)],
            "{url}: the lost partition was adopted from the object store; no map is rerun"
        );
        let moved = status.placement.worker_of(0).unwrap();
        assert_eq!(moved.addr, survivor, "{url}");
        for p in 0..2 {
            assert_eq!(
                read_from(&survivor, "o", p, 3).await.unwrap(),
                expected(p, &[0, 0, 0]),
                "{url}: partition {p}"
            );
        }
        let adopted = c
            .node(&survivor)
            .worker
            .metrics
            .adopted_bytes
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(adopted, 3 * 1000, "{url}: the three batches of partition 0");
        // Deleting the app deletes its segments.
        c.coord.unregister_app("o").await.unwrap();
        eventually("the app's segments are deleted", || async {
            store.segments("o", 0, 0).await.unwrap().is_empty()
                && store.segments("o", 0, 1).await.unwrap().is_empty()
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_whole_upload_a_lost_partition_still_revokes_its_maps() {
    // Durability memory: nothing was flushed, so nothing was uploaded. Adoption finds no
    // whole copy and the maps are rerun, never read partially.
    let scratch = tempfile::tempdir().unwrap();
    let url = format!("file://{}", scratch.path().join("store").display());
    let c = Cluster::start_tiered(2, 1, Durability::Memory, tiered(&url, None)).await;
    c.coord.register_app("q", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("q", 0, 2, 2).await.unwrap();
    for m in 0..2 {
        run_map(&c, &placement, "q", m, 0, 2).await.unwrap();
    }
    let victim = placement.worker_of(0).unwrap().addr.clone();
    c.kill(&victim).await;
    assert_eq!(c.status("q").await.map_attempts, vec![None, None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_its_disk_quota_a_worker_evicts_uploaded_files_and_serves_them_from_the_store() {
    use std::sync::atomic::Ordering::Relaxed;
    let scratch = tempfile::tempdir().unwrap();
    let stores = object_stores(scratch.path());
    // With `disk`, what a commit into a partly evicted file promises must be in the
    // store too: the restart below drops the local file.
    let runs = [Durability::ObjectStore, Durability::Disk]
        .into_iter()
        .flat_map(|d| stores.iter().map(move |u| (d, u.clone())));
    for (durability, url) in runs {
        // A store of its own per run.
        let url = &match durability {
            Durability::Disk if url.starts_with("file://") => format!("{url}-disk"),
            Durability::Disk => own_prefix(&url),
            _ => url,
        };
        // A quota of one byte: every wholly uploaded partition file is evicted.
        let c = Cluster::start_tiered(2, 1, durability, tiered(url, Some(1))).await;
        c.coord.register_app("v", 60_000).await.unwrap();
        let placement = c.coord.register_shuffle("v", 0, 2, 2).await.unwrap();
        for m in 0..2 {
            run_map(&c, &placement, "v", m, 0, 2).await.unwrap();
        }
        eventually("the partition files are evicted", || async {
            c.nodes
                .iter()
                .all(|n| n.worker.store.stored_bytes.load(Relaxed) == 0)
        })
        .await;
        for p in 0..2 {
            let addr = &placement.worker_of(p).unwrap().addr;
            assert_eq!(
                read_from(addr, "v", p, 2).await.unwrap(),
                expected(p, &[0, 0]),
                "{url}: partition {p} read from the object store"
            );
        }
        let read: u64 = c
            .nodes
            .iter()
            .map(|n| n.worker.metrics.object_read_bytes.load(Relaxed))
            .sum();
        assert!(read >= 4 * 1000, "{url}: {read} bytes read from the store");
        // A map of a rerun stage is written to local disk again (after the evicted
        // part), and the reader gets both tiers in one stream.
        run_map(&c, &placement, "v", 1, 1 << 16, 2).await.unwrap();
        for p in 0..2 {
            let addr = &placement.worker_of(p).unwrap().addr;
            assert_eq!(
                read_from(addr, "v", p, 2).await.unwrap(),
                expected(p, &[0, 1 << 16]),
                "{url}: partition {p} after the rerun"
            );
        }
        // A restarted worker cannot trust a partly evicted file and does not offer it:
        // the coordinator has the other worker adopt the partition from the store, and
        // nothing is recomputed.
        let addr = placement.worker_of(0).unwrap().addr.clone();
        let again = restart_in_place(&c, &addr).await;
        eventually("partition 0 is served again", || async {
            let s = c.status("v").await;
            match s.placement.worker_of(0) {
                Some(w) if s.placement.workers.iter().all(|w| w.alive) => {
                    read_from(&w.addr, "v", 0, 2).await.ok() == Some(expected(0, &[0, 1 << 16]))
                }
                _ => false,
            }
        })
        .await;
        assert_eq!(
            c.status("v").await.map_attempts,
            vec![Some(0), Some(1 << 16)],
            "{url}"
        );
        // Deleting the app frees what is left on disk, evicted bytes counted once.
        c.coord.unregister_app("v").await.unwrap();
        let other = c
            .nodes
            .iter()
            .find(|n| n.worker.addr.to_string() != addr)
            .unwrap();
        eventually("no bytes are left on disk", || async {
            [&again.worker, &other.worker]
                .iter()
                .all(|w| w.store.stored_bytes.load(Relaxed) == 0)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_to_the_object_store_fails_clearly_on_a_worker_without_one() {
    let c = Cluster::start_with(1, 1, Durability::ObjectStore).await;
    c.coord.register_app("n", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("n", 0, 1, 1).await.unwrap();
    let err = run_map(&c, &placement, "n", 0, 0, 1).await.unwrap_err();
    assert!(err.to_string().contains("--object-store"), "{err}");
    assert_eq!(c.status("n").await.map_attempts, vec![None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_to_start_with_an_unusable_object_store() {
    let dir = tempfile::tempdir().unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let cfg = |url: &str| WorkerConfig {
        listen: "127.0.0.1:0".into(),
        advertise: None,
        coordinator: "127.0.0.1:1".into(),
        memory: 64 << 20,
        data_dir: dir.path().join("w"),
        extra_data_dirs: Vec::new(),
        object_store: Some(url.into()),
        disk_quota: None,
    };
    let err = Worker::start(cfg("hdfs://nn/x"), shutdown.clone())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("not an object-store URL"), "{err}");
    // Nothing listens on port 1: the probe fails at start, not at the first commit.
    let err = Worker::start(cfg("s3://bucket?endpoint=http://127.0.0.1:1"), shutdown)
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("is not usable"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_commit_into_an_evicted_partition_waits_until_it_is_uploaded() {
    use std::sync::atomic::Ordering::Relaxed;
    // A restarted worker drops a partly evicted file, so a disk commit into it is only
    // durable once uploaded. The upload is held back by a directory standing where the
    // next segment goes; the commit must wait for it.
    let scratch = tempfile::tempdir().unwrap();
    let store = scratch.path().join("store");
    let url = format!("file://{}", store.display());
    let c = Cluster::start_tiered(1, 1, Durability::Disk, tiered(&url, Some(1))).await;
    c.coord.register_app("w", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("w", 0, 1, 1).await.unwrap();
    run_map(&c, &placement, "w", 0, 0, 1).await.unwrap();
    let worker = c.nodes[0].worker.clone();
    eventually("the partition file is evicted", || async {
        worker.store.stored_bytes.load(Relaxed) == 0
    })
    .await;
    let (_, part) = worker.store.partition("w", 0, 0).unwrap();
    let next = part.lock().file_written;
    let blocker = store.join(format!("w/0/0/{:016x}-{next:016x}.seg", worker.incarnation));
    std::fs::create_dir_all(&blocker).unwrap();
    let rerun = {
        let placement = placement.clone();
        let c = &c;
        async move { run_map(c, &placement, "w", 0, 1 << 16, 1).await }
    };
    tokio::pin!(rerun);
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), &mut rerun)
            .await
            .is_err(),
        "the commit waited for the upload"
    );
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(rerun.await.unwrap().0, CommitStatus::Committed);
    let st = part.lock();
    assert_eq!(
        st.uploaded_to, st.file_written,
        "the rerun's batches are uploaded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_object_store_a_full_disk_is_relieved_by_eviction() {
    // Four pages: shuffle.meta takes one, a partition file a page per 4 KiB (an evicted
    // file's tail is written again from where the eviction left it: sparse, but the page
    // under its first byte is taken anew).
    let disk = SmallDisk::mount("16k");
    let scratch = tempfile::tempdir().unwrap();
    let url = format!("file://{}", scratch.path().join("store").display());
    let c = Cluster::start_tiered(0, 1, Durability::ObjectStore, None).await;
    let tier = tiered(&url, None);
    let w = start_worker_on(
        &c.coord_addr,
        "127.0.0.1:0",
        vec![disk.dir.path().join("w")],
        tier.as_ref(),
    )
    .await;
    let addr = w.worker.addr.to_string();
    eventually("the worker registered", || async {
        c.coord.register_app("x", 60_000).await.is_ok()
            && c.coord.register_shuffle("x", 0, 6, 1).await.is_ok()
    })
    .await;
    // Six maps of 3 KiB each do not fit: the disk fills, uploaded files are evicted, and
    // every commit goes through.
    for m in 0..6u32 {
        let data = payload(m, 0, 0, 3 << 10);
        push_to(&addr, "x", 0, m, 0, &data).await.unwrap();
        let stats = vec![PartitionStat {
            partition: 0,
            bytes: data.len() as u64,
            records: 1,
        }];
        let r = tokio::time::timeout(
            Duration::from_secs(20),
            c.coord.commit_map("x", 0, m, 0, stats),
        )
        .await;
        assert!(
            matches!(r, Ok(Ok((CommitStatus::Committed, 0)))),
            "map {m}: {r:?}"
        );
    }
    let got = read_from(&addr, "x", 0, 6).await.unwrap();
    assert_eq!(got.len(), 6);
    for (m, (map, bytes)) in got.iter().enumerate() {
        assert_eq!(
            (*map, &bytes[..]),
            (m as u32, &payload(m as u32, 0, 0, 3 << 10)[..])
        );
    }
    assert!(
        w.worker
            .metrics
            .evicted_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    drop(w);
}
