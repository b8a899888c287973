//! Zero-copy fetches (`FetchRecords`): a reader that takes stored records gets the
//! batches on disk as the worker stores them, sent from the page cache with `sendfile`
//! and unread by the worker, and checks each record itself; a record that fails the
//! reader's checks sends it back to the worker's checked read, which finds the damage
//! and reports the copy as it always did. Real coordinator and workers on loopback.

mod common;

use std::sync::atomic::Ordering;

use bytes::Bytes;
use crossdock_client::{ClientError, PartitionReader};
use crossdock_proto::{AttemptId, Durability, ErrorCode};

use common::nodes::{expected, run_map, Cluster};
use common::{attempts, reader};

/// Reads maps `[0, maps)` of `partition` of app `app` from `addr`, taking stored
/// records checked against the committed attempts `map_attempts`. Returns what was
/// read (or the error) and the reader, for its counts.
async fn read_records(
    addr: &str,
    app: &str,
    partition: u32,
    maps: u32,
    map_attempts: Vec<Option<AttemptId>>,
) -> (Result<Vec<(u32, Bytes)>, ClientError>, PartitionReader) {
    let mut r = reader(addr, app, partition, 0, maps)
        .with_max_resumes(0)
        .accepting_records(map_attempts);
    let mut out = Vec::new();
    loop {
        match r.next_batch().await {
            Ok(Some(b)) => out.push((b.map_id, b.payload)),
            Ok(None) => return (Ok(out), r),
            Err(e) => return (Err(e), r),
        }
    }
}

/// A one-worker cluster with disk commits (every committed batch is in its partition
/// file, read from there) and `maps` maps committed into `partitions` partitions of
/// app `app`. Returns the cluster, the worker's address and the committed attempts.
async fn committed_on_disk(
    app: &str,
    maps: u32,
    partitions: u32,
) -> (Cluster, String, Vec<Option<AttemptId>>) {
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    c.coord.register_app(app, 60_000).await.unwrap();
    let placement = c
        .coord
        .register_shuffle(app, 0, maps, partitions)
        .await
        .unwrap();
    for m in 0..maps {
        run_map(&c, &placement, app, m, 0, partitions)
            .await
            .unwrap();
    }
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let map_attempts = c.status(app).await.map_attempts;
    (c, addr, map_attempts)
}

