//! End-to-end behaviour of a coordinator and workers on loopback, driven through the
//! Rust client library and, for malformed input, through raw frames.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crossdock_client::{
    ClientError, CoordinatorClient, FetchRange, PartitionReader, Placement, WorkerClient,
};
use crossdock_proto::io::{read_exact_bytes, read_header};
use crossdock_proto::{
    checksum, CommitStatus, ErrorCode, FrameHeader, Message, PartitionStat, PushHeader,
};
use crossdock_server::coordinator::{Coordinator, CoordinatorConfig};
use crossdock_server::standalone::{Standalone, StandaloneConfig};
use crossdock_server::worker::{Worker, WorkerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

struct Cluster {
    sa: Standalone,
    coord: CoordinatorClient,
    _stop: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    async fn start(workers: u32, memory: u64) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let sa = Standalone::start(
            StandaloneConfig {
                listen: "127.0.0.1:0".into(),
                workers,
                memory,
                data_dir: dir.path().to_path_buf(),
                worker_timeout: Duration::from_secs(10),
                replication: 1,
                durability: crossdock_proto::Durability::Memory,
                object_store: None,
                disk_quota: None,
            },
            shutdown,
        )
        .await
        .unwrap();
        let coord = CoordinatorClient::connect(&sa.coordinator.addr.to_string())
            .await
            .unwrap();
        Cluster {
            sa,
            coord,
            _stop: stop,
            _dir: dir,
        }
    }

    async fn shuffle(&self, app: &str, maps: u32, partitions: u32) -> Placement {
        self.coord.register_app(app, 60_000).await.unwrap();
        self.coord
            .register_shuffle(app, 0, maps, partitions)
            .await
            .unwrap()
    }

    fn worker_for(&self, placement: &Placement, partition: u32) -> Arc<Worker> {
        let addr = &placement.worker_of(partition).unwrap().addr;
        self.sa
            .workers
            .iter()
            .find(|w| &w.addr.to_string() == addr)
            .unwrap()
            .clone()
    }
}

fn header(
    app: &str,
    partition: u32,
    map: u32,
    attempt: u32,
    seq: u32,
    payload: &[u8],
) -> PushHeader {
    PushHeader {
        app_id: app.into(),
        shuffle_id: 0,
        partition,
        map_id: map,
        attempt_id: attempt,
        batch_seq: seq,
        crc32c: checksum(payload),
    }
}

fn payload(map: u32, partition: u32, seq: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32 ^ map.wrapping_mul(31) ^ partition.wrapping_mul(7) ^ seq) as u8)
        .collect()
}

async fn push(
    placement: &Placement,
    app: &str,
    partition: u32,
    map: u32,
    attempt: u32,
    seq: u32,
    data: &[u8],
) -> Result<(), ClientError> {
    let w = WorkerClient::connect(&placement.worker_of(partition).unwrap().addr).await?;
    let p = w
        .push(&header(app, partition, map, attempt, seq, data), data)
        .await?;
    w.finish_push(p).await
}

async fn read_all(
    placement: &Placement,
    app: &str,
    partition: u32,
    start: u32,
    end: u32,
) -> Result<Vec<(u32, u32, Bytes)>, ClientError> {
    let addr = &placement.worker_of(partition).unwrap().addr;
    let mut r = PartitionReader::new(
        addr,
        FetchRange {
            app_id: app.into(),
            shuffle_id: 0,
            partition,
            start_map: start,
            end_map: end,
        },
    );
    let mut out = Vec::new();
    while let Some(b) = r.next_batch().await? {
        out.push((b.map_id, b.batch_seq, b.payload));
    }
    Ok(out)
}

fn stat(partition: u32, bytes: usize) -> PartitionStat {
    PartitionStat {
        partition,
        bytes: bytes as u64,
        records: 1,
    }
}

/// Sends raw bytes to `addr` and reads one response frame.
async fn raw_exchange(addr: &str, bytes: &[u8]) -> Option<(FrameHeader, Message)> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let h = read_header(&mut s).await.ok()??;
    let body = read_exact_bytes(&mut s, h.body_len as usize).await.ok()?;
    Some((h, Message::decode(h.kind, body).unwrap()))
}

fn assert_code<T: std::fmt::Debug>(r: Result<T, ClientError>, code: ErrorCode) {
    match r {
        Err(e) => assert_eq!(e.code(), Some(code), "wrong error: {e}"),
        Ok(v) => panic!("expected {code}, got Ok({v:?})"),
    }
}

fn assert_error_frame(reply: Option<(FrameHeader, Message)>, code: ErrorCode) {
    match reply {
        Some((_, Message::Error { code: c, message })) => {
            assert_eq!(c, code.as_u16(), "{message}");
            assert!(!message.is_empty());
        }
        other => panic!("expected an error frame {code}, got {other:?}"),
    }
}

