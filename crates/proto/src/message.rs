//! Every message of the protocol, with its body layout.
//!
//! The layout of each body is given field by field in `docs/protocol.md`; the encoder
//! and decoder here are the reference implementation of that text.

use bytes::{BufMut, Bytes};
use serde::{Deserialize, Serialize};

use crate::codec::{put_str, put_str_list, put_u32_list, put_u64_list, Reader};
use crate::error::DecodeError;
use crate::frame::{FrameHeader, HEADER_LEN, PROTOCOL_VERSION};

/// A worker id meaning "no worker" (a partition without a replica).
pub const NO_WORKER: u32 = u32::MAX;

/// The message kind byte of a frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageKind {
    Ok = 0x01,
    Error = 0x02,
    RegisterApp = 0x10,
    RenewLease = 0x11,
    UnregisterApp = 0x12,
    RegisterShuffle = 0x13,
    ShufflePlacement = 0x14,
    CommitMap = 0x15,
    CommitResult = 0x16,
    UnregisterShuffle = 0x17,
    GetShuffleStatus = 0x18,
    ShuffleStatus = 0x19,
    ReportWorkerFailure = 0x1A,
    ReportCorruption = 0x1B,
    RegisterWorker = 0x20,
    WorkerRegistered = 0x21,
    Heartbeat = 0x22,
    PrepareShuffle = 0x30,
    MapCommitted = 0x31,
    DeleteShuffle = 0x32,
    DeleteApp = 0x33,
    SyncCommits = 0x34,
    CheckCopies = 0x35,
    CopiesHeld = 0x36,
    PushBatch = 0x40,
    Fetch = 0x41,
    FetchChunk = 0x42,
    FetchEnd = 0x43,
    GetWorkerStats = 0x44,
    WorkerStats = 0x45,
}

impl MessageKind {
    /// The kind for a raw byte, if it is one this build knows.
    pub fn from_u8(v: u8) -> Option<MessageKind> {
        use MessageKind::*;
        Some(match v {
            0x01 => Ok,
            0x02 => Error,
            0x10 => RegisterApp,
            0x11 => RenewLease,
            0x12 => UnregisterApp,
            0x13 => RegisterShuffle,
            0x14 => ShufflePlacement,
            0x15 => CommitMap,
            0x16 => CommitResult,
            0x17 => UnregisterShuffle,
            0x18 => GetShuffleStatus,
            0x19 => ShuffleStatus,
            0x1A => ReportWorkerFailure,
            0x1B => ReportCorruption,
            0x20 => RegisterWorker,
            0x21 => WorkerRegistered,
            0x22 => Heartbeat,
            0x30 => PrepareShuffle,
            0x31 => MapCommitted,
            0x32 => DeleteShuffle,
            0x33 => DeleteApp,
            0x34 => SyncCommits,
            0x35 => CheckCopies,
            0x36 => CopiesHeld,
            0x40 => PushBatch,
            0x41 => Fetch,
            0x42 => FetchChunk,
            0x43 => FetchEnd,
            0x44 => GetWorkerStats,
            0x45 => WorkerStats,
            _ => return None,
        })
    }
}

/// The commit rule: where a map's data must be before its commit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Durability {
    /// Held by every copy's worker (in memory or on disk).
    Memory = 0,
    /// Written and synced to every copy's local disk.
    Disk = 1,
    /// Stored in the workers' object store (or DFS).
    ObjectStore = 2,
}

impl Durability {
    /// Reads the wire value.
    pub fn decode(v: u8) -> Result<Durability, DecodeError> {
        match v {
            0 => Ok(Durability::Memory),
            1 => Ok(Durability::Disk),
            2 => Ok(Durability::ObjectStore),
            v => Err(DecodeError::Malformed(format!(
                "durability must be 0 (memory), 1 (disk) or 2 (object store), got {v}"
            ))),
        }
    }
}

// On the wire and in the test vectors' JSON, the durability is its number.
impl Serialize for Durability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(*self as u8)
    }
}

