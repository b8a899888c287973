//! What survives what: replication, losing workers, restarts, reruns, corruption, full
//! and several disks, with a real coordinator and real workers on loopback. "Killing" a
//! worker stops its listener and drops every connection it had, as the end of its
//! process would.

mod common;

use std::time::Duration;

use crossdock_client::{CoordinatorClient, Keyring};
use crossdock_proto::{AttemptId, CommitStatus, Durability, ErrorCode, NO_WORKER};
use crossdock_server::coordinator::{Coordinator, CoordinatorConfig};

use common::nodes::{
    expected, push_to, read_from, restart_in_place, run_map, start_worker, start_worker_on,
    Cluster, WorkerOpts,
};
use common::{attempts, eventually, payload, push_batch, rand_id, stat, SmallDisk};

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
        attempts(&status.map_attempts),
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
    common::until_closed(&replica).await;
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
    let stats = vec![stat(0, 500)];
    assert_eq!(
        c.coord
            .commit_map("f", 0, 0, AttemptId(1), stats)
            .await
            .unwrap()
            .0,
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
    common::until_closed(&addr).await;
    // Back within the heartbeat deadline, with nothing of what it held in memory.
    let _again = start_worker(&c.coord_addr, &addr, c.dir.path().join("restarted")).await;
    eventually("the restart is noticed and the map revoked", || async {
        attempts(&c.status("x").await.map_attempts) == vec![None]
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
    assert_eq!(
        attempts(&status.map_attempts),
        vec![Some(0)],
        "nothing to recompute"
    );
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
    assert_eq!(attempts(&status.map_attempts), vec![None, None, None]);
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
            cfg.secret = Some(common::secret());
            (Coordinator::start(cfg, shutdown).await.unwrap(), stop)
        }
    };
    let (coord, stop) = start("127.0.0.1:0".into()).await;
    let addr = coord.addr.to_string();
    let nodes = [
        start_worker(&addr, "127.0.0.1:0", dir.path().join("w0")).await,
        start_worker(&addr, "127.0.0.1:0", dir.path().join("w1")).await,
    ];
    let client = CoordinatorClient::connect(&addr, &Keyring::new())
        .await
        .unwrap();
    eventually("both workers registered", || async {
        coord.lock().counts().2 == 2
    })
    .await;
    client.register_app("c", 60_000).await.unwrap();
    let placement = client.register_shuffle("c", 0, 2, 2).await.unwrap();
    let c = Cluster {
        coord: client,
        coordinator: coord.clone(),
        coord_addr: addr.clone(),
        nodes: Vec::new(),
        dir: tempfile::tempdir().unwrap(),
        tier: None,
        stop: tokio::sync::watch::channel(false).0,
    };
    run_map(&c, &placement, "c", 0, 0, 2).await.unwrap();
    // The coordinator goes away (its connections with it) and comes back on the same
    // address with the same state directory.
    stop.send(true).unwrap();
    drop(coord);
    common::until_closed(&addr).await;
    let (coord, _stop2) = start(addr.clone()).await;
    let status = c.status("c").await;
    assert_eq!(
        attempts(&status.map_attempts),
        vec![Some(0), None],
        "the commit survived"
    );
    assert_eq!(status.placement, placement, "so did the placement");
    eventually("the workers registered again", || async {
        coord.lock().counts().2 == 2
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
        attempts(&status.map_attempts),
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
async fn a_worker_restarted_serves_a_partition_nobody_wrote_into_at_once() {
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    c.coord.register_app("y", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("y", 0, 1, 2).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    // The map writes into partition 0 only: partition 1 leaves no file to recover.
    let data = payload(0, 0, 0, 1000);
    push_to(&addr, "y", 0, 0, 0, &data).await.unwrap();
    let (status, _) = c
        .coord
        .commit_map("y", 0, 0, AttemptId(0), vec![stat(0, data.len())])
        .await
        .unwrap();
    assert_eq!(status, CommitStatus::Committed);
    let _again = restart_in_place(&c, &addr).await;
    // The restarted worker holds partition 1 whole (empty); the coordinator's resync after
    // the check must not turn it into a copy awaiting restoration (whose reads would wait
    // a minute and fail).
    eventually("the restarted worker serves both partitions", || async {
        let read = |p| tokio::time::timeout(Duration::from_secs(1), read_from(&addr, "y", p, 1));
        matches!(read(0).await, Ok(Ok(b)) if b == vec![(0, bytes::Bytes::from(data.clone()))])
            && matches!(read(1).await, Ok(Ok(b)) if b.is_empty())
    })
    .await;
    assert_eq!(attempts(&c.status("y").await.map_attempts), vec![Some(0)]);
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
        attempts(&c.status("e").await.map_attempts) == vec![None]
    })
    .await;
}

/// One memory-only worker of 16 MiB (14 MiB of push credit) with splits off.
async fn memory_only_cluster(durability: Durability) -> Cluster {
    let opts = WorkerOpts {
        split_bytes: 0,
        memory_only: true,
        hosts: &[],
    };
    let tenancy = crossdock_server::worker::config::Tenancy::default();
    Cluster::start_full(1, 1, durability, None, 16 << 20, tenancy, opts).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_only_worker_refuses_what_does_not_fit_and_keeps_what_it_took() {
    let c = memory_only_cluster(Durability::Memory).await;
    c.coord.register_app("x", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("x", 0, 1, 1).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let node = c.node(&addr);
    let budget = node.worker.store.budget.total();
    let mut taken = Vec::new();
    let refusal = loop {
        let data = payload(0, 0, taken.len() as u32, 256 << 10);
        match push_batch(&addr, "x", 0, (0, 0, taken.len() as u32), &data).await {
            Ok(()) => taken.push(data),
            Err(e) => break e,
        }
        assert!(taken.len() < 1000, "never refused");
    };
    assert_eq!(refusal.code(), Some(ErrorCode::LimitExceeded), "{refusal}");
    assert!(refusal.to_string().contains("memory exceeded"), "{refusal}");
    let held: u64 = taken.iter().map(|d| d.len() as u64).sum();
    assert!(
        held <= budget && held + (256 << 10) > budget,
        "{held} of {budget}"
    );
    assert!(node.worker.store.budget.peak() <= budget);
    // A retry of a batch it holds (its answer lost) is answered, though memory is spent.
    push_batch(&addr, "x", 0, (0, 0, 0), &taken[0])
        .await
        .unwrap();
    // Nothing went to disk; what was taken commits and reads back whole.
    let flushed = &node.worker.store.metrics().flushed_bytes;
    assert_eq!(flushed.load(std::sync::atomic::Ordering::Relaxed), 0);
    let (status, _) = c
        .coord
        .commit_map("x", 0, 0, AttemptId(0), vec![stat(0, held as usize)])
        .await
        .unwrap();
    assert_eq!(status, CommitStatus::Committed);
    let read = read_from(&addr, "x", 0, 1).await.unwrap();
    let want: Vec<(u32, bytes::Bytes)> = taken.into_iter().map(|d| (0, d.into())).collect();
    assert_eq!(read, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_only_worker_refuses_an_app_past_its_share_and_still_takes_the_others() {
    let opts = WorkerOpts {
        split_bytes: 0,
        memory_only: true,
        hosts: &[],
    };
    let tenancy = crossdock_server::worker::config::Tenancy {
        app_memory_share: 0.5,
        ..Default::default()
    };
    let c = Cluster::start_full(1, 1, Durability::Memory, None, 16 << 20, tenancy, opts).await;
    for app in ["big", "small"] {
        c.coord.register_app(app, 60_000).await.unwrap();
        c.coord.register_shuffle(app, 0, 1, 1).await.unwrap();
    }
    let addr = c.nodes[0].worker.addr.to_string();
    let share = c.nodes[0].worker.store.budget.limit_of("big");
    let mut held = 0u64;
    let refusal = loop {
        let data = payload(0, 0, 0, 256 << 10);
        let seq = (held / (256 << 10)) as u32;
        match push_batch(&addr, "big", 0, (0, 0, seq), &data).await {
            Ok(()) => held += data.len() as u64,
            Err(e) => break e,
        }
        assert!(held < 64 << 20, "never refused");
    };
    // Refused at its share, at once, naming the app; the worker has room for the other.
    assert_eq!(refusal.code(), Some(ErrorCode::LimitExceeded), "{refusal}");
    assert!(refusal.to_string().contains("app 'big'"), "{refusal}");
    assert!(
        held <= share && held + (256 << 10) > share,
        "{held} of {share}"
    );
    let data = payload(0, 0, 0, 256 << 10);
    push_batch(&addr, "small", 0, (0, 0, 0), &data)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_only_worker_refuses_a_commit_it_cannot_make_durable_on_disk() {
    let c = memory_only_cluster(Durability::Disk).await;
    c.coord.register_app("w", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("w", 0, 1, 1).await.unwrap();
    let err = run_map(&c, &placement, "w", 0, 0, 1).await.unwrap_err();
    assert!(err.to_string().contains("--durability memory"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_a_full_disk_fails_commits_clearly_and_gets_no_new_partitions() {
    let disk = SmallDisk::mount("256k");
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    let full = start_worker(&c.coord_addr, "127.0.0.1:0", disk.dir.path().join("w")).await;
    let full_addr = full.worker.addr.to_string();
    eventually("the second worker registered", || async {
        // A new app and shuffle each time: a shuffle registered again keeps its first
        // placement, and a new one of the same app and size, registered while an earlier
        // one is unfinished, takes that one's layout (a join's sides meet on one host), so
        // a probe made before the worker registered would keep every later one on one
        // worker.
        let app = format!("probe-{}", rand_id());
        c.coord.register_app(&app, 60_000).await.unwrap();
        let p = c.coord.register_shuffle(&app, 0, 1, 2).await.unwrap();
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
    let stats = vec![stat(p, data.len())];
    let err = c
        .coord
        .commit_map("z", 0, 0, AttemptId(0), stats)
        .await
        .unwrap_err();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_spread_over_several_data_dirs_and_are_recovered_from_all() {
    let c = Cluster::start_with(0, 1, Durability::Disk).await;
    let dirs = vec![c.dir.path().join("disk-a"), c.dir.path().join("disk-b")];
    let w = start_worker_on(&c.coord_addr, "127.0.0.1:0", dirs.clone(), None).await;
    let addr = w.worker.addr.to_string();
    c.coord.register_app("m", 60_000).await.unwrap();
    let placement = common::first_ok("the worker registered and a shuffle is placed", || {
        c.coord.register_shuffle("m", 0, 1, 4)
    })
    .await;
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
    common::until_closed(&addr).await;
    let _again = start_worker_on(&c.coord_addr, &addr, dirs, None).await;
    eventually("recovered from both directories", || async {
        let mut all = true;
        for p in 0..4 {
            all &= read_from(&addr, "m", p, 1).await.ok() == Some(expected(p, &[0]));
        }
        all
    })
    .await;
    assert_eq!(attempts(&c.status("m").await.map_attempts), vec![Some(0)]);
}
