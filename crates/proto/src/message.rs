//! Every message of the protocol, declared once: its kind byte, its fields in wire
//! order and their types. The encoder and decoder are generated from that declaration
//! ([`crate::wire_enum!`]), each field encoded by its type's [`Wire`] impl, so the layout
//! `docs/protocol.md` gives field by field is written in exactly one place here.

use bytes::{BufMut, Bytes};
use serde::{Deserialize, Serialize};

use crate::attempt::AttemptId;
use crate::codec::{Appended, Reader, Wire};
use crate::error::DecodeError;
use crate::frame::{FrameHeader, HEADER_LEN, PROTOCOL_VERSION};

/// A worker id meaning "no worker" (a partition without a replica).
pub const NO_WORKER: u32 = u32::MAX;

/// A slot number meaning "no slot" (`PrepareShuffle.continued_in`: a partition not split).
pub const NO_SLOT: u32 = u32::MAX;

/// Most splits one shuffle may have. A partition that outgrows its worker continues in a
/// split: a slot numbered from `num_partitions` up, held and replicated like a partition
/// (see `docs/protocol.md`, "Partition splits").
pub const MAX_SPLITS: u32 = 4096;

/// The bound of a shuffle's slot numbers: its partitions, then its possible splits.
pub fn slot_limit(num_partitions: u32) -> u32 {
    num_partitions.saturating_add(MAX_SPLITS)
}

crate::wire_u8_enum! {
    /// The commit rule: where a map's data must be before its commit counts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Durability ("durability") {
        /// Held by every copy's worker (in memory or on disk).
        Memory = 0,
        /// Written and synced to every copy's local disk.
        Disk = 1,
        /// Stored in the workers' object store (or DFS).
        ObjectStore = 2,
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
        let v = u8::deserialize(d)?;
        Durability::get(&mut Reader::new(Bytes::copy_from_slice(&[v])), "durability")
            .map_err(serde::de::Error::custom)
    }
}

crate::wire_struct! {
    /// A worker as the coordinator describes it to clients.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct WorkerInfo {
        pub id: u32,
        /// `host:port` of the worker's data endpoint.
        pub addr: String,
        /// False once the worker missed its heartbeat deadline.
        pub alive: bool,
        /// The machine the worker runs on, as engines name hosts (Spark's executor host):
        /// a reduce task placed there reads the worker's partitions without the network.
        pub host: String,
        /// The failure domain (rack, availability zone) of the worker's host; empty when
        /// not labelled (every unlabelled worker counts as one zone).
        pub zone: String,
    }
}

crate::wire_struct! {
    /// Bytes and records one map wrote to one partition.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PartitionStat {
        pub partition: u32,
        pub bytes: u64,
        pub records: u64,
    }
}

crate::wire_struct! {
    /// Where one of a map's further sorted runs of a partition begins: the sequence number
    /// of its first batch (a map that sorted its output in several rounds pushes each round
    /// as a run of its own; its first run begins at batch 0 and is never listed).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
    pub struct RunStart {
        pub partition: u32,
        pub batch_seq: u32,
    }
}

crate::wire_struct! {
    /// A [`RunStart`] of a committed map, as the coordinator returns it to readers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
    pub struct MapRunStart {
        pub partition: u32,
        pub map_id: u32,
        pub batch_seq: u32,
    }
}

crate::wire_struct! {
    /// One input partition of a range-partitioned shuffle's map stage, as the engine
    /// sampled it before the maps ran (SCache's reservoir sampling, paper 003 §3.2.2): how
    /// many records it holds and how many of them the sample kept.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct InputSample {
        pub records: u64,
        pub sampled: u32,
    }
}

crate::wire_struct! {
    /// How many of input partition `input`'s sampled records the shuffle's partitioner
    /// sends to `partition` (an index into a `RegisterShuffle`'s `sample_inputs`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
    pub struct SampleCount {
        pub input: u32,
        pub partition: u32,
        pub count: u32,
    }
}

crate::wire_struct! {
    /// Bytes one map attempt wrote to one partition, as a worker must hold them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PartitionBytes {
        pub partition: u32,
        pub bytes: u64,
    }
}

crate::wire_u8_enum! {
    /// Outcome of a map commit.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum CommitStatus ("commit status") {
        /// This attempt is now the map's committed attempt.
        Committed = 0,
        /// This attempt had already committed; the repeated commit changed nothing.
        AlreadyCommitted = 1,
        /// Another attempt of the map committed first; this attempt's output is ignored.
        Rejected = 2,
    }
}

