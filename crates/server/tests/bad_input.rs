//! Bad input from clients: corrupt, cut, oversize and unknown frames, unknown ids,
//! pushes and commits that do not fit. Each gets a clear error, and the service goes on
//! serving well-behaved clients.

mod common;

use common::app_keys;
use crossdock_client::{CoordinatorClient, Keyring, RpcConnection, WorkerClient};
use crossdock_proto::{Appended, AttemptId, CommitStatus, ErrorCode, FrameHeader, Message};

use common::embedded::{
    assert_code, assert_error_frame, healthy_round_trip, push, raw_exchange, read_all, Cluster,
};
use common::{header, payload, stat};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_checksum_is_rejected_and_the_connection_stays_usable() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "crc";
    let placement = c.shuffle(app, 1, 1).await;
    let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr, &app_keys(app))
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
        .commit_map(app, 0, 0, AttemptId(0), vec![stat(0, 4096)])
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
    let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr, &app_keys("known"))
        .await
        .unwrap();
    let mut h = header("known", 0, 0, 0, 0, &d);
    h.shuffle_id = 9;
    let p = w.push(&h, &d).await.unwrap();
    assert_code(w.finish_push(p).await, ErrorCode::UnknownShuffle);
    let p = w.push(&header("known", 5, 0, 0, 0, &d), &d).await.unwrap();
    assert_code(w.finish_push(p).await, ErrorCode::UnknownPartition);
    // A client with the stranger's token (any other is refused as unauthorized).
    let coord_addr = c.sa.coordinator.addr.to_string();
    let stranger = CoordinatorClient::connect(&coord_addr, &app_keys("stranger"))
        .await
        .unwrap();
    assert_code(
        c.coord.renew_lease("stranger").await,
        ErrorCode::Unauthorized,
    );
    assert_code(
        stranger
            .commit_map("stranger", 0, 0, AttemptId(0), vec![])
            .await,
        ErrorCode::UnknownApp,
    );
    assert_code(
        c.coord.shuffle_status("known", 9).await,
        ErrorCode::UnknownShuffle,
    );
    assert_code(
        stranger.register_shuffle("stranger", 0, 1, 1).await,
        ErrorCode::UnknownApp,
    );
    assert_code(
        stranger.renew_lease("stranger").await,
        ErrorCode::UnknownApp,
    );
    healthy_round_trip(&c, "neighbour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_batch_and_oversize_frame_are_refused() {
    let c = Cluster::start(1, 64 << 20).await;
    let placement = c.shuffle("big", 1, 1).await;
    let worker = c.worker_for(&placement, 0);
    let big = vec![1u8; worker.store.max_batch as usize + 1];
    let w = WorkerClient::connect(&placement.worker_of(0).unwrap().addr, &app_keys("big"))
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
        sample_inputs: Appended(None),
        sample_counts: Appended(None),
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
    // A worker-only message sent to the coordinator: refused unauthenticated, and
    // not taken from the cluster either.
    let frame = Message::GetWorkerStats.encode_frame(2);
    assert_error_frame(
        raw_exchange(&coord_addr, &frame).await,
        ErrorCode::Unauthorized,
    );
    let cluster = RpcConnection::connect(&coord_addr, &Keyring::cluster(Some(common::secret())))
        .await
        .unwrap();
    assert_code(
        cluster.call(&Message::GetWorkerStats).await,
        ErrorCode::UnknownMessageKind,
    );
    healthy_round_trip(&c, "version-neighbour").await;
}