impl<'de> Deserialize<'de> for Durability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Durability::decode(u8::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A worker as the coordinator describes it to clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub id: u32,
    /// `host:port` of the worker's data endpoint.
    pub addr: String,
    /// False once the worker missed its heartbeat deadline.
    pub alive: bool,
}

/// Bytes and records one map wrote to one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStat {
    pub partition: u32,
    pub bytes: u64,
    pub records: u64,
}

impl PartitionStat {
    /// Encoded size: `u32 partition, u64 bytes, u64 records`.
    pub const LEN: usize = 20;

    /// Appends a counted list of stats.
    pub fn put_list(b: &mut Vec<u8>, stats: &[PartitionStat]) {
        b.put_u32(stats.len() as u32);
        for s in stats {
            b.put_u32(s.partition);
            b.put_u64(s.bytes);
            b.put_u64(s.records);
        }
    }

    /// Reads a counted list of stats.
    pub fn read_list(
        r: &mut Reader,
        field: &'static str,
    ) -> Result<Vec<PartitionStat>, DecodeError> {
        let n = r.count(Self::LEN, field)?;
        (0..n)
            .map(|_| {
                Ok(PartitionStat {
                    partition: r.u32("partition")?,
                    bytes: r.u64("bytes")?,
                    records: r.u64("records")?,
                })
            })
            .collect()
    }
}

/// Bytes one map attempt wrote to one partition, as a worker must hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionBytes {
    pub partition: u32,
    pub bytes: u64,
}

/// Outcome of a map commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u8)]
pub enum CommitStatus {
    /// This attempt is now the map's committed attempt.
    Committed = 0,
    /// This attempt had already committed; the repeated commit changed nothing.
    AlreadyCommitted = 1,
    /// Another attempt of the map committed first; this attempt's output is ignored.
    Rejected = 2,
}

/// The routing part of a pushed batch; the payload follows it in the frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushHeader {
    pub app_id: String,
    pub shuffle_id: u32,
    pub partition: u32,
    pub map_id: u32,
    pub attempt_id: u32,
    pub batch_seq: u32,
    /// CRC32C of the payload.
    pub crc32c: u32,
}

impl PushHeader {
    /// Encoded size of the header's fields after the app id.
    pub const FIXED_LEN: usize = 24;

    /// Encoded size of this header.
    pub fn encoded_len(&self) -> usize {
        2 + self.app_id.len() + Self::FIXED_LEN
    }

    /// Appends the header.
    pub fn encode(&self, buf: &mut impl BufMut) {
        put_str(buf, &self.app_id);
        buf.put_u32(self.shuffle_id);
        buf.put_u32(self.partition);
        buf.put_u32(self.map_id);
        buf.put_u32(self.attempt_id);
        buf.put_u32(self.batch_seq);
        buf.put_u32(self.crc32c);
    }

    /// Reads a header.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(PushHeader {
            app_id: r.string("app_id")?,
            shuffle_id: r.u32("shuffle_id")?,
            partition: r.u32("partition")?,
            map_id: r.u32("map_id")?,
            attempt_id: r.u32("attempt_id")?,
            batch_seq: r.u32("batch_seq")?,
            crc32c: r.u32("crc32c")?,
        })
    }
}

/// One batch of a fetched chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedBatch {
    pub map_id: u32,
    pub batch_seq: u32,
    pub crc32c: u32,
    #[serde(with = "hex_bytes")]
    pub payload: Bytes,
}

impl FetchedBatch {
    /// Encoded size of a fetched batch's header.
    pub const HEADER_LEN: usize = 16;
}

/// Where a resumed fetch starts: after this batch of this map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumePoint {
    pub map_id: u32,
    pub batch_seq: u32,
}

