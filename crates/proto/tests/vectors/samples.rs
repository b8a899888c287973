//! The messages the shared vectors are made of (`vectors.rs` writes and checks them):
//! one or more frames of every kind, and the invalid frames with the error each must get.

use bytes::Bytes;
use crossdock_proto::*;

fn workers() -> Vec<WorkerInfo> {
    vec![
        WorkerInfo {
            id: 0,
            addr: "127.0.0.1:7001".into(),
            alive: true,
            host: "127.0.0.1".into(),
            zone: String::new(),
        },
        WorkerInfo {
            id: 1,
            addr: "10.0.0.2:7001".into(),
            alive: false,
            host: "node-2.example".into(),
            zone: "eu-west-1b".into(),
        },
    ]
}

fn attempts(raw: &[u32]) -> Vec<AttemptId> {
    raw.iter().map(|&a| AttemptId(a)).collect()
}

pub fn samples() -> Vec<(&'static str, u64, Message)> {
    let payload = Bytes::from_static(b"crossdock");
    vec![
        ("ok", 1, Message::Ok),
        (
            "error",
            2,
            Message::error(ErrorCode::BadChecksum, "crc mismatch"),
        ),
        (
            "register_app",
            3,
            Message::RegisterApp {
                app_id: "app-1".into(),
                lease_ms: 60_000,
                stored_quota: Appended::of(200 << 30),
                memory_share_ppm: Appended::of(250_000),
            },
        ),
        (
            "renew_lease",
            4,
            Message::RenewLease {
                app_id: "app-1".into(),
            },
        ),
        (
            "unregister_app",
            5,
            Message::UnregisterApp {
                app_id: "app-1".into(),
            },
        ),
        (
            "register_shuffle",
            6,
            Message::RegisterShuffle {
                app_id: "app-1".into(),
                shuffle_id: 7,
                num_maps: 3,
                num_partitions: 4,
                sample_inputs: Appended(None),
                sample_counts: Appended(None),
            },
        ),
        (
            "register_shuffle_with_sample_inputs_only",
            6,
            Message::RegisterShuffle {
                app_id: "app-1".into(),
                shuffle_id: 9,
                num_maps: 1,
                num_partitions: 2,
                sample_inputs: Appended(Some(vec![InputSample {
                    records: 0,
                    sampled: 0,
                }])),
                sample_counts: Appended(None),
            },
        ),
        (
            "register_shuffle_with_range_sample",
            6,
            Message::RegisterShuffle {
                app_id: "app-1".into(),
                shuffle_id: 8,
                num_maps: 2,
                num_partitions: 3,
                sample_inputs: Appended(Some(vec![
                    InputSample {
                        records: 1000,
                        sampled: 9,
                    },
                    InputSample {
                        records: 40,
                        sampled: 9,
                    },
                ])),
                sample_counts: Appended(Some(vec![
                    SampleCount {
                        input: 0,
                        partition: 0,
                        count: 6,
                    },
                    SampleCount {
                        input: 0,
                        partition: 2,
                        count: 3,
                    },
                    SampleCount {
                        input: 1,
                        partition: 1,
                        count: 9,
                    },
                ])),
            },
        ),
        (
            "shuffle_placement",
            7,
            Message::ShufflePlacement {
                workers: workers(),
                partition_workers: vec![0, 1, 0, 1],
                partition_replicas: vec![1, 0, u32::MAX, 0],
            },
        ),
        (
            "commit_map",
            8,
            Message::CommitMap {
                app_id: "app-1".into(),
                shuffle_id: 7,
                map_id: 2,
                attempt_id: AttemptId(1),
                partitions: vec![
                    PartitionStat {
                        partition: 0,
                        bytes: 1024,
                        records: 10,
                    },
                    PartitionStat {
                        partition: 3,
                        bytes: 1 << 33,
                        records: 1 << 20,
                    },
                ],
                run_starts: Appended(None),
            },
        ),
        (
            "commit_map_runs",
            37,
            Message::CommitMap {
                app_id: "app-1".into(),
                shuffle_id: 7,
                map_id: 2,
                attempt_id: AttemptId(1),
                partitions: vec![PartitionStat {
                    partition: 3,
                    bytes: 3 << 20,
                    records: 30_000,
                }],
                run_starts: Appended(Some(vec![
                    RunStart {
                        partition: 3,
                        batch_seq: 2,
                    },
                    RunStart {
                        partition: 3,
                        batch_seq: 5,
                    },
                ])),
            },
        ),
        (
            "commit_result_committed",
            9,
            Message::CommitResult {
                status: CommitStatus::Committed,
                winning_attempt: AttemptId(1),
            },
        ),
        (
            "commit_result_rejected",
            10,
            Message::CommitResult {
                status: CommitStatus::Rejected,
                winning_attempt: AttemptId(0),
            },
        ),
        (
            "unregister_shuffle",
            11,
            Message::UnregisterShuffle {
                app_id: "app-1".into(),
                shuffle_id: 7,
            },
        ),
        (
            "get_shuffle_status",
            12,
            Message::GetShuffleStatus {
                app_id: "app-1".into(),
                shuffle_id: 7,
                runs_from: Appended(None),
                runs_to: Appended(None),
            },
        ),
        (
            "get_shuffle_status_runs",
            38,
            Message::GetShuffleStatus {
                app_id: "app-1".into(),
                shuffle_id: 7,
                runs_from: Appended::of(1),
                runs_to: Appended::of(2),
            },
        ),
        (
            "shuffle_status",
            13,
            Message::ShuffleStatus {
                num_maps: 3,
                num_partitions: 2,
                committed_maps: 2,
                workers: workers(),
                partition_workers: vec![1, 0],
                map_attempts: attempts(&[0, u32::MAX, 2]),
                partition_bytes: vec![100, 0],
                partition_records: vec![5, 0],
                partition_replicas: vec![0, u32::MAX],
                split_parents: Appended(None),
                run_count: Appended(None),
                run_starts: Appended(None),
            },
        ),
        (
            "shuffle_status_runs",
            38,
            Message::ShuffleStatus {
                num_maps: 3,
                num_partitions: 2,
                committed_maps: 3,
                workers: workers(),
                partition_workers: vec![1, 0],
                map_attempts: attempts(&[0, 1, 2]),
                partition_bytes: vec![100, 3 << 20],
                partition_records: vec![5, 30_000],
                partition_replicas: vec![0, u32::MAX],
                split_parents: Appended(Some(vec![])),
                run_count: Appended::of(3),
                run_starts: Appended(Some(vec![
                    MapRunStart {
                        partition: 1,
                        map_id: 0,
                        batch_seq: 4,
                    },
                    MapRunStart {
                        partition: 1,
                        map_id: 2,
                        batch_seq: 2,
                    },
                ])),
            },
        ),
        (
            "shuffle_status_split",
            34,
            Message::ShuffleStatus {
                num_maps: 3,
                num_partitions: 2,
                committed_maps: 3,
                workers: workers(),
                partition_workers: vec![1, 0, 0],
                map_attempts: attempts(&[0, 1, 2]),
                partition_bytes: vec![100, 4096, 2048],
                partition_records: vec![5, 90, 0],
                partition_replicas: vec![0, u32::MAX, 1],
                split_parents: Appended(Some(vec![1])),
                run_count: Appended(None),
                run_starts: Appended(None),
            },
        ),
        (
            "split_partition",
            35,
            Message::SplitPartition {
                app_id: "app-1".into(),
                shuffle_id: 7,
                slot: 1,
            },
        ),
        (
            "partition_split",
            35,
            Message::PartitionSplit {
                slot: 2,
                addr: "10.0.0.2:7001".into(),
            },
        ),
        (
            "push_redirect",
            36,
            Message::PushRedirect {
                slot: 2,
                addr: "10.0.0.2:7001".into(),
            },
        ),
        (
            "check_copies",
            32,
            Message::CheckCopies {
                app_id: "app-1".into(),
                shuffle_id: 7,
                map_attempts: attempts(&[0, u32::MAX]),
                partitions: vec![1, 3],
                expected_bytes: vec![4096, 0],
                adopt: true,
            },
        ),
        (
            "copies_held",
            32,
            Message::CopiesHeld {
                partitions: vec![3],
            },
        ),
        (
            "sync_commits",
            31,
            Message::SyncCommits {
                app_id: "app-1".into(),
                shuffle_id: 7,
                map_attempts: attempts(&[0, u32::MAX, 65536]),
            },
        ),
        (
            "report_lost_copy",
            33,
            Message::ReportLostCopy {
                app_id: "app-1".into(),
                shuffle_id: 7,
                partition: 3,
                worker_addr: "10.0.0.7:7001".into(),
            },
        ),
        (
            "report_worker_failure",
            30,
            Message::ReportWorkerFailure {
                addr: "10.0.0.7:7001".into(),
            },
        ),
        (
            "register_worker",
            14,
            Message::RegisterWorker {
                addr: "127.0.0.1:7001".into(),
                memory_budget: 1 << 30,
                incarnation: 0x0123_4567_89ab_cdef,
                host: "node-1.example".into(),
                zone: "eu-west-1a".into(),
            },
        ),
        (
            "worker_registered",
            15,
            Message::WorkerRegistered {
                worker_id: 3,
                heartbeat_ms: 1000,
            },
        ),
        (
            "heartbeat",
            16,
            Message::Heartbeat {
                worker_id: 3,
                buffered_bytes: 4096,
                stored_bytes: 1 << 40,
                disk_full: false,
                pushed_bytes: Appended::of(5 << 30),
                fetched_bytes: Appended::of(3 << 30),
                object_bytes: Appended::of(7 << 30),
            },
        ),
        (
            "prepare_shuffle",
            17,
            Message::PrepareShuffle {
                app_id: "app-1".into(),
                shuffle_id: 7,
                num_maps: 3,
                num_partitions: 4,
                partitions: vec![1, 3],
                forward_to: vec!["127.0.0.1:7002".into(), String::new()],
                app_stored_quota: Appended::of(200 << 30),
                app_memory_share_ppm: Appended::of(250_000),
                continued_in: Appended(None),
                continued_at: Appended(None),
            },
        ),
        (
            "prepare_shuffle_split",
            17,
            Message::PrepareShuffle {
                app_id: "app-1".into(),
                shuffle_id: 7,
                num_maps: 3,
                num_partitions: 4,
                partitions: vec![1, 3],
                forward_to: vec![String::new(), String::new()],
                app_stored_quota: Appended::of(0),
                app_memory_share_ppm: Appended::of(0),
                continued_in: Appended(Some(vec![5, NO_SLOT])),
                continued_at: Appended(Some(vec!["127.0.0.1:7003".into(), String::new()])),
            },
        ),
        (
            "map_committed",
            18,
            Message::MapCommitted {
                app_id: "app-1".into(),
                shuffle_id: 7,
                map_id: 2,
                attempt_id: AttemptId(1),
                partitions: vec![PartitionBytes {
                    partition: 3,
                    bytes: 1 << 33,
                }],
                durability: Durability::Disk,
            },
        ),
        (
            "map_committed_to_object_store",
            18,
            Message::MapCommitted {
                app_id: "app-1".into(),
                shuffle_id: 7,
                map_id: 0,
                attempt_id: AttemptId(1 << 16),
                partitions: vec![],
                durability: Durability::ObjectStore,
            },
        ),
        (
            "delete_shuffle",
            19,
            Message::DeleteShuffle {
                app_id: "app-1".into(),
                shuffle_id: 7,
                everywhere: true,
            },
        ),
        (
            "delete_app",
            20,
            Message::DeleteApp {
                app_id: "app-1".into(),
                everywhere: false,
            },
        ),
        (
            "push_batch",
            21,
            Message::PushBatch {
                header: PushHeader {
                    app_id: "app-1".into(),
                    shuffle_id: 7,
                    partition: 3,
                    map_id: 2,
                    attempt_id: AttemptId(1),
                    batch_seq: 0,
                    crc32c: checksum(&payload),
                },
                payload: payload.clone(),
            },
        ),
        (
            "fetch",
            22,
            Message::Fetch {
                app_id: "app-1".into(),
                shuffle_id: 7,
                partition: 3,
                start_map: 0,
                end_map: 3,
                resume_after: None,
                run_bytes: Appended::default(),
                end_batch_seq: Appended::default(),
                expected_attempt: Appended(None),
                flags: Appended(None),
            },
        ),
        (
            "fetch_resumed",
            23,
            Message::Fetch {
                app_id: "app-1".into(),
                shuffle_id: 7,
                partition: 3,
                start_map: 1,
                end_map: 2,
                resume_after: Some(ResumePoint {
                    map_id: 1,
                    batch_seq: 4,
                }),
                run_bytes: Appended::of(64 << 10),
                end_batch_seq: Appended::default(),
                expected_attempt: Appended(None),
                flags: Appended(None),
            },
        ),
        (
            "fetch_run",
            39,
            Message::Fetch {
                app_id: "app-1".into(),
                shuffle_id: 7,
                partition: 3,
                start_map: 1,
                end_map: 2,
                resume_after: Some(ResumePoint {
                    map_id: 1,
                    batch_seq: 4,
                }),
                run_bytes: Appended::of(64 << 10),
                end_batch_seq: Appended::of(9),
                expected_attempt: Appended(None),
                flags: Appended(None),
            },
        ),
        (
            "fetch_run_of_attempt",
            41,
            Message::Fetch {
                app_id: "app-1".into(),
                shuffle_id: 7,
                partition: 3,
                start_map: 1,
                end_map: 2,
                resume_after: None,
                run_bytes: Appended::of(64 << 10),
                end_batch_seq: Appended::of(0),
                expected_attempt: Appended(Some(AttemptId::new(1, 2))),
                flags: Appended(None),
            },
        ),
        (
            "fetch_accepting_records",
            42,
            Message::Fetch {
                app_id: "app-1".into(),
                shuffle_id: 7,
                partition: 3,
                start_map: 0,
                end_map: 3,
                resume_after: None,
                run_bytes: Appended::of(0),
                end_batch_seq: Appended::of(0),
                expected_attempt: Appended(Some(AttemptId::NONE)),
                flags: Appended::of(FETCH_RECORDS),
            },
        ),
        (
            "fetch_records",
            42,
            Message::FetchRecords {
                batches: vec![
                    StoredBatch {
                        map_id: 1,
                        attempt_id: AttemptId::new(1, 2),
                        batch_seq: 0,
                        crc32c: checksum(b"abc"),
                        payload: Bytes::from_static(b"abc"),
                    },
                    StoredBatch {
                        map_id: 1,
                        attempt_id: AttemptId::new(1, 2),
                        batch_seq: 1,
                        crc32c: checksum(b""),
                        payload: Bytes::new(),
                    },
                ],
            },
        ),
        (
            "fetch_chunk",
            22,
            Message::FetchChunk {
                batches: vec![
                    FetchedBatch {
                        map_id: 0,
                        batch_seq: 0,
                        crc32c: checksum(b"ab"),
                        payload: Bytes::from_static(b"ab"),
                    },
                    FetchedBatch {
                        map_id: 2,
                        batch_seq: 5,
                        crc32c: checksum(b""),
                        payload: Bytes::new(),
                    },
                ],
            },
        ),
        (
            "fetch_end",
            22,
            Message::FetchEnd {
                batches: 2,
                bytes: 2,
            },
        ),
        ("get_worker_stats", 24, Message::GetWorkerStats),
        (
            "worker_stats",
            24,
            Message::WorkerStats {
                worker_id: 1,
                budget_bytes: 1 << 30,
                buffered_bytes: 10,
                peak_buffered_bytes: 20,
                stored_bytes: 30,
                peak_rss_bytes: 40,
                process_budget_bytes: 2 << 30,
            },
        ),
        ("hello", 25, Message::Hello),
        (
            "challenge",
            25,
            Message::Challenge {
                nonce: Bytes::from_static(&[0xa0; 16]),
            },
        ),
        (
            "authenticate",
            26,
            Message::Authenticate {
                app_id: "app-1".into(),
                proof: Bytes::from_static(&[0x5c; 32]),
            },
        ),
        (
            "authenticate_cluster",
            27,
            Message::Authenticate {
                app_id: String::new(),
                proof: Bytes::from_static(&[0x36; 32]),
            },
        ),
        (
            "app_registered",
            3,
            Message::AppRegistered {
                token: Bytes::from_static(&[0x7e; 32]),
            },
        ),
    ]
}

