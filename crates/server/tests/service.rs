//! End-to-end behaviour of a coordinator and workers on loopback, driven through the
//! Rust client library: pushes, commits, fetches, budgets, resumption, deletion.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::app_keys;
use crossdock_client::{CoordinatorClient, FetchRange, Keyring, PartitionReader, WorkerClient};
use crossdock_proto::{AttemptId, CommitStatus, ErrorCode};
use crossdock_server::coordinator::{Coordinator, CoordinatorConfig};
use crossdock_server::worker::{Worker, WorkerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use common::embedded::{assert_code, healthy_round_trip, push, read_all, Cluster};
use common::{attempts, header, payload, stat};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_commit_fetch_round_trip() {
    let c = Cluster::start(2, 64 << 20).await;
    healthy_round_trip(&c, "app-ok").await;
    let status = c.coord.shuffle_status("app-ok", 0).await.unwrap();
    assert!(status.is_complete());
    assert_eq!(attempts(&status.map_attempts), vec![Some(0), Some(0)]);
    assert_eq!(status.partition_bytes, vec![2000, 2002, 2004]);
    // Placement spreads the partitions over both workers.
    let mut used: Vec<u32> = status.placement.partition_workers.clone();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_storm_of_8x_the_budget_stays_within_it() {
    let memory = 32 << 20;
    let c = Cluster::start(1, memory).await;
    let app = "storm";
    let placement = Arc::new(c.shuffle(app, 8, 4).await);
    let worker = c.worker_for(&placement, 0);
    let budget = worker.store.budget.total();
    let batch = 1 << 20;
    let per_map = (8 * budget as usize) / 8; // 8 maps push 8x the push budget in total
    let batches = per_map / batch / 4;
    let mut tasks = Vec::new();
    for map in 0..8u32 {
        let placement = placement.clone();
        tasks.push(tokio::spawn(async move {
            let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr, &app_keys(app))
                .await
                .unwrap();
            let data = payload(map, 0, 0, batch);
            let mut pending = std::collections::VecDeque::new();
            for seq in 0..batches as u32 {
                for p in 0..4 {
                    pending.push_back(
                        w.push(&header(app, p, map, 0, seq, &data), &data)
                            .await
                            .unwrap(),
                    );
                    if pending.len() > 16 {
                        w.finish_push(pending.pop_front().unwrap()).await.unwrap();
                    }
                }
            }
            for p in pending {
                w.finish_push(p).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let pushed = worker
        .metrics
        .pushed_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        pushed >= 7 * budget,
        "the storm pushed {pushed} bytes, under 8x the {budget}-byte budget"
    );
    let peak = worker.store.budget.peak();
    assert!(
        peak <= budget,
        "peak buffered {peak} exceeded the budget {budget}"
    );
    assert!(
        peak >= budget / 4,
        "the storm should have filled the budget (peak {peak})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_first_committed_attempt_is_read_and_duplicates_are_dropped() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "dedupe";
    let placement = c.shuffle(app, 1, 1).await;
    let a0 = payload(0, 0, 0, 500);
    let a1 = payload(0, 0, 1, 700);
    push(&placement, app, 0, 0, 0, 0, &a0).await.unwrap();
    push(&placement, app, 0, 0, 1, 0, &a1).await.unwrap();
    // A retried push of the same batch is acknowledged and stored once.
    push(&placement, app, 0, 0, 1, 0, &a1).await.unwrap();
    let worker = c.worker_for(&placement, 0);
    assert_eq!(
        worker
            .metrics
            .duplicate_batches
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // Speculative attempt 1 commits first and wins.
    assert_eq!(
        c.coord
            .commit_map(app, 0, 0, AttemptId(1), vec![stat(0, 700)])
            .await
            .unwrap(),
        (CommitStatus::Committed, AttemptId(1))
    );
    assert_eq!(
        c.coord
            .commit_map(app, 0, 0, AttemptId(0), vec![stat(0, 500)])
            .await
            .unwrap(),
        (CommitStatus::Rejected, AttemptId(1))
    );
    assert_eq!(
        c.coord
            .commit_map(app, 0, 0, AttemptId(1), vec![stat(0, 700)])
            .await
            .unwrap(),
        (CommitStatus::AlreadyCommitted, AttemptId(1))
    );
    let got = read_all(&placement, app, 0, 0, 1).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].2[..], &a1[..]);
    let status = c.coord.shuffle_status(app, 0).await.unwrap();
    assert_eq!(status.partition_bytes, vec![700]);
}

/// Commits of a shuffle's maps run side by side; two attempts of each map racing to commit
/// still end with exactly one winner per map, whose bytes are counted and read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_commits_of_many_maps_leave_one_winner_per_map() {
    const MAPS: u32 = 24;
    let c = Cluster::start(2, 64 << 20).await;
    let app = "racing";
    let placement = c.shuffle(app, MAPS, 2).await;
    let len = |map: u32, attempt: u32| 100 + 10 * attempt as usize + map as usize;
    for m in 0..MAPS {
        for a in 0..2 {
            push(
                &placement,
                app,
                m % 2,
                m,
                a,
                0,
                &payload(m, m % 2, a, len(m, a)),
            )
            .await
            .unwrap();
        }
    }
    let addr = c.sa.coordinator.addr.to_string();
    let mut racers = Vec::new();
    for m in 0..MAPS {
        for a in 0..2 {
            let addr = addr.clone();
            racers.push(tokio::spawn(async move {
                let coord = CoordinatorClient::connect(&addr, &app_keys(app))
                    .await
                    .unwrap();
                let stats = vec![stat(m % 2, len(m, a))];
                let r = coord.commit_map(app, 0, m, AttemptId(a), stats).await;
                (m, a, r.unwrap())
            }));
        }
    }
    let mut winners = vec![None; MAPS as usize];
    let mut answers = vec![Vec::new(); MAPS as usize];
    for r in racers {
        let (m, a, answer) = r.await.unwrap();
        if answer.0 == CommitStatus::Committed {
            assert!(
                winners[m as usize].replace(a).is_none(),
                "map {m}: two winners"
            );
        }
        answers[m as usize].push(answer);
    }
    for m in 0..MAPS as usize {
        let w = winners[m].unwrap_or_else(|| panic!("map {m}: no attempt won"));
        let rejected = (CommitStatus::Rejected, AttemptId(w));
        assert!(answers[m].contains(&rejected), "map {m}: {:?}", answers[m]);
    }
    let status = c.coord.shuffle_status(app, 0).await.unwrap();
    assert_eq!(status.committed_maps, MAPS);
    let won: Vec<u32> = winners.iter().map(|w| w.unwrap()).collect();
    let want: Vec<Option<u32>> = won.iter().map(|&a| Some(a)).collect();
    assert_eq!(attempts(&status.map_attempts), want);
    for part in 0..2 {
        let maps: Vec<u32> = (0..MAPS).filter(|m| m % 2 == part).collect();
        let bytes: usize = maps.iter().map(|&m| len(m, won[m as usize])).sum();
        assert_eq!(status.partition_bytes[part as usize], bytes as u64);
        let got = read_all(&placement, app, part, 0, MAPS).await.unwrap();
        let want: Vec<(u32, u32, Bytes)> = maps
            .iter()
            .map(|&m| {
                let a = won[m as usize];
                (m, 0, Bytes::from(payload(m, part, a, len(m, a))))
            })
            .collect();
        assert_eq!(got, want, "partition {part}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_range_fetch_reads_only_its_maps_from_memory_and_disk() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "range";
    let placement = c.shuffle(app, 4, 1).await;
    let len = 10_000;
    for map in 0..4 {
        for seq in 0..3 {
            push(&placement, app, 0, map, 0, seq, &payload(map, 0, seq, len))
                .await
                .unwrap();
        }
    }
    for map in 0..4 {
        c.coord
            .commit_map(app, 0, map, AttemptId(0), vec![stat(0, 3 * len)])
            .await
            .unwrap();
    }
    let worker = c.worker_for(&placement, 0);
    let check = |got: Vec<(u32, u32, Bytes)>, maps: std::ops::Range<u32>| {
        let want: Vec<(u32, u32)> = maps.flat_map(|m| (0..3).map(move |s| (m, s))).collect();
        assert_eq!(got.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>(), want);
        for (m, s, d) in got {
            assert_eq!(&d[..], &payload(m, 0, s, len)[..]);
        }
    };
    let before = worker
        .metrics
        .fetched_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    check(read_all(&placement, app, 0, 1, 3).await.unwrap(), 1..3);
    let read = worker
        .metrics
        .fetched_bytes
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    assert_eq!(
        read,
        6 * len as u64,
        "a map-range read sends only that range's bytes"
    );
    // Written to disk, the same reads now come from the file.
    worker.store.flush_all();
    common::eventually("the completed shuffle is flushed to disk", || async {
        worker.store.budget.used() == 0
    })
    .await;
    check(read_all(&placement, app, 0, 1, 3).await.unwrap(), 1..3);
    check(read_all(&placement, app, 0, 0, 4).await.unwrap(), 0..4);
    check(read_all(&placement, app, 0, 3, 4).await.unwrap(), 3..4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_fetch_resumes_without_loss_or_duplicates() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "resume";
    let placement = c.shuffle(app, 2, 1).await;
    // Enough batches to span several chunks of the stream.
    let len = 1 << 20;
    for map in 0..2 {
        for seq in 0..6 {
            push(&placement, app, 0, map, 0, seq, &payload(map, 0, seq, len))
                .await
                .unwrap();
        }
        c.coord
            .commit_map(app, 0, map, AttemptId(0), vec![stat(0, 6 * len)])
            .await
            .unwrap();
    }
    let addr = &placement.worker_of(0).unwrap().addr;
    let mut r = PartitionReader::new(
        addr,
        FetchRange {
            app_id: app.into(),
            shuffle_id: 0,
            partition: 0,
            start_map: 0,
            end_map: 2,
        },
        &app_keys(app),
    );
    let mut got = Vec::new();
    while let Some(b) = r.next_batch().await.unwrap() {
        got.push((b.map_id, b.batch_seq));
        assert_eq!(&b.payload[..], &payload(b.map_id, 0, b.batch_seq, len)[..]);
        if got.len() == 5 {
            r.drop_connection();
        }
    }
    let want: Vec<(u32, u32)> = (0..2).flat_map(|m| (0..6).map(move |s| (m, s))).collect();
    assert_eq!(got, want);
    assert_eq!(r.resumes, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_maps_and_empty_partitions_and_many_partitions() {
    let c = Cluster::start(2, 64 << 20).await;
    let app = "empty";
    let placement = c.shuffle(app, 3, 2500).await;
    assert_eq!(placement.partition_workers.len(), 2500);
    let d = payload(1, 17, 0, 50);
    push(&placement, app, 17, 1, 0, 0, &d).await.unwrap();
    for map in 0..3 {
        let stats = if map == 1 { vec![stat(17, 50)] } else { vec![] };
        c.coord
            .commit_map(app, 0, map, AttemptId(0), stats)
            .await
            .unwrap();
    }
    assert!(read_all(&placement, app, 0, 0, 3).await.unwrap().is_empty());
    assert_eq!(read_all(&placement, app, 17, 0, 3).await.unwrap().len(), 1);
    assert!(read_all(&placement, app, 2499, 0, 3)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unregister_deletes_data_on_the_workers() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "gone";
    let placement = c.shuffle(app, 1, 1).await;
    push(&placement, app, 0, 0, 0, 0, &payload(0, 0, 0, 100))
        .await
        .unwrap();
    c.coord
        .commit_map(app, 0, 0, AttemptId(0), vec![stat(0, 100)])
        .await
        .unwrap();
    let worker = c.worker_for(&placement, 0);
    let app_dir = worker.store.root().join(app);
    assert!(app_dir.join("0").exists());
    worker.store.flush_all();
    let stored = || worker.store.stored_bytes();
    common::eventually("the flush is stored", || async { stored() > 0 }).await;
    assert_eq!(stored(), 100 + 24, "one record: header and payload");
    c.coord.unregister_shuffle(app, 0).await.unwrap();
    assert_eq!(stored(), 0, "deleted bytes no longer count as stored");
    assert!(!app_dir.join("0").exists(), "shuffle directory deleted");
    assert_code(
        read_all(&placement, app, 0, 0, 1).await,
        ErrorCode::UnknownApp,
    );
    assert_eq!(worker.store.budget.used(), 0);
    c.coord.register_shuffle(app, 1, 1, 1).await.unwrap();
    c.coord.unregister_app(app).await.unwrap();
    assert!(!app_dir.exists(), "app directory deleted");
    assert_code(c.coord.renew_lease(app).await, ErrorCode::UnknownApp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_cleans_up_the_app_everywhere() {
    let c = Cluster::start(1, 64 << 20).await;
    // "brief" must outlive its shuffle's registration and first push, each of which waits
    // on the coordinator's journal sync (seconds on a loaded CI disk), and then expire;
    // "kept" is renewed all along and must not.
    c.coord.register_app("brief", 3000).await.unwrap();
    let placement = c.coord.register_shuffle("brief", 0, 1, 1).await.unwrap();
    push(&placement, "brief", 0, 0, 0, 0, &payload(0, 0, 0, 10))
        .await
        .unwrap();
    let dir = c.sa.workers[0].store.root().join("brief");
    assert!(dir.exists());
    c.coord.register_app("kept", 10_000).await.unwrap();
    let (coord, brief_dir) = (&c.coord, &dir);
    common::eventually("the expired app's data is deleted", || async move {
        coord.renew_lease("kept").await.unwrap();
        !brief_dir.exists()
    })
    .await;
    assert_code(
        c.coord.shuffle_status("brief", 0).await,
        ErrorCode::UnknownApp,
    );
    assert_code(
        push(&placement, "brief", 0, 0, 0, 1, b"x").await,
        ErrorCode::UnknownApp,
    );
    c.coord.renew_lease("kept").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_workers_and_lost_workers_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let mut cfg = CoordinatorConfig::new("127.0.0.1:0", dir.path().join("c"));
    cfg.worker_timeout = Duration::from_millis(300);
    cfg.heartbeat = Duration::from_millis(50);
    cfg.secret = Some(common::secret());
    let coord = Coordinator::start(cfg, shutdown).await.unwrap();
    let client = CoordinatorClient::connect(&coord.addr.to_string(), &Keyring::new())
        .await
        .unwrap();
    client.register_app("a", 60_000).await.unwrap();
    assert_code(
        client.register_shuffle("a", 0, 1, 1).await,
        ErrorCode::NoWorkers,
    );
    let (stop_worker, worker_shutdown) = tokio::sync::watch::channel(false);
    let w = Worker::start(
        WorkerConfig {
            listen: "127.0.0.1:0".into(),
            advertise: None,
            host: String::new(),
            zone: String::new(),
            coordinator: coord.addr.to_string(),
            memory: 32 << 20,
            data_dir: dir.path().join("w"),
            extra_data_dirs: Vec::new(),
            object_store: None,
            disk_quota: None,
            limits: Default::default(),
            secret: Some(common::secret()),
            tls: None,
            tenancy: Default::default(),
            split_bytes: crossdock_server::worker::config::DEFAULT_SPLIT_BYTES,
            memory_only: false,
            zero_copy_fetch: true,
        },
        worker_shutdown,
    )
    .await
    .unwrap();
    let placement = common::first_ok("the worker registered and a shuffle is placed", || {
        client.register_shuffle("a", 0, 1, 1)
    })
    .await;
    assert_eq!(placement.workers[0].addr, w.addr.to_string());
    stop_worker.send(true).unwrap();
    common::eventually("the silent worker is marked lost", || async {
        !client
            .shuffle_status("a", 0)
            .await
            .unwrap()
            .placement
            .workers[0]
            .alive
    })
    .await;
    assert_code(
        client.register_shuffle("a", 1, 1, 1).await,
        ErrorCode::NoWorkers,
    );
}

/// A loopback proxy to `target` that cuts the first connection after relaying
/// `cut_after` bytes of the response, and relays later connections in full.
async fn cutting_proxy(target: String, cut_after: usize) -> String {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut first = true;
        loop {
            let (client, _) = listener.accept().await.unwrap();
            let server = TcpStream::connect(&target).await.unwrap();
            let limit = if first { Some(cut_after) } else { None };
            first = false;
            tokio::spawn(async move {
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                tokio::spawn(async move { tokio::io::copy(&mut cr, &mut sw).await });
                let mut buf = vec![0u8; 64 << 10];
                let mut sent = 0;
                loop {
                    let n = match sr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let n = match limit {
                        Some(l) if sent + n >= l => {
                            let _ = cw.write_all(&buf[..l - sent]).await;
                            break; // drop both halves: the connection breaks mid-frame
                        }
                        _ => n,
                    };
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    sent += n;
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_cut_by_the_network_resumes_after_its_last_batch() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "cut";
    let placement = c.shuffle(app, 3, 1).await;
    let len = 700_000;
    for map in 0..3 {
        for seq in 0..4 {
            push(&placement, app, 0, map, 0, seq, &payload(map, 0, seq, len))
                .await
                .unwrap();
        }
        c.coord
            .commit_map(app, 0, map, AttemptId(0), vec![stat(0, 4 * len)])
            .await
            .unwrap();
    }
    // Cut inside the second chunk (chunks hold up to 4 MiB: 5 batches here).
    let proxy = cutting_proxy(
        placement.worker_of(0).unwrap().addr.clone(),
        5 * len + len / 2,
    )
    .await;
    let mut r = PartitionReader::new(
        &proxy,
        FetchRange {
            app_id: app.into(),
            shuffle_id: 0,
            partition: 0,
            start_map: 0,
            end_map: 3,
        },
        &app_keys(app),
    );
    let mut got = Vec::new();
    while let Some(b) = r.next_batch().await.unwrap() {
        assert_eq!(&b.payload[..], &payload(b.map_id, 0, b.batch_seq, len)[..]);
        got.push((b.map_id, b.batch_seq));
    }
    let want: Vec<(u32, u32)> = (0..3).flat_map(|m| (0..4).map(move |s| (m, s))).collect();
    assert_eq!(got, want, "every batch once, in order");
    assert_eq!(r.resumes, 1, "the cut stream was resumed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_map_of_several_sorted_runs_is_committed_and_read_run_by_run() {
    use crossdock_proto::{Appended, MapRunStart, Message, RunStart};
    let c = Cluster::start(1, 64 << 20).await;
    let app = "runs";
    let placement = c.shuffle(app, 2, 2).await;
    let len = 1000;
    for seq in 0..5 {
        push(&placement, app, 1, 0, 0, seq, &payload(0, 1, seq, len))
            .await
            .unwrap();
    }
    let commit = |runs: Vec<RunStart>| Message::CommitMap {
        app_id: app.into(),
        shuffle_id: 0,
        map_id: 0,
        attempt_id: AttemptId(0),
        partitions: vec![stat(1, 5 * len)],
        run_starts: Appended(Some(runs)),
    };
    let run = |batch_seq| RunStart {
        partition: 1,
        batch_seq,
    };
    // Run starts that could not be read are refused, and the map is not committed.
    let refused = c.coord.call(&commit(vec![run(3), run(2)])).await;
    assert_code(refused, ErrorCode::InvalidArgument);
    let status = c.coord.shuffle_status(app, 0).await.unwrap();
    assert_eq!(attempts(&status.map_attempts), vec![None, None]);
    // Map 0 pushed three runs: batches 0-1, 2 and 3-4.
    let answer = c.coord.call(&commit(vec![run(2), run(3)])).await.unwrap();
    assert!(matches!(answer, Message::CommitResult { .. }), "{answer:?}");
    let status = |from, to| Message::GetShuffleStatus {
        app_id: app.into(),
        shuffle_id: 0,
        runs_from: Appended::of(from),
        runs_to: Appended::of(to),
    };
    let Message::ShuffleStatus {
        run_count,
        run_starts,
        ..
    } = c.coord.call(&status(1, 2)).await.unwrap()
    else {
        panic!("not a status")
    };
    let at = |batch_seq| MapRunStart {
        partition: 1,
        map_id: 0,
        batch_seq,
    };
    assert_eq!(run_count.value(), 2);
    assert_eq!(run_starts.0.unwrap(), vec![at(2), at(3)]);
    let Message::ShuffleStatus { run_starts, .. } = c.coord.call(&status(0, 1)).await.unwrap()
    else {
        panic!("not a status")
    };
    assert_eq!(run_starts.0.unwrap(), vec![], "partition 0 has no runs");
    // Each run is read alone: from its first batch to the next run's.
    let addr = &placement.worker_of(1).unwrap().addr;
    let keys = app_keys(app);
    let reader = || {
        PartitionReader::new(
            addr,
            FetchRange {
                app_id: app.into(),
                shuffle_id: 0,
                partition: 1,
                start_map: 0,
                end_map: 1,
            },
            &keys,
        )
    };
    for (start, end, want) in [(0, 2, vec![0, 1]), (2, 3, vec![2]), (3, 0, vec![3, 4])] {
        // Read as the attempt whose commit listed the starts: the one committed.
        let mut r = reader().run(start, end).expecting(AttemptId(0));
        let mut got = Vec::new();
        while let Some(b) = r.next_batch().await.unwrap() {
            assert_eq!(&b.payload[..], &payload(0, 1, b.batch_seq, len)[..]);
            got.push(b.batch_seq);
        }
        assert_eq!(got, want, "the run from batch {start}");
    }
    // Run starts of another attempt (a reader that planned before a rerun replaced the
    // map's output): refused, never this attempt's batches cut at the other's starts.
    let mut stale = reader()
        .run(2, 3)
        .expecting(AttemptId::new(1, 0))
        .with_max_resumes(0);
    let refused = stale.next_batch().await;
    let message = format!("{:?}", refused.as_ref().map(|_| ()));
    assert!(
        message.contains("map 0's committed output is attempt 0, not attempt 65536"),
        "{message}"
    );
    assert_code(refused, ErrorCode::CommitMismatch);
}