crate::wire_struct! {
    /// The routing part of a pushed batch; the payload follows it in the frame.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PushHeader {
        pub app_id: String,
        pub shuffle_id: u32,
        pub partition: u32,
        pub map_id: u32,
        pub attempt_id: AttemptId,
        pub batch_seq: u32,
        /// CRC32C of the payload.
        pub crc32c: u32,
    }
}

impl PushHeader {
    /// Encoded size of the header's fields after the app id.
    pub const FIXED_LEN: usize = PushHeader::MIN_LEN - 2;

    /// Encoded size of this header.
    pub fn encoded_len(&self) -> usize {
        2 + self.app_id.len() + Self::FIXED_LEN
    }

    /// Appends the header.
    pub fn encode(&self, buf: &mut impl BufMut) {
        self.put(buf);
    }

    /// Reads a header.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        PushHeader::get(r, "push header")
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

    /// Appends a batch header for a payload of `len` bytes (the payload follows it).
    pub fn put_header(b: &mut impl BufMut, map_id: u32, batch_seq: u32, len: u32, crc32c: u32) {
        b.put_u32(map_id);
        b.put_u32(batch_seq);
        b.put_u32(len);
        b.put_u32(crc32c);
    }
}

/// `u32 map_id, u32 batch_seq, u32 len, u32 crc32c`, then `len` payload bytes.
impl Wire for FetchedBatch {
    const MIN_LEN: usize = FetchedBatch::HEADER_LEN;
    fn put(&self, b: &mut impl BufMut) {
        let len = self.payload.len() as u32;
        FetchedBatch::put_header(b, self.map_id, self.batch_seq, len, self.crc32c);
        b.put_slice(&self.payload);
    }
    fn get(r: &mut Reader, _field: &'static str) -> Result<Self, DecodeError> {
        let map_id = r.u32("batch.map_id")?;
        let batch_seq = r.u32("batch.batch_seq")?;
        let len = r.u32("batch.len")? as usize;
        let crc32c = r.u32("batch.crc32c")?;
        Ok(FetchedBatch {
            map_id,
            batch_seq,
            crc32c,
            payload: r.bytes(len, "batch.payload")?,
        })
    }
}

/// The magic number ("CDK1") that starts every stored record: in a worker's partition
/// files and object-store segments, and on the wire in `FetchRecords`.
pub const RECORD_MAGIC: u32 = 0x4344_4B31;

/// `Fetch.flags` bit: the reader takes `FetchRecords` frames (stored records, checked by
/// the reader alone) as well as `FetchChunk` ones.
pub const FETCH_RECORDS: u32 = 1;

/// One batch as a worker stores it, sent as it lies in the partition file: a worker can
/// then send file ranges without reading them (`FetchRecords`). Nobody but the reader
/// checks its CRC on that path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredBatch {
    pub map_id: u32,
    pub attempt_id: AttemptId,
    pub batch_seq: u32,
    pub crc32c: u32,
    #[serde(with = "hex_bytes")]
    pub payload: Bytes,
}

impl StoredBatch {
    /// Encoded size of a stored record's header.
    pub const HEADER_LEN: usize = 24;

    /// Appends a record header for a payload of `len` bytes (the payload follows it).
    pub fn put_header(
        b: &mut impl BufMut,
        map_id: u32,
        attempt_id: AttemptId,
        batch_seq: u32,
        len: u32,
        crc32c: u32,
    ) {
        b.put_u32(RECORD_MAGIC);
        b.put_u32(map_id);
        b.put_u32(attempt_id.0);
        b.put_u32(batch_seq);
        b.put_u32(len);
        b.put_u32(crc32c);
    }
}

/// `u32 magic "CDK1", u32 map_id, u32 attempt_id, u32 batch_seq, u32 len, u32 crc32c`,
/// then `len` payload bytes: the stored record's layout.
impl Wire for StoredBatch {
    const MIN_LEN: usize = StoredBatch::HEADER_LEN;
    fn put(&self, b: &mut impl BufMut) {
        let len = self.payload.len() as u32;
        let (map, attempt, seq) = (self.map_id, self.attempt_id, self.batch_seq);
        StoredBatch::put_header(b, map, attempt, seq, len, self.crc32c);
        b.put_slice(&self.payload);
    }
    fn get(r: &mut Reader, _field: &'static str) -> Result<Self, DecodeError> {
        let magic = r.u32("record.magic")?;
        if magic != RECORD_MAGIC {
            return Err(DecodeError::Malformed(format!(
                "a stored record starts with {magic:#010x}, not the magic number"
            )));
        }
        let map_id = r.u32("record.map_id")?;
        let attempt_id = AttemptId(r.u32("record.attempt_id")?);
        let batch_seq = r.u32("record.batch_seq")?;
        let len = r.u32("record.len")? as usize;
        let crc32c = r.u32("record.crc32c")?;
        Ok(StoredBatch {
            map_id,
            attempt_id,
            batch_seq,
            crc32c,
            payload: r.bytes(len, "record.payload")?,
        })
    }
}