pub fn invalid_samples() -> Vec<(&'static str, Vec<u8>, ErrorCode)> {
    let ok = Message::RegisterApp {
        app_id: "app-1".into(),
        lease_ms: 1,
        stored_quota: Appended::default(),
        memory_share_ppm: Appended::default(),
    }
    .encode_frame(1);
    let mut bad_version = ok.clone();
    bad_version[4] = PROTOCOL_VERSION + 1;
    let mut unknown_kind = ok.clone();
    unknown_kind[5] = 0x7f;
    // The length says the body is 2 bytes shorter than the fields it must hold.
    let mut truncated = ok[..ok.len() - 2].to_vec();
    let len = (truncated.len() - 4) as u32;
    truncated[0..4].copy_from_slice(&len.to_be_bytes());
    let mut short_length = ok.clone();
    short_length[0..4].copy_from_slice(&8u32.to_be_bytes());
    let mut bad_utf8 = ok.clone();
    bad_utf8[18] = 0xff;
    let mut bad_bool = Message::Fetch {
        app_id: "a".into(),
        shuffle_id: 0,
        partition: 0,
        start_map: 0,
        end_map: 1,
        resume_after: None,
        run_bytes: Appended::default(),
        end_batch_seq: Appended::default(),
        expected_attempt: Appended(None),
        flags: Appended(None),
    }
    .encode_frame(1);
    *bad_bool.last_mut().unwrap() = 7;
    let mut huge_list = Message::PrepareShuffle {
        app_id: "a".into(),
        shuffle_id: 0,
        num_maps: 1,
        num_partitions: 1,
        partitions: vec![],
        forward_to: vec![],
        app_stored_quota: Appended::default(),
        app_memory_share_ppm: Appended::default(),
        continued_in: Appended::default(),
        continued_at: Appended::default(),
    }
    .encode_frame(1);
    let n = huge_list.len();
    huge_list[n - 4..].copy_from_slice(&u32::MAX.to_be_bytes());
    // A stored record whose first byte is not the magic number's.
    let mut bad_magic = Message::FetchRecords {
        batches: vec![StoredBatch {
            map_id: 0,
            attempt_id: AttemptId(0),
            batch_seq: 0,
            crc32c: checksum(b"x"),
            payload: Bytes::from_static(b"x"),
        }],
    }
    .encode_frame(1);
    bad_magic[HEADER_LEN + 4] = b'X';
    vec![
        (
            "unsupported_version",
            bad_version,
            ErrorCode::UnsupportedVersion,
        ),
        ("unknown_kind", unknown_kind, ErrorCode::UnknownMessageKind),
        (
            "body_shorter_than_fields",
            truncated,
            ErrorCode::TruncatedFrame,
        ),
        (
            "length_shorter_than_header",
            short_length,
            ErrorCode::MalformedFrame,
        ),
        ("app_id_not_utf8", bad_utf8, ErrorCode::MalformedFrame),
        ("bool_not_0_or_1", bad_bool, ErrorCode::MalformedFrame),
        (
            "list_count_beyond_body",
            huge_list,
            ErrorCode::TruncatedFrame,
        ),
        ("record_without_magic", bad_magic, ErrorCode::MalformedFrame),
    ]
}