/// A full, healthy shuffle; used to show the service is unharmed after bad input.
async fn healthy_round_trip(c: &Cluster, app: &str) {
    let placement = c.shuffle(app, 2, 3).await;
    for map in 0..2 {
        let mut stats = Vec::new();
        for p in 0..3 {
            let d = payload(map, p, 0, 1000 + p as usize);
            push(&placement, app, p, map, 0, 0, &d).await.unwrap();
            stats.push(stat(p, d.len()));
        }
        c.coord.commit_map(app, 0, map, 0, stats).await.unwrap();
    }
    for p in 0..3 {
        let got = read_all(&placement, app, p, 0, 2).await.unwrap();
        assert_eq!(got.len(), 2);
        for (map, seq, data) in got {
            assert_eq!(&data[..], &payload(map, p, seq, 1000 + p as usize)[..]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_commit_fetch_round_trip() {
    let c = Cluster::start(2, 64 << 20).await;
    healthy_round_trip(&c, "app-ok").await;
    let status = c.coord.shuffle_status("app-ok", 0).await.unwrap();
    assert!(status.is_complete());
    assert_eq!(status.map_attempts, vec![Some(0), Some(0)]);
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
            let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr)
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
            .commit_map(app, 0, 0, 1, vec![stat(0, 700)])
            .await
            .unwrap(),
        (CommitStatus::Committed, 1)
    );
    assert_eq!(
        c.coord
            .commit_map(app, 0, 0, 0, vec![stat(0, 500)])
            .await
            .unwrap(),
        (CommitStatus::Rejected, 1)
    );
    assert_eq!(
        c.coord
            .commit_map(app, 0, 0, 1, vec![stat(0, 700)])
            .await
            .unwrap(),
        (CommitStatus::AlreadyCommitted, 1)
    );
    let got = read_all(&placement, app, 0, 0, 1).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].2[..], &a1[..]);
    let status = c.coord.shuffle_status(app, 0).await.unwrap();
    assert_eq!(status.partition_bytes, vec![700]);
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
            .commit_map(app, 0, map, 0, vec![stat(0, 3 * len)])
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
    for _ in 0..200 {
        if worker.store.budget.used() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        worker.store.budget.used(),
        0,
        "completed shuffle was flushed to disk"
    );
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
            .commit_map(app, 0, map, 0, vec![stat(0, 6 * len)])
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
async fn bad_checksum_is_rejected_and_the_connection_stays_usable() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "crc";
    let placement = c.shuffle(app, 1, 1).await;
    let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr)
        .await
        .unwrap();
    let data = payload(0, 0, 0, 4096);
    let mut h = header(app, 0, 0, 0, 0, &data);
    h.crc32c ^= 1;
    let p = w.push(&h, &data).await.unwrap();
    assert_code(w.finish_push(p).await, ErrorCode::BadChecksum);
    // Nothing was stored; the same connection accepts the good batch.
    let p = w
        .push(&header(app, 0, 0, 0, 0, &data), &data)
        .await
        .unwrap();
    w.finish_push(p).await.unwrap();
    c.coord
        .commit_map(app, 0, 0, 0, vec![stat(0, 4096)])
        .await
        .unwrap();
    assert_eq!(read_all(&placement, app, 0, 0, 1).await.unwrap().len(), 1);
    healthy_round_trip(&c, "crc-neighbour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_app_shuffle_and_partition_are_named() {
    let c = Cluster::start(1, 64 << 20).await;
    let placement = c.shuffle("known", 1, 2).await;
    let d = b"x".to_vec();
    assert_code(
        push(&placement, "stranger", 0, 0, 0, 0, &d).await,
        ErrorCode::UnknownApp,
    );
    let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr)
        .await
        .unwrap();
    let mut h = header("known", 0, 0, 0, 0, &d);
    h.shuffle_id = 9;
    let p = w.push(&h, &d).await.unwrap();
    assert_code(w.finish_push(p).await, ErrorCode::UnknownShuffle);
    let p = w.push(&header("known", 5, 0, 0, 0, &d), &d).await.unwrap();
    assert_code(w.finish_push(p).await, ErrorCode::UnknownPartition);
    assert_code(
        c.coord.commit_map("stranger", 0, 0, 0, vec![]).await,
        ErrorCode::UnknownApp,
    );
    assert_code(
        c.coord.shuffle_status("known", 9).await,
        ErrorCode::UnknownShuffle,
    );
    assert_code(
        c.coord.register_shuffle("stranger", 0, 1, 1).await,
        ErrorCode::UnknownApp,
    );
    assert_code(c.coord.renew_lease("stranger").await, ErrorCode::UnknownApp);
    healthy_round_trip(&c, "neighbour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_batch_and_oversize_frame_are_refused() {
    let c = Cluster::start(1, 64 << 20).await;
    let placement = c.shuffle("big", 1, 1).await;
    let worker = c.worker_for(&placement, 0);
    let big = vec![1u8; worker.store.max_batch as usize + 1];
    let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr)
        .await
        .unwrap();
    let p = w
        .push(&header("big", 0, 0, 0, 0, &big), &big)
        .await
        .unwrap();
    assert_code(w.finish_push(p).await, ErrorCode::BatchTooLarge);
    // The connection skipped the refused payload and still works.
    let ok = vec![2u8; 100];
    let p = w.push(&header("big", 0, 0, 0, 0, &ok), &ok).await.unwrap();
    w.finish_push(p).await.unwrap();
    // A control frame claiming 1 GiB is refused before anything is read.
    let frame = FrameHeader::new(Message::GetWorkerStats.kind() as u8, 3, 1 << 30).encode();
    let coord_addr = c.sa.coordinator.addr.to_string();
    assert_error_frame(
        raw_exchange(&coord_addr, &frame).await,
        ErrorCode::FrameTooLarge,
    );
    assert_error_frame(
        raw_exchange(&worker.addr.to_string(), &frame).await,
        ErrorCode::FrameTooLarge,
    );
    healthy_round_trip(&c, "big-neighbour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_frames_get_a_truncation_error() {
    let c = Cluster::start(1, 64 << 20).await;
    let placement = c.shuffle("trunc", 1, 1).await;
    // RegisterShuffle whose length covers only part of its fields.
    let mut frame = Message::RegisterShuffle {
        app_id: "trunc".into(),
        shuffle_id: 1,
        num_maps: 1,
        num_partitions: 1,
    }
    .encode_frame(4);
    frame.truncate(frame.len() - 6);
    let len = (frame.len() - 4) as u32;
    frame[0..4].copy_from_slice(&len.to_be_bytes());
    assert_error_frame(
        raw_exchange(&c.sa.coordinator.addr.to_string(), &frame).await,
        ErrorCode::TruncatedFrame,
    );
    // A push whose frame ends inside the push header.
    let mut push = Vec::new();
    push.extend_from_slice(&FrameHeader::new(Message::Ok.kind() as u8 + 0x3f, 5, 10).encode());
    push.extend_from_slice(&[0, 5, b't', b'r', b'u', b'n', b'c', 0, 0, 0]);
    assert_eq!(push[5], 0x40, "kind is PushBatch");
    assert_error_frame(
        raw_exchange(&placement.worker_of(0).unwrap().addr, &push).await,
        ErrorCode::TruncatedFrame,
    );
    healthy_round_trip(&c, "trunc-neighbour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_version_and_unknown_kind_are_refused() {
    let c = Cluster::start(1, 64 << 20).await;
    let coord_addr = c.sa.coordinator.addr.to_string();
    let mut frame = Message::RenewLease { app_id: "a".into() }.encode_frame(8);
    frame[4] = 9;
    let reply = raw_exchange(&coord_addr, &frame).await;
    assert_eq!(reply.as_ref().unwrap().0.request_id, 8);
    assert_error_frame(reply, ErrorCode::UnsupportedVersion);
    let worker_addr = c.sa.workers[0].addr.to_string();
    assert_error_frame(
        raw_exchange(&worker_addr, &frame).await,
        ErrorCode::UnsupportedVersion,
    );
    let mut frame = Message::RenewLease { app_id: "a".into() }.encode_frame(8);
    frame[5] = 0x7e;
    assert_error_frame(
        raw_exchange(&coord_addr, &frame).await,
        ErrorCode::UnknownMessageKind,
    );
    // A worker-only message sent to the coordinator.
    let frame = Message::GetWorkerStats.encode_frame(2);
    assert_error_frame(
        raw_exchange(&coord_addr, &frame).await,
        ErrorCode::UnknownMessageKind,
    );
    healthy_round_trip(&c, "version-neighbour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_after_commit_is_refused() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "late";
    let placement = c.shuffle(app, 1, 1).await;
    let d = payload(0, 0, 0, 100);
    push(&placement, app, 0, 0, 0, 0, &d).await.unwrap();
    c.coord
        .commit_map(app, 0, 0, 0, vec![stat(0, 100)])
        .await
        .unwrap();
    assert_code(
        push(&placement, app, 0, 0, 0, 1, &d).await,
        ErrorCode::PushAfterCommit,
    );
    assert_code(
        push(&placement, app, 0, 0, 1, 0, &d).await,
        ErrorCode::PushAfterCommit,
    );
    assert_eq!(read_all(&placement, app, 0, 0, 1).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_of_unknown_map_or_wrong_sizes_is_refused() {
    let c = Cluster::start(2, 64 << 20).await;
    let app = "commits";
    let placement = c.shuffle(app, 2, 2).await;
    assert_code(
        c.coord.commit_map(app, 0, 2, 0, vec![]).await,
        ErrorCode::UnknownMap,
    );
    assert_code(
        c.coord.commit_map(app, 0, 0, 0, vec![stat(7, 1)]).await,
        ErrorCode::InvalidArgument,
    );
    let d = payload(0, 1, 0, 300);
    push(&placement, app, 1, 0, 0, 0, &d).await.unwrap();
    // The map claims more bytes than the worker received: a lost batch is caught.
    assert_code(
        c.coord.commit_map(app, 0, 0, 0, vec![stat(1, 600)]).await,
        ErrorCode::CommitMismatch,
    );
    // It also claims nothing for partition 0 while... (nothing was pushed there: fine).
    let status = c.coord.shuffle_status(app, 0).await.unwrap();
    assert_eq!(status.committed_maps, 0, "a refused commit does not count");
    // A retry of the map (new attempt) pushes and commits normally.
    push(&placement, app, 1, 0, 1, 0, &d).await.unwrap();
    assert_eq!(
        c.coord
            .commit_map(app, 0, 0, 1, vec![stat(1, 300)])
            .await
            .unwrap()
            .0,
        CommitStatus::Committed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_before_the_maps_committed_is_refused() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "early";
    let placement = c.shuffle(app, 2, 1).await;
    let d = payload(0, 0, 0, 100);
    push(&placement, app, 0, 0, 0, 0, &d).await.unwrap();
    c.coord
        .commit_map(app, 0, 0, 0, vec![stat(0, 100)])
        .await
        .unwrap();
    assert_code(
        read_all(&placement, app, 0, 0, 2).await,
        ErrorCode::ShuffleNotComplete,
    );
    // The committed map alone can be read.
    assert_eq!(read_all(&placement, app, 0, 0, 1).await.unwrap().len(), 1);
    assert_code(
        read_all(&placement, app, 0, 1, 1).await,
        ErrorCode::InvalidArgument,
    );
    assert_code(
        read_all(&placement, app, 0, 0, 3).await,
        ErrorCode::InvalidArgument,
    );
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
        c.coord.commit_map(app, 0, map, 0, stats).await.unwrap();
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
        .commit_map(app, 0, 0, 0, vec![stat(0, 100)])
        .await
        .unwrap();
    let worker = c.worker_for(&placement, 0);
    let app_dir = worker.store.root().join(app);
    assert!(app_dir.join("0").exists());
    worker.store.flush_all();
    let stored = || {
        worker
            .store
            .stored_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    for _ in 0..200 {
        if stored() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
    // Leases long enough that a loaded machine does not let "kept" expire between
    // renewals, short enough to keep the test quick.
    c.coord.register_app("brief", 600).await.unwrap();
    let placement = c.coord.register_shuffle("brief", 0, 1, 1).await.unwrap();
    push(&placement, "brief", 0, 0, 0, 0, &payload(0, 0, 0, 10))
        .await
        .unwrap();
    let dir = c.sa.workers[0].store.root().join("brief");
    assert!(dir.exists());
    c.coord.register_app("kept", 3000).await.unwrap();
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.coord.renew_lease("kept").await.unwrap();
    }
    assert!(!dir.exists(), "expired app's data deleted");
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
    let coord = Coordinator::start(cfg, shutdown).await.unwrap();
    let client = CoordinatorClient::connect(&coord.addr.to_string())
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
            coordinator: coord.addr.to_string(),
            memory: 32 << 20,
            data_dir: dir.path().join("w"),
            extra_data_dirs: Vec::new(),
            object_store: None,
            disk_quota: None,
        },
        worker_shutdown,
    )
    .await
    .unwrap();
    let mut placement = None;
    for _ in 0..100 {
        if let Ok(p) = client.register_shuffle("a", 0, 1, 1).await {
            placement = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let placement = placement.expect("shuffle placed once the worker registered");
    assert_eq!(placement.workers[0].addr, w.addr.to_string());
    stop_worker.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let status = client.shuffle_status("a", 0).await.unwrap();
    assert!(
        !status.placement.workers[0].alive,
        "silent worker marked lost"
    );
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
            .commit_map(app, 0, map, 0, vec![stat(0, 4 * len)])
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