/// A protocol message. Requests, responses and one-way stream frames share the type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Message {
    /// Success with nothing to report.
    Ok,
    /// Failure of the request with the same request id. `code` is kept raw so a code
    /// newer than this build still reaches the caller.
    Error {
        code: u16,
        message: String,
    },

    // Control plane: apps and shuffles (client to coordinator).
    RegisterApp {
        app_id: String,
        lease_ms: u32,
    },
    RenewLease {
        app_id: String,
    },
    UnregisterApp {
        app_id: String,
    },
    RegisterShuffle {
        app_id: String,
        shuffle_id: u32,
        num_maps: u32,
        num_partitions: u32,
    },
    ShufflePlacement {
        workers: Vec<WorkerInfo>,
        /// Primary worker id per partition.
        partition_workers: Vec<u32>,
        /// Replica worker id per partition; [`NO_WORKER`] where there is none.
        partition_replicas: Vec<u32>,
    },
    CommitMap {
        app_id: String,
        shuffle_id: u32,
        map_id: u32,
        attempt_id: u32,
        partitions: Vec<PartitionStat>,
    },
    CommitResult {
        status: CommitStatus,
        winning_attempt: u32,
    },
    UnregisterShuffle {
        app_id: String,
        shuffle_id: u32,
    },
    GetShuffleStatus {
        app_id: String,
        shuffle_id: u32,
    },
    ShuffleStatus {
        num_maps: u32,
        num_partitions: u32,
        committed_maps: u32,
        workers: Vec<WorkerInfo>,
        partition_workers: Vec<u32>,
        /// Committed attempt per map; `u32::MAX` for a map that has not committed.
        map_attempts: Vec<u32>,
        partition_bytes: Vec<u64>,
        partition_records: Vec<u64>,
        /// Replica worker id per partition; [`NO_WORKER`] where there is none.
        partition_replicas: Vec<u32>,
    },
    /// A client could not reach a worker; the coordinator checks it at once instead of
    /// waiting for its heartbeat deadline.
    ReportWorkerFailure {
        addr: String,
    },
    /// A worker found a committed batch of `partition` corrupt in its files: its copy
    /// of the partition no longer counts (`worker_addr` is the worker's own address).
    ReportCorruption {
        app_id: String,
        shuffle_id: u32,
        partition: u32,
        worker_addr: String,
    },

    // Control plane: membership (worker to coordinator).
    RegisterWorker {
        addr: String,
        memory_budget: u64,
        /// Chosen at random when the worker process starts. A new value for a known
        /// address tells the coordinator the worker restarted and lost its memory.
        incarnation: u64,
    },
    WorkerRegistered {
        worker_id: u32,
        heartbeat_ms: u32,
    },
    Heartbeat {
        worker_id: u32,
        buffered_bytes: u64,
        stored_bytes: u64,
        /// The worker's disk is full: place nothing new on it.
        disk_full: bool,
    },

    // Control plane: coordinator to worker.
    PrepareShuffle {
        app_id: String,
        shuffle_id: u32,
        num_maps: u32,
        num_partitions: u32,
        partitions: Vec<u32>,
        /// Per entry of `partitions`: the replica's address to forward pushed batches
        /// to, or an empty string. Sent again when a partition's replica changes.
        forward_to: Vec<String>,
    },
    MapCommitted {
        app_id: String,
        shuffle_id: u32,
        map_id: u32,
        attempt_id: u32,
        partitions: Vec<PartitionBytes>,
        /// When the worker answers: once the data is held ([`Durability::Memory`]),
        /// written and synced to its disk ([`Durability::Disk`]), or stored in its object
        /// store ([`Durability::ObjectStore`]).
        durability: Durability,
    },
    /// `everywhere`: the shuffle is gone for good, so the worker also deletes what
    /// every worker uploaded of it to the object store; otherwise only this worker's
    /// own copies go (a worker that was declared lost and came back).
    DeleteShuffle {
        app_id: String,
        shuffle_id: u32,
        everywhere: bool,
    },
    /// As `DeleteShuffle`, for every shuffle of an app.
    DeleteApp {
        app_id: String,
        everywhere: bool,
    },
    /// Sent to a restarted worker: which of `partitions` it still holds whole, i.e. the
    /// committed attempts' bytes (`map_attempts`) add up to `expected_bytes`. The worker
    /// answers `CopiesHeld` and takes `map_attempts` as its commits.
    ///
    /// With `adopt`, the worker first restores the partitions from its object store
    /// (copies uploaded by any worker), then checks: that is how a partition whose every
    /// copy was lost with its workers is recovered without rerunning maps.
    CheckCopies {
        app_id: String,
        shuffle_id: u32,
        map_attempts: Vec<u32>,
        partitions: Vec<u32>,
        expected_bytes: Vec<u64>,
        adopt: bool,
    },
    CopiesHeld {
        partitions: Vec<u32>,
    },
    /// The coordinator's committed attempt of every map of a shuffle, sent to a worker
    /// that (re-)registers: it replaces the worker's own view.
    SyncCommits {
        app_id: String,
        shuffle_id: u32,
        map_attempts: Vec<u32>,
    },

    // Data plane (client to worker).
    PushBatch {
        header: PushHeader,
        #[serde(with = "hex_bytes")]
        payload: Bytes,
    },
    Fetch {
        app_id: String,
        shuffle_id: u32,
        partition: u32,
        start_map: u32,
        end_map: u32,
        resume_after: Option<ResumePoint>,
    },
    FetchChunk {
        batches: Vec<FetchedBatch>,
    },
    FetchEnd {
        batches: u64,
        bytes: u64,
    },
    GetWorkerStats,
    WorkerStats {
        worker_id: u32,
        budget_bytes: u64,
        buffered_bytes: u64,
        peak_buffered_bytes: u64,
        stored_bytes: u64,
        peak_rss_bytes: u64,
        /// Sum of the budgets of all workers in the worker's process (the bound for
        /// `peak_rss_bytes`, plus overhead).
        process_budget_bytes: u64,
    },
}