/// The partition file of partition `p` of shuffle 0 of `app` on the cluster's worker.
fn partition_file(c: &Cluster, app: &str, p: u32) -> std::path::PathBuf {
    c.nodes[0]
        .worker
        .store
        .root()
        .join(app)
        .join("0")
        .join(format!("{p}.data"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_on_disk_are_sent_as_stored_records_from_the_file_and_read_exactly() {
    let (c, addr, map_attempts) = committed_on_disk("z", 3, 2).await;
    let sent = &c.nodes[0].worker.metrics.zero_copy_bytes;
    for p in 0..2 {
        let before = sent.load(Ordering::Relaxed);
        let (read, r) = read_records(&addr, "z", p, 3, map_attempts.clone()).await;
        assert_eq!(read.unwrap(), expected(p, &[0, 0, 0]));
        assert_eq!(r.stored_records, 3, "every batch came as a stored record");
        assert_eq!(r.record_fallbacks, 0);
        // Each record whole from the file: its 24-byte header and its payload.
        let record = 24 + 1000 + p as u64;
        assert_eq!(sent.load(Ordering::Relaxed) - before, 3 * record);
    }
    // A resumed read starts after its resume point, from the middle of the file.
    let r = reader(&addr, "z", 1, 1, 3).accepting_records(map_attempts);
    let batches = common::read_batches(r).await.unwrap();
    let maps: Vec<u32> = batches.iter().map(|b| b.0).collect();
    assert_eq!(maps, vec![1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_does_not_ask_for_records_gets_checked_chunks() {
    let (c, addr, _) = committed_on_disk("n", 2, 1).await;
    let mut r = reader(&addr, "n", 0, 0, 2);
    let mut read = Vec::new();
    while let Some(b) = r.next_batch().await.unwrap() {
        read.push((b.map_id, b.payload));
    }
    assert_eq!(read, expected(0, &[0, 0]));
    assert_eq!(r.stored_records, 0);
    let sent = c.nodes[0]
        .worker
        .metrics
        .zero_copy_bytes
        .load(Ordering::Relaxed);
    assert_eq!(sent, 0, "nothing was sent unread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_in_memory_come_as_records_too() {
    let c = Cluster::start(1, 1).await;
    c.coord.register_app("m", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("m", 0, 2, 1).await.unwrap();
    for m in 0..2 {
        run_map(&c, &placement, "m", m, 0, 1).await.unwrap();
    }
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let map_attempts = c.status("m").await.map_attempts;
    let (read, r) = read_records(&addr, "m", 0, 2, map_attempts).await;
    assert_eq!(read.unwrap(), expected(0, &[0, 0]));
    assert_eq!(
        r.stored_records, 2,
        "headers written for batches held in memory"
    );
    let sent = c.nodes[0]
        .worker
        .metrics
        .zero_copy_bytes
        .load(Ordering::Relaxed);
    assert_eq!(sent, 0, "nothing was in a file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_payload_fails_the_readers_check_and_the_worker_reports_its_copy() {
    let (c, addr, map_attempts) = committed_on_disk("d", 3, 1).await;
    let file = partition_file(&c, "d", 0);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[1024 + 30] ^= 0xff; // inside map 1's payload: map 0's record is 1024 bytes
    std::fs::write(&file, bytes).unwrap();
    let (read, r) = read_records(&addr, "d", 0, 3, map_attempts).await;
    let err = read.unwrap_err();
    assert_eq!(r.record_fallbacks, 1, "asked again without records once");
    assert_eq!(r.stored_records, 1, "map 0's record was good and kept");
    assert_eq!(err.code(), Some(ErrorCode::CorruptData), "{err}");
    // The worker's checked read reported the copy: the maps that wrote into it are
    // revoked, so the engine recomputes them.
    let status = c.status("d").await;
    assert_eq!(attempts(&status.map_attempts), vec![None, None, None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_another_attempt_is_refused_though_its_crc_matches() {
    let (c, addr, map_attempts) = committed_on_disk("a", 3, 1).await;
    let file = partition_file(&c, "a", 0);
    let mut bytes = std::fs::read(&file).unwrap();
    // Map 1's header names attempt 7: its payload and CRC are untouched.
    bytes[1024 + 8..1024 + 12].copy_from_slice(&7u32.to_be_bytes());
    std::fs::write(&file, bytes).unwrap();
    let (read, r) = read_records(&addr, "a", 0, 3, map_attempts).await;
    let err = read.unwrap_err();
    assert_eq!(r.record_fallbacks, 1);
    assert_eq!(err.code(), Some(ErrorCode::CorruptData), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_without_the_committed_attempts_refuses_every_record() {
    // A reader told of no commit for map 1 (e.g. one reading an older status) does not
    // take its records on trust: it falls back to the checked read, which serves it.
    let (_c, addr, mut map_attempts) = committed_on_disk("s", 2, 1).await;
    map_attempts[1] = None;
    let (read, r) = read_records(&addr, "s", 0, 2, map_attempts).await;
    assert_eq!(read.unwrap(), expected(0, &[0, 0]));
    assert_eq!((r.stored_records, r.record_fallbacks), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_zero_copy_off_the_worker_reads_and_checks_every_batch() {
    let c = common::embedded::Cluster::start_configured(
        1,
        64 << 20,
        crossdock_client::Keyring::new(),
        |cfg| {
            cfg.durability = Durability::Disk;
            cfg.zero_copy_fetch = false;
        },
    )
    .await;
    let placement = c.shuffle("o", 1, 1).await;
    let data = common::payload(0, 0, 0, 4000);
    common::embedded::push(&placement, "o", 0, 0, 0, 0, &data)
        .await
        .unwrap();
    c.coord
        .commit_map("o", 0, 0, AttemptId(0), vec![common::stat(0, data.len())])
        .await
        .unwrap();
    let map_attempts = c.coord.shuffle_status("o", 0).await.unwrap().map_attempts;
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let (read, r) = read_records(&addr, "o", 0, 1, map_attempts).await;
    assert_eq!(read.unwrap(), vec![(0, Bytes::from(data))]);
    assert_eq!(r.stored_records, 0, "the worker sent checked chunks only");
    let w = c.worker_for(&placement, 0);
    assert_eq!(w.metrics.zero_copy_bytes.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_sequence_number_cannot_make_the_reader_skip_batches() {
    // Map 0 pushes three batches; the first record's header says seq 1 instead of 0. Its
    // CRC (of the payload) still matches, so the reader takes it; the real seq 1 then
    // looks out of order. Resuming after the damaged "seq 1" would skip the real one
    // silently: the reader must ask again from where the stream began, so the worker's
    // checked read meets the damaged header and reports the copy.
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    c.coord.register_app("q", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("q", 0, 1, 1).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let mut total = 0;
    for seq in 0..3 {
        let data = common::payload(0, 0, seq, 500);
        total += data.len();
        common::push_batch(&addr, "q", 0, (0, 0, seq), &data)
            .await
            .unwrap();
    }
    let stats = vec![crossdock_proto::PartitionStat {
        partition: 0,
        bytes: total as u64,
        records: 3,
    }];
    c.coord
        .commit_map("q", 0, 0, AttemptId(0), stats)
        .await
        .unwrap();
    let file = partition_file(&c, "q", 0);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[12..16].copy_from_slice(&1u32.to_be_bytes()); // the first record's batch_seq
    std::fs::write(&file, bytes).unwrap();
    let map_attempts = c.status("q").await.map_attempts;
    let (read, r) = read_records(&addr, "q", 0, 1, map_attempts).await;
    let err = read.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::CorruptData), "{err}");
    assert_eq!(r.record_fallbacks, 1);
    let status = c.status("q").await;
    assert_eq!(
        attempts(&status.map_attempts),
        vec![None],
        "the copy was reported"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_larger_than_the_socket_buffers_streams_whole_without_a_fallback() {
    // 48 MiB on disk: the socket's buffers fill (the reader waits before it reads), so the
    // worker waits for room between sendfile calls many times; a lost wake-up would stall
    // the stream until the write timeout and end in a fallback.
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    c.coord.register_app("big", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("big", 0, 1, 1).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let batches = 48u32;
    let client = crossdock_client::WorkerClient::connect(&addr, &common::app_keys("big"))
        .await
        .unwrap();
    let mut total = 0;
    for seq in 0..batches {
        let data = common::payload(0, 0, seq, 1 << 20);
        total += data.len();
        let p = client
            .push(&common::header("big", 0, 0, 0, seq, &data), &data)
            .await
            .unwrap();
        client.finish_push(p).await.unwrap();
    }
    let stats = vec![crossdock_proto::PartitionStat {
        partition: 0,
        bytes: total as u64,
        records: batches as u64,
    }];
    c.coord
        .commit_map("big", 0, 0, AttemptId(0), stats)
        .await
        .unwrap();
    let map_attempts = c.status("big").await.map_attempts;
    let mut r = reader(&addr, "big", 0, 0, 1)
        .with_max_resumes(0)
        .accepting_records(map_attempts);
    let read = async {
        let mut seq = 0;
        while let Some(b) = r.next_batch().await.unwrap() {
            if seq == 0 {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            assert_eq!((b.map_id, b.batch_seq), (0, seq));
            assert_eq!(b.payload[..], common::payload(0, 0, seq, 1 << 20)[..]);
            seq += 1;
        }
        seq
    };
    let n = tokio::time::timeout(std::time::Duration::from_secs(30), read)
        .await
        .expect("the stream never stalls");
    assert_eq!(n, batches);
    assert_eq!((r.stored_records, r.record_fallbacks), (batches as u64, 0));
    let sent = c.nodes[0]
        .worker
        .metrics
        .zero_copy_bytes
        .load(Ordering::Relaxed);
    assert_eq!(sent, batches as u64 * (24 + (1 << 20)));
}