impl From<StoredBatch> for FetchedBatch {
    /// The batch as a `FetchChunk` carries it (the payload is shared, not copied).
    fn from(b: StoredBatch) -> FetchedBatch {
        FetchedBatch {
            map_id: b.map_id,
            batch_seq: b.batch_seq,
            crc32c: b.crc32c,
            payload: b.payload,
        }
    }
}

crate::wire_struct! {
    /// Where a resumed fetch starts: after this batch of this map.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ResumePoint {
        pub map_id: u32,
        pub batch_seq: u32,
    }
}

crate::wire_enum! {
    /// A protocol message. Requests, responses and one-way stream frames share the type.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type")]
    pub enum Message: MessageKind {
        /// Success with nothing to report.
        Ok = 0x01,
        /// Failure of the request with the same request id. `code` is kept raw so a code
        /// newer than this build still reaches the caller.
        Error = 0x02 {
            code: u16,
            message: String,
        },

        // Authentication (any client to any server), see `docs/security.md`.
        /// Asks the server for this connection's challenge.
        Hello = 0x03,
        /// A fresh random nonce ([`crate::auth::NONCE_LEN`] bytes), the same for every
        /// `Authenticate` on this connection.
        Challenge = 0x04 {
            #[serde(with = "hex_bytes")]
            nonce: Bytes,
        },
        /// Proves the connection holds the key of `app_id` (its token), or with an empty
        /// `app_id` the cluster secret: `proof` is [`crate::auth::proof`] of the
        /// connection's nonce. A connection may authenticate for several apps.
        Authenticate = 0x05 {
            app_id: String,
            #[serde(with = "hex_bytes")]
            proof: Bytes,
        },

        // Control plane: apps and shuffles (client to coordinator).
        RegisterApp = 0x10 {
            app_id: String,
            lease_ms: u32,
            /// Most shuffle bytes the app may store on one worker, if it asks for less
            /// than the workers allow (0: the workers' setting).
            stored_quota: Appended<u64>,
            /// The share of a worker's memory the app may hold, in parts per million, if
            /// it asks for less than the workers allow (0: the workers' setting).
            memory_share_ppm: Appended<u64>,
        },
        RenewLease = 0x11 {
            app_id: String,
        },
        UnregisterApp = 0x12 {
            app_id: String,
        },
        RegisterShuffle = 0x13 {
            app_id: String,
            shuffle_id: u32,
            num_maps: u32,
            num_partitions: u32,
            /// A range partitioner's sample of the map stage's input, one entry per input
            /// partition; absent or empty: none (the coordinator then predicts sizes from
            /// the first maps' outputs alone).
            sample_inputs: Appended<Vec<InputSample>>,
            /// Where the sampled records go: the non-zero counts, by input then partition.
            sample_counts: Appended<Vec<SampleCount>>,
        },
        ShufflePlacement = 0x14 {
            workers: Vec<WorkerInfo>,
            /// Primary worker id per partition.
            partition_workers: Vec<u32>,
            /// Replica worker id per partition; [`NO_WORKER`] where there is none.
            partition_replicas: Vec<u32>,
        },
        CommitMap = 0x15 {
            app_id: String,
            shuffle_id: u32,
            map_id: u32,
            attempt_id: AttemptId,
            partitions: Vec<PartitionStat>,
            /// Where the attempt's further sorted runs begin, per partition (slot) in
            /// increasing order; absent or empty: one run per partition.
            run_starts: Appended<Vec<RunStart>>,
        },
        CommitResult = 0x16 {
            status: CommitStatus,
            winning_attempt: AttemptId,
        },
        UnregisterShuffle = 0x17 {
            app_id: String,
            shuffle_id: u32,
        },
        GetShuffleStatus = 0x18 {
            app_id: String,
            shuffle_id: u32,
            /// The partitions `[runs_from, runs_to)` whose maps' run starts the answer
            /// lists (with those of their splits); absent or empty: none.
            runs_from: Appended<u32>,
            runs_to: Appended<u32>,
        },
        ShuffleStatus = 0x19 {
            num_maps: u32,
            num_partitions: u32,
            committed_maps: u32,
            workers: Vec<WorkerInfo>,
            partition_workers: Vec<u32>,
            /// Committed attempt per map; [`AttemptId::NONE`] for a map that has not committed.
            map_attempts: Vec<AttemptId>,
            partition_bytes: Vec<u64>,
            partition_records: Vec<u64>,
            /// Replica worker id per partition; [`NO_WORKER`] where there is none.
            partition_replicas: Vec<u32>,
            /// The partition each split continues, for the slots from `num_partitions`
            /// on (the four per-partition lists above then cover every slot): a reader of
            /// partition `p` reads slot `p` and every slot whose entry here is `p`.
            split_parents: Appended<Vec<u32>>,
            /// How many run starts the committed maps reported in the whole shuffle (0: every
            /// map pushed each partition as one run; a reader then need not ask for them).
            run_count: Appended<u64>,
            /// The run starts of the partitions asked for, by (partition, map, batch).
            run_starts: Appended<Vec<MapRunStart>>,
        },
        /// A client could not reach a worker; the coordinator checks it at once instead of
        /// waiting for its heartbeat deadline.
        ReportWorkerFailure = 0x1A {
            addr: String,
        },
        /// A worker could not read committed data of `partition` (a batch corrupt, or its
        /// file, bytes or uploaded segment missing): its copy of the partition no longer
        /// counts (`worker_addr` is the worker's own address).
        ReportLostCopy = 0x1B {
            app_id: String,
            shuffle_id: u32,
            partition: u32,
            worker_addr: String,
        },

        /// The answer to `RegisterApp`: the app's token ([`crate::auth::TOKEN_LEN`] bytes),
        /// which its executors use to authenticate; empty when authentication is off.
        AppRegistered = 0x1C {
            #[serde(with = "hex_bytes")]
            token: Bytes,
        },
        /// A worker asks for the split that continues `slot` (a partition or a split)
        /// once it holds enough of it; asking again answers the same split.
        SplitPartition = 0x1D {
            app_id: String,
            shuffle_id: u32,
            slot: u32,
        },
        /// The answer to `SplitPartition`: pushes of the partition go on in `slot`, whose
        /// primary is the worker at `addr`.
        PartitionSplit = 0x1E {
            slot: u32,
            addr: String,
        },

        // Control plane: membership (worker to coordinator).
        RegisterWorker = 0x20 {
            addr: String,
            memory_budget: u64,
            /// Chosen at random when the worker process starts. A new value for a known
            /// address tells the coordinator the worker restarted and lost its memory.
            incarnation: u64,
            /// The worker's host label (see [`WorkerInfo::host`]); empty: the host of `addr`.
            host: String,
            /// The worker's zone label (see [`WorkerInfo::zone`]).
            zone: String,
        },
        WorkerRegistered = 0x21 {
            worker_id: u32,
            heartbeat_ms: u32,
        },
        Heartbeat = 0x22 {
            worker_id: u32,
            buffered_bytes: u64,
            stored_bytes: u64,
            /// The worker's disk is full: place nothing new on it.
            disk_full: bool,
            /// Payload bytes the worker has accepted from pushes since it started
            /// (appended in version 2; absent from a worker that predates it).
            pushed_bytes: Appended<u64>,
            /// Payload bytes the worker has sent to readers since it started (appended in
            /// version 2).
            fetched_bytes: Appended<u64>,
            /// Bytes of the worker's partition files stored in the object store (appended
            /// in version 2).
            object_bytes: Appended<u64>,
        },

        // Control plane: coordinator to worker.
        PrepareShuffle = 0x30 {
            app_id: String,
            shuffle_id: u32,
            num_maps: u32,
            num_partitions: u32,
            partitions: Vec<u32>,
            /// Per entry of `partitions`: the replica's address to forward pushed batches
            /// to, or an empty string. Sent again when a partition's replica changes.
            forward_to: Vec<String>,
            /// The limits the app asked for when it registered (`RegisterApp`), which the
            /// worker applies where they are stricter than its own (0: none asked).
            app_stored_quota: Appended<u64>,
            app_memory_share_ppm: Appended<u64>,
            /// Per entry of `partitions`, for a worker holding it as primary: the slot the
            /// partition continues in (a split), or [`NO_SLOT`] for none; and that slot's
            /// primary's address (empty for none). The worker answers later pushes of the
            /// slot `PushRedirect` to it. Absent: nothing changes (the worker learns splits
            /// only from `SplitPartition`'s answers).
            continued_in: Appended<Vec<u32>>,
            continued_at: Appended<Vec<String>>,
        },
        MapCommitted = 0x31 {
            app_id: String,
            shuffle_id: u32,
            map_id: u32,
            attempt_id: AttemptId,
            partitions: Vec<PartitionBytes>,
            /// When the worker answers: once the data is held ([`Durability::Memory`]),
            /// written and synced to its disk ([`Durability::Disk`]), or stored in its object
            /// store ([`Durability::ObjectStore`]).
            durability: Durability,
        },
        /// `everywhere`: the shuffle is gone for good, so the worker also deletes what
        /// every worker uploaded of it to the object store; otherwise only this worker's
        /// own copies go (a worker that was declared lost and came back).
        DeleteShuffle = 0x32 {
            app_id: String,
            shuffle_id: u32,
            everywhere: bool,
        },
        /// As `DeleteShuffle`, for every shuffle of an app.
        DeleteApp = 0x33 {
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
        CheckCopies = 0x35 {
            app_id: String,
            shuffle_id: u32,
            map_attempts: Vec<AttemptId>,
            partitions: Vec<u32>,
            expected_bytes: Vec<u64>,
            adopt: bool,
        },
        CopiesHeld = 0x36 {
            partitions: Vec<u32>,
        },
        /// The coordinator's committed attempt of every map of a shuffle, sent to a worker
        /// that (re-)registers: it replaces the worker's own view.
        SyncCommits = 0x34 {
            app_id: String,
            shuffle_id: u32,
            map_attempts: Vec<AttemptId>,
        },

        // Data plane (client to worker).
        PushBatch = 0x40 {
            header: PushHeader,
            #[serde(with = "hex_bytes")]
            payload: Bytes,
        },
        Fetch = 0x41 {
            app_id: String,
            shuffle_id: u32,
            partition: u32,
            start_map: u32,
            end_map: u32,
            resume_after: Option<ResumePoint>,
            /// A run's next segment, for a merging reader: the worker sends each map's
            /// batches only until they add up to this many payload bytes (at least one
            /// batch per map, so a map whose answer is shorter has no more). 0: all.
            run_bytes: Appended<u64>,
            /// One run of a map's several: its batches stop before this sequence number
            /// (where the next run begins). 0: no end.
            end_batch_seq: Appended<u32>,
            /// The attempt the reader expects every map of the range to have committed
            /// (a merging reader's run starts belong to one attempt): a worker whose
            /// committed attempt differs refuses the read (`commit_mismatch`) rather than
            /// pair another attempt's batches with them. `NONE`: whatever is committed.
            expected_attempt: Appended<AttemptId>,
            /// What the reader takes besides `FetchChunk`: bit [`FETCH_RECORDS`], stored
            /// records (`FetchRecords`). A reader that sets it checks every record and
            /// asks again without it when one fails (see `docs/protocol.md`). A sender of
            /// it sends the three fields before it too (`expected_attempt` as
            /// `AttemptId::NONE`, not absent: the fields are positional).
            flags: Appended<u32>,
        },
        FetchChunk = 0x42 {
            batches: Vec<FetchedBatch>,
        },
        /// Batches of a fetch as the worker stores them, in place of a `FetchChunk`, only
        /// to a reader that set [`FETCH_RECORDS`].
        FetchRecords = 0x47 {
            batches: Vec<StoredBatch>,
        },
        FetchEnd = 0x43 {
            batches: u64,
            bytes: u64,
        },
        GetWorkerStats = 0x44,
        WorkerStats = 0x45 {
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
        /// A push's answer when its partition was split: the batch is stored, and the
        /// map's next batches of it go to `slot` on the worker at `addr` (the batches
        /// already sent here are still taken).
        PushRedirect = 0x46 {
            slot: u32,
            addr: String,
        },
    }
}

impl Message {
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

    /// Decodes a body of the given kind. Bytes after the last known field are ignored.
    pub fn decode(kind: u8, body: Bytes) -> Result<Message, DecodeError> {
        let kind = MessageKind::from_u8(kind).ok_or(DecodeError::UnknownKind(kind))?;
        Message::decode_body(kind, &mut Reader::new(body))
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