fn put_workers(buf: &mut impl BufMut, workers: &[WorkerInfo]) {
    buf.put_u32(workers.len() as u32);
    for w in workers {
        buf.put_u32(w.id);
        put_str(buf, &w.addr);
        buf.put_u8(w.alive as u8);
    }
}

fn get_workers(r: &mut Reader) -> Result<Vec<WorkerInfo>, DecodeError> {
    let n = r.count(7, "workers")?;
    (0..n)
        .map(|_| {
            Ok(WorkerInfo {
                id: r.u32("worker.id")?,
                addr: r.string("worker.addr")?,
                alive: r.bool("worker.alive")?,
            })
        })
        .collect()
}

impl Message {
    /// The message's kind byte.
    pub fn kind(&self) -> MessageKind {
        use MessageKind as K;
        match self {
            Message::Ok => K::Ok,
            Message::Error { .. } => K::Error,
            Message::RegisterApp { .. } => K::RegisterApp,
            Message::RenewLease { .. } => K::RenewLease,
            Message::UnregisterApp { .. } => K::UnregisterApp,
            Message::RegisterShuffle { .. } => K::RegisterShuffle,
            Message::ShufflePlacement { .. } => K::ShufflePlacement,
            Message::CommitMap { .. } => K::CommitMap,
            Message::CommitResult { .. } => K::CommitResult,
            Message::UnregisterShuffle { .. } => K::UnregisterShuffle,
            Message::GetShuffleStatus { .. } => K::GetShuffleStatus,
            Message::ShuffleStatus { .. } => K::ShuffleStatus,
            Message::ReportWorkerFailure { .. } => K::ReportWorkerFailure,
            Message::ReportCorruption { .. } => K::ReportCorruption,
            Message::RegisterWorker { .. } => K::RegisterWorker,
            Message::WorkerRegistered { .. } => K::WorkerRegistered,
            Message::Heartbeat { .. } => K::Heartbeat,
            Message::PrepareShuffle { .. } => K::PrepareShuffle,
            Message::MapCommitted { .. } => K::MapCommitted,
            Message::DeleteShuffle { .. } => K::DeleteShuffle,
            Message::DeleteApp { .. } => K::DeleteApp,
            Message::SyncCommits { .. } => K::SyncCommits,
            Message::CheckCopies { .. } => K::CheckCopies,
            Message::CopiesHeld { .. } => K::CopiesHeld,
            Message::PushBatch { .. } => K::PushBatch,
            Message::Fetch { .. } => K::Fetch,
            Message::FetchChunk { .. } => K::FetchChunk,
            Message::FetchEnd { .. } => K::FetchEnd,
            Message::GetWorkerStats => K::GetWorkerStats,
            Message::WorkerStats { .. } => K::WorkerStats,
        }
    }