/// Pushes 100 bytes of map 0 to partition 0 and commits them; returns the payload.
async fn commit_map_0(c: &Cluster, placement: &crossdock_client::Placement, app: &str) -> Vec<u8> {
    let d = payload(0, 0, 0, 100);
    push(placement, app, 0, 0, 0, 0, &d).await.unwrap();
    c.coord
        .commit_map(app, 0, 0, AttemptId(0), vec![stat(0, 100)])
        .await
        .unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_after_commit_is_refused() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "late";
    let placement = c.shuffle(app, 1, 1).await;
    let d = commit_map_0(&c, &placement, app).await;
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
        c.coord.commit_map(app, 0, 2, AttemptId(0), vec![]).await,
        ErrorCode::UnknownMap,
    );
    assert_code(
        c.coord
            .commit_map(app, 0, 0, AttemptId(0), vec![stat(7, 1)])
            .await,
        ErrorCode::InvalidArgument,
    );
    let d = payload(0, 1, 0, 300);
    push(&placement, app, 1, 0, 0, 0, &d).await.unwrap();
    // The map claims more bytes than the worker received: a lost batch is caught.
    assert_code(
        c.coord
            .commit_map(app, 0, 0, AttemptId(0), vec![stat(1, 600)])
            .await,
        ErrorCode::CommitMismatch,
    );
    // It also claims nothing for partition 0 while... (nothing was pushed there: fine).
    let status = c.coord.shuffle_status(app, 0).await.unwrap();
    assert_eq!(status.committed_maps, 0, "a refused commit does not count");
    // A retry of the map (new attempt) pushes and commits normally.
    push(&placement, app, 1, 0, 1, 0, &d).await.unwrap();
    assert_eq!(
        c.coord
            .commit_map(app, 0, 0, AttemptId(1), vec![stat(1, 300)])
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
    commit_map_0(&c, &placement, app).await;
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
async fn a_reader_that_stops_reading_is_cut_after_the_read_timeout() {
    let limits = crossdock_server::limits::ConnLimits {
        read_timeout: std::time::Duration::from_secs(1),
        ..Default::default()
    };
    let c = Cluster::start_with_limits(1, 256 << 20, limits).await;
    let app = "stops-reading";
    let placement = c.shuffle(app, 1, 1).await;
    let addr = placement.worker_of(0).unwrap().addr.clone();
    // 32 MiB: far more than the socket buffers and the reader's own buffer hold.
    let data = payload(0, 0, 0, 1 << 20);
    for seq in 0..32 {
        push(&placement, app, 0, 0, 0, seq, &data).await.unwrap();
    }
    c.coord
        .commit_map(app, 0, 0, AttemptId(0), vec![stat(0, 32 << 20)])
        .await
        .unwrap();
    let worker = c.worker_for(&placement, 0);
    let mut r = common::reader(&addr, app, 0, 0, 1).with_max_resumes(0);
    assert!(
        r.next_batch().await.unwrap().is_some(),
        "the stream started"
    );
    let timeouts = worker.gate.counts().2;
    // The reader stops taking bytes: the worker's writes stall, and after the read
    // timeout it drops the stream and closes the connection (counted as a timeout).
    common::eventually("the worker cut the stalled stream", || async {
        worker.gate.counts().2 > timeouts
    })
    .await;
    // What the reader gets now is what was already on its way, then a broken stream.
    let mut batches = 1;
    let err = loop {
        match r.next_batch().await {
            Ok(Some(_)) => batches += 1,
            Ok(None) => panic!("the whole partition arrived ({batches} batches)"),
            Err(e) => break e,
        }
    };
    assert!(batches < 32, "{batches} batches, then {err}");
    healthy_round_trip(&c, "stops-reading-neighbour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_check_naming_slots_past_the_split_limit_creates_nothing() {
    let c = Cluster::start(1, 64 << 20).await;
    let app = "slots";
    let placement = c.shuffle(app, 1, 2).await;
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let cluster = RpcConnection::connect(&addr, &Keyring::cluster(Some(common::secret())))
        .await
        .unwrap();
    let limit = crossdock_proto::slot_limit(2);
    // An empty slot is held whole when it may exist (a split nobody wrote into), never
    // past the limit; and nothing is created there to push into.
    let check = Message::CheckCopies {
        app_id: app.into(),
        shuffle_id: 0,
        map_attempts: vec![AttemptId::NONE],
        partitions: vec![5, limit, u32::MAX],
        expected_bytes: vec![0, 0, 0],
        adopt: false,
    };
    match cluster.call(&check).await.unwrap() {
        Message::CopiesHeld { partitions } => assert_eq!(partitions, vec![5]),
        other => panic!("{other:?}"),
    }
    let d = b"x".to_vec();
    assert_code(
        common::push_batch(&addr, app, limit, (0, 0, 0), &d).await,
        ErrorCode::UnknownPartition,
    );
    healthy_round_trip(&c, "slots-neighbour").await;
}