    /// An `Error` message.
    pub fn error(code: crate::ErrorCode, message: impl Into<String>) -> Message {
        Message::Error {
            code: code.as_u16(),
            message: message.into(),
        }
    }

    /// Encodes the whole frame (header and body).
    pub fn encode_frame(&self, request_id: u64) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN];
        self.encode_body(&mut out);
        let body_len = (out.len() - HEADER_LEN) as u32;
        let header = FrameHeader::new(self.kind() as u8, request_id, body_len);
        out[..HEADER_LEN].copy_from_slice(&header.encode());
        out
    }

    /// Appends the body.
    pub fn encode_body(&self, b: &mut Vec<u8>) {
        match self {
            Message::Ok | Message::GetWorkerStats => {}
            Message::Error { code, message } => {
                b.put_u16(*code);
                put_str(b, message);
            }
            Message::RegisterApp { app_id, lease_ms } => {
                put_str(b, app_id);
                b.put_u32(*lease_ms);
            }
            Message::RenewLease { app_id } | Message::UnregisterApp { app_id } => {
                put_str(b, app_id)
            }
            Message::DeleteApp { app_id, everywhere } => {
                put_str(b, app_id);
                b.put_u8(*everywhere as u8);
            }
            Message::ReportWorkerFailure { addr } => put_str(b, addr),
            Message::ReportCorruption {
                app_id,
                shuffle_id,
                partition,
                worker_addr,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                b.put_u32(*partition);
                put_str(b, worker_addr);
            }
            Message::SyncCommits {
                app_id,
                shuffle_id,
                map_attempts,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                put_u32_list(b, map_attempts);
            }
            Message::CheckCopies {
                app_id,
                shuffle_id,
                map_attempts,
                partitions,
                expected_bytes,
                adopt,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                put_u32_list(b, map_attempts);
                put_u32_list(b, partitions);
                put_u64_list(b, expected_bytes);
                b.put_u8(*adopt as u8);
            }
            Message::CopiesHeld { partitions } => put_u32_list(b, partitions),
            Message::RegisterShuffle {
                app_id,
                shuffle_id,
                num_maps,
                num_partitions,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                b.put_u32(*num_maps);
                b.put_u32(*num_partitions);
            }
            Message::ShufflePlacement {
                workers,
                partition_workers,
                partition_replicas,
            } => {
                put_workers(b, workers);
                put_u32_list(b, partition_workers);
                put_u32_list(b, partition_replicas);
            }
            Message::CommitMap {
                app_id,
                shuffle_id,
                map_id,
                attempt_id,
                partitions,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                b.put_u32(*map_id);
                b.put_u32(*attempt_id);
                PartitionStat::put_list(b, partitions);
            }
            Message::CommitResult {
                status,
                winning_attempt,
            } => {
                b.put_u8(*status as u8);
                b.put_u32(*winning_attempt);
            }
            Message::UnregisterShuffle { app_id, shuffle_id }
            | Message::GetShuffleStatus { app_id, shuffle_id } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
            }
            Message::DeleteShuffle {
                app_id,
                shuffle_id,
                everywhere,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                b.put_u8(*everywhere as u8);
            }
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
            } => {
                b.put_u32(*num_maps);
                b.put_u32(*num_partitions);
                b.put_u32(*committed_maps);
                put_workers(b, workers);
                put_u32_list(b, partition_workers);
                put_u32_list(b, map_attempts);
                put_u64_list(b, partition_bytes);
                put_u64_list(b, partition_records);
                put_u32_list(b, partition_replicas);
            }
            Message::RegisterWorker {
                addr,
                memory_budget,
                incarnation,
            } => {
                put_str(b, addr);
                b.put_u64(*memory_budget);
                b.put_u64(*incarnation);
            }
            Message::WorkerRegistered {
                worker_id,
                heartbeat_ms,
            } => {
                b.put_u32(*worker_id);
                b.put_u32(*heartbeat_ms);
            }
            Message::Heartbeat {
                worker_id,
                buffered_bytes,
                stored_bytes,
                disk_full,
            } => {
                b.put_u32(*worker_id);
                b.put_u64(*buffered_bytes);
                b.put_u64(*stored_bytes);
                b.put_u8(*disk_full as u8);
            }
            Message::PrepareShuffle {
                app_id,
                shuffle_id,
                num_maps,
                num_partitions,
                partitions,
                forward_to,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                b.put_u32(*num_maps);
                b.put_u32(*num_partitions);
                put_u32_list(b, partitions);
                put_str_list(b, forward_to);
            }
            Message::MapCommitted {
                app_id,
                shuffle_id,
                map_id,
                attempt_id,
                partitions,
                durability,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                b.put_u32(*map_id);
                b.put_u32(*attempt_id);
                b.put_u32(partitions.len() as u32);
                for p in partitions {
                    b.put_u32(p.partition);
                    b.put_u64(p.bytes);
                }
                b.put_u8(*durability as u8);
            }
            Message::PushBatch { header, payload } => {
                header.encode(b);
                b.put_slice(payload);
            }
            Message::Fetch {
                app_id,
                shuffle_id,
                partition,
                start_map,
                end_map,
                resume_after,
            } => {
                put_str(b, app_id);
                b.put_u32(*shuffle_id);
                b.put_u32(*partition);
                b.put_u32(*start_map);
                b.put_u32(*end_map);
                match resume_after {
                    None => b.put_u8(0),
                    Some(r) => {
                        b.put_u8(1);
                        b.put_u32(r.map_id);
                        b.put_u32(r.batch_seq);
                    }
                }
            }
            Message::FetchChunk { batches } => {
                b.put_u32(batches.len() as u32);
                for fb in batches {
                    b.put_u32(fb.map_id);
                    b.put_u32(fb.batch_seq);
                    b.put_u32(fb.payload.len() as u32);
                    b.put_u32(fb.crc32c);
                    b.put_slice(&fb.payload);
                }
            }
            Message::FetchEnd { batches, bytes } => {
                b.put_u64(*batches);
                b.put_u64(*bytes);
            }
            Message::WorkerStats {
                worker_id,
                budget_bytes,
                buffered_bytes,
                peak_buffered_bytes,
                stored_bytes,
                peak_rss_bytes,
                process_budget_bytes,
            } => {
                b.put_u32(*worker_id);
                b.put_u64(*budget_bytes);
                b.put_u64(*buffered_bytes);
                b.put_u64(*peak_buffered_bytes);
                b.put_u64(*stored_bytes);
                b.put_u64(*peak_rss_bytes);
                b.put_u64(*process_budget_bytes);
            }
        }
    }

    /// Decodes a body of the given kind. Bytes after the last known field are ignored.
    pub fn decode(kind: u8, body: Bytes) -> Result<Message, DecodeError> {
        use MessageKind as K;
        let k = MessageKind::from_u8(kind).ok_or(DecodeError::UnknownKind(kind))?;
        let mut r = Reader::new(body);
        let r = &mut r;
        Ok(match k {
            K::Ok => Message::Ok,
            K::GetWorkerStats => Message::GetWorkerStats,
            K::Error => Message::Error {
                code: r.u16("code")?,
                message: r.string("message")?,
            },
            K::RegisterApp => Message::RegisterApp {
                app_id: r.string("app_id")?,
                lease_ms: r.u32("lease_ms")?,
            },
            K::RenewLease => Message::RenewLease {
                app_id: r.string("app_id")?,
            },
            K::UnregisterApp => Message::UnregisterApp {
                app_id: r.string("app_id")?,
            },
            K::DeleteApp => Message::DeleteApp {
                app_id: r.string("app_id")?,
                everywhere: r.bool("everywhere")?,
            },
            K::RegisterShuffle => Message::RegisterShuffle {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
                num_maps: r.u32("num_maps")?,
                num_partitions: r.u32("num_partitions")?,
            },
            K::ShufflePlacement => Message::ShufflePlacement {
                workers: get_workers(r)?,
                partition_workers: r.u32_list("partition_workers")?,
                partition_replicas: r.u32_list("partition_replicas")?,
            },
            K::CommitMap => {
                let app_id = r.string("app_id")?;
                let shuffle_id = r.u32("shuffle_id")?;
                let map_id = r.u32("map_id")?;
                let attempt_id = r.u32("attempt_id")?;
                let partitions = PartitionStat::read_list(r, "partitions")?;
                Message::CommitMap {
                    app_id,
                    shuffle_id,
                    map_id,
                    attempt_id,
                    partitions,
                }
            }
            K::CommitResult => Message::CommitResult {
                status: match r.u8("status")? {
                    0 => CommitStatus::Committed,
                    1 => CommitStatus::AlreadyCommitted,
                    2 => CommitStatus::Rejected,
                    v => {
                        return Err(DecodeError::Malformed(format!(
                            "commit status {v} is not 0, 1 or 2"
                        )))
                    }
                },
                winning_attempt: r.u32("winning_attempt")?,
            },
            K::UnregisterShuffle => Message::UnregisterShuffle {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
            },
            K::GetShuffleStatus => Message::GetShuffleStatus {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
            },
            K::DeleteShuffle => Message::DeleteShuffle {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
                everywhere: r.bool("everywhere")?,
            },
            K::ShuffleStatus => Message::ShuffleStatus {
                num_maps: r.u32("num_maps")?,
                num_partitions: r.u32("num_partitions")?,
                committed_maps: r.u32("committed_maps")?,
                workers: get_workers(r)?,
                partition_workers: r.u32_list("partition_workers")?,
                map_attempts: r.u32_list("map_attempts")?,
                partition_bytes: r.u64_list("partition_bytes")?,
                partition_records: r.u64_list("partition_records")?,
                partition_replicas: r.u32_list("partition_replicas")?,
            },
            K::CheckCopies => Message::CheckCopies {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
                map_attempts: r.u32_list("map_attempts")?,
                partitions: r.u32_list("partitions")?,
                expected_bytes: r.u64_list("expected_bytes")?,
                adopt: r.bool("adopt")?,
            },
            K::CopiesHeld => Message::CopiesHeld {
                partitions: r.u32_list("partitions")?,
            },
            K::SyncCommits => Message::SyncCommits {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
                map_attempts: r.u32_list("map_attempts")?,
            },
            K::ReportCorruption => Message::ReportCorruption {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
                partition: r.u32("partition")?,
                worker_addr: r.string("worker_addr")?,
            },
            K::ReportWorkerFailure => Message::ReportWorkerFailure {
                addr: r.string("addr")?,
            },
            K::RegisterWorker => Message::RegisterWorker {
                addr: r.string("addr")?,
                memory_budget: r.u64("memory_budget")?,
                incarnation: r.u64("incarnation")?,
            },
            K::WorkerRegistered => Message::WorkerRegistered {
                worker_id: r.u32("worker_id")?,
                heartbeat_ms: r.u32("heartbeat_ms")?,
            },
            K::Heartbeat => Message::Heartbeat {
                worker_id: r.u32("worker_id")?,
                buffered_bytes: r.u64("buffered_bytes")?,
                stored_bytes: r.u64("stored_bytes")?,
                disk_full: r.bool("disk_full")?,
            },
            K::PrepareShuffle => Message::PrepareShuffle {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
                num_maps: r.u32("num_maps")?,
                num_partitions: r.u32("num_partitions")?,
                partitions: r.u32_list("partitions")?,
                forward_to: r.string_list("forward_to")?,
            },
            K::MapCommitted => {
                let app_id = r.string("app_id")?;
                let shuffle_id = r.u32("shuffle_id")?;
                let map_id = r.u32("map_id")?;
                let attempt_id = r.u32("attempt_id")?;
                let n = r.count(12, "partitions")?;
                let partitions = (0..n)
                    .map(|_| {
                        Ok(PartitionBytes {
                            partition: r.u32("partition")?,
                            bytes: r.u64("bytes")?,
                        })
                    })
                    .collect::<Result<_, DecodeError>>()?;
                Message::MapCommitted {
                    app_id,
                    shuffle_id,
                    map_id,
                    attempt_id,
                    partitions,
                    durability: Durability::decode(r.u8("durability")?)?,
                }
            }
            K::PushBatch => Message::PushBatch {
                header: PushHeader::decode(r)?,
                payload: r.rest(),
            },
            K::Fetch => Message::Fetch {
                app_id: r.string("app_id")?,
                shuffle_id: r.u32("shuffle_id")?,
                partition: r.u32("partition")?,
                start_map: r.u32("start_map")?,
                end_map: r.u32("end_map")?,
                resume_after: if r.bool("has_resume")? {
                    Some(ResumePoint {
                        map_id: r.u32("resume.map_id")?,
                        batch_seq: r.u32("resume.batch_seq")?,
                    })
                } else {
                    None
                },
            },
            K::FetchChunk => {
                let n = r.count(FetchedBatch::HEADER_LEN, "batches")?;
                let mut batches = Vec::with_capacity(n);
                for _ in 0..n {
                    let map_id = r.u32("batch.map_id")?;
                    let batch_seq = r.u32("batch.batch_seq")?;
                    let len = r.u32("batch.len")? as usize;
                    let crc32c = r.u32("batch.crc32c")?;
                    let payload = r.bytes(len, "batch.payload")?;
                    batches.push(FetchedBatch {
                        map_id,
                        batch_seq,
                        crc32c,
                        payload,
                    });
                }
                Message::FetchChunk { batches }
            }
            K::FetchEnd => Message::FetchEnd {
                batches: r.u64("batches")?,
                bytes: r.u64("bytes")?,
            },
            K::WorkerStats => Message::WorkerStats {
                worker_id: r.u32("worker_id")?,
                budget_bytes: r.u64("budget_bytes")?,
                buffered_bytes: r.u64("buffered_bytes")?,
                peak_buffered_bytes: r.u64("peak_buffered_bytes")?,
                stored_bytes: r.u64("stored_bytes")?,
                peak_rss_bytes: r.u64("peak_rss_bytes")?,
                process_budget_bytes: r.u64("process_budget_bytes")?,
            },
        })
    }

    /// Decodes one whole frame held in memory (used by tests and the test vectors).
    pub fn decode_frame(frame: &[u8]) -> Result<(FrameHeader, Message), DecodeError> {
        if frame.len() < HEADER_LEN {
            return Err(DecodeError::Truncated {
                field: "frame header",
                missing: HEADER_LEN - frame.len(),
            });
        }
        let header = FrameHeader::decode(frame[..HEADER_LEN].try_into().expect("16 bytes"))?;
        if header.version != PROTOCOL_VERSION {
            return Err(DecodeError::UnsupportedVersion(header.version));
        }
        let body = &frame[HEADER_LEN..];
        if body.len() < header.body_len as usize {
            return Err(DecodeError::Truncated {
                field: "frame body",
                missing: header.body_len as usize - body.len(),
            });
        }
        let body = Bytes::copy_from_slice(&body[..header.body_len as usize]);
        Ok((header, Message::decode(header.kind, body)?))
    }
}

/// Serde helper: `Bytes` as a lower-case hex string (used by the JSON test vectors).
pub mod hex_bytes {
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Lower-case hex of `b`.
    pub fn to_hex(b: &[u8]) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(b.len() * 2);
        for &x in b {
            s.push(DIGITS[(x >> 4) as usize] as char);
            s.push(DIGITS[(x & 15) as usize] as char);
        }
        s
    }

    /// Bytes of a hex string (white space ignored).
    pub fn from_hex(s: &str) -> Result<Vec<u8>, String> {
        let digits: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
        if !digits.len().is_multiple_of(2) {
            return Err("odd number of hex digits".into());
        }
        digits
            .chunks(2)
            .map(|p| {
                let h = (p[0] as char).to_digit(16).ok_or("bad hex digit")?;
                let l = (p[1] as char).to_digit(16).ok_or("bad hex digit")?;
                Ok((h * 16 + l) as u8)
            })
            .collect()
    }

    pub fn serialize<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_hex(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let s = String::deserialize(d)?;
        from_hex(&s)
            .map(Bytes::from)
            .map_err(serde::de::Error::custom)
    }
}
