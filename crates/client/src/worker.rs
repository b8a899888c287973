//! Typed calls to a worker: pipelined pushes and resumable fetches.

use std::collections::VecDeque;

use crossdock_proto::io::write_message;
use crossdock_proto::{
    checksum, Appended, AttemptId, FetchedBatch, Message, PushHeader, ResumePoint, StoredBatch,
    FETCH_RECORDS,
};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

use crate::connection::{connect_stream, read_answer, RpcConnection};
use crate::error::{ClientError, Result};
use crate::keyring::{handshake, Keyring};
use crate::tls::Stream;

/// A client of one worker's data endpoint.
pub struct WorkerClient {
    conn: RpcConnection,
}

/// A push whose acknowledgement has not been awaited yet.
pub struct PendingPush {
    rx: oneshot::Receiver<Result<Message>>,
}

impl WorkerClient {
    /// Connects to the worker at `addr`, proving the keys of `keyring` (an app's token
    /// for its pushes).
    pub async fn connect(addr: &str, keyring: &Keyring) -> Result<WorkerClient> {
        Ok(WorkerClient {
            conn: RpcConnection::connect(addr, keyring).await?,
        })
    }

    /// The worker's address.
    pub fn addr(&self) -> &str {
        self.conn.addr()
    }

    /// True once the underlying connection failed; open a new client then.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    /// Sends one batch. The CRC32C in `header` must be that of `payload`. Returns as soon
    /// as the frame is written; await [`WorkerClient::finish_push`] for the acknowledgement.
    /// The worker acknowledges only once the batch is held within its memory budget;
    /// while it has no room, the frame stays in the socket and this call waits: that is
    /// the back-pressure.
    pub async fn push(&self, header: &PushHeader, payload: &[u8]) -> Result<PendingPush> {
        Ok(PendingPush {
            rx: self.conn.start_push(header, payload).await?,
        })
    }

    /// Waits for a push's acknowledgement: the batch is held. `Some` when the partition
    /// was split: the map's next batches of it go to the split's slot and worker (batches
    /// still sent here are taken too, and count where they landed).
    pub async fn finish_push(&self, pending: PendingPush) -> Result<Option<Redirect>> {
        match self.conn.wait(pending.rx).await? {
            Message::Ok => Ok(None),
            Message::PushRedirect { slot, addr } => Ok(Some(Redirect { slot, addr })),
            other => Err(ClientError::unexpected(self.addr(), other)),
        }
    }

    /// Sends any request on the push connection.
    pub async fn call(&self, msg: &Message) -> Result<Message> {
        self.conn.call(msg).await
    }
}

/// Where a split partition goes on (a push's `PushRedirect` answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The split's slot: the partition number to push the next batches as.
    pub slot: u32,
    /// The split's primary worker.
    pub addr: String,
}

/// What a reducer reads: one partition, maps `[start_map, end_map)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRange {
    pub app_id: String,
    pub shuffle_id: u32,
    pub partition: u32,
    pub start_map: u32,
    pub end_map: u32,
}

/// Reads the committed batches of a [`FetchRange`] from one worker, in (map, batch
/// sequence) order, checking each batch's CRC32C.
///
/// When the connection breaks mid-stream, the reader reconnects and asks the worker to
/// resume after the last batch it delivered, up to `max_resumes` times, so no batch is
/// lost or delivered twice.
///
/// With [`PartitionReader::accepting_records`] the worker may send batches as it stores
/// them (`FetchRecords`, from its files with `sendfile`, unchecked there); this reader
/// then checks each record's magic, CRC, order, map range and attempt, and when one fails
/// or the stream breaks, asks the same worker again without them, whose own checked read
/// decides (`docs/protocol.md`, step 4). It asks again from where that stream began, not
/// from its last batch: a record's map and sequence number are not covered by its CRC, so
/// a damaged one could point the resume past batches never received. The batches already
/// delivered from that stream must come again first, the same (map, sequence, CRC), and
/// are not delivered twice.
pub struct PartitionReader {
    addr: String,
    keyring: Keyring,
    range: FetchRange,
    stream: Option<BufReader<Stream>>,
    ready: VecDeque<FetchedBatch>,
    last: Option<ResumePoint>,
    /// For one run of a map's several: the sequence number its batches stop before.
    end_batch_seq: u32,
    /// The attempt the range's maps must have committed (see [`PartitionReader::expecting`]).
    expected_attempt: Option<AttemptId>,
    /// Each map's committed attempt, when the reader takes stored records (indexed by
    /// map id; the whole shuffle's `map_attempts`).
    record_attempts: Option<Vec<Option<AttemptId>>>,
    /// The stream asks for stored records: until one fails its checks.
    take_records: bool,
    /// Batches received as stored records (`FetchRecords`).
    pub stored_records: u64,
    /// Times a stored record failed its checks, or a stream of them broke, and the range
    /// was asked for again without them.
    pub record_fallbacks: u32,
    /// Where the current stream began (its request's resume point).
    stream_start: Option<ResumePoint>,
    /// (map, sequence, CRC) of each batch received in the current stream while it takes
    /// records.
    from_records: VecDeque<(u32, u32, u32)>,
    /// After a fallback: the batches the checked stream must send first, already delivered.
    redelivered: VecDeque<(u32, u32, u32)>,
    done: bool,
    received_in_stream: u64,
    opened: bool,
    /// Number of times the reader resumed on a new connection.
    pub resumes: u32,
    max_resumes: u32,
    /// Payload bytes delivered so far.
    pub bytes: u64,
    /// Batches delivered so far.
    pub batches: u64,
}

impl PartitionReader {
    /// A reader of `range` from the worker at `addr`. Nothing is sent until the first
    /// call to [`PartitionReader::next_batch`].
    /// Each connection proves the keys of `keyring` (the app's token) first.
    pub fn new(addr: &str, range: FetchRange, keyring: &Keyring) -> PartitionReader {
        PartitionReader {
            addr: addr.to_string(),
            keyring: keyring.clone(),
            range,
            stream: None,
            ready: VecDeque::new(),
            last: None,
            end_batch_seq: 0,
            expected_attempt: None,
            record_attempts: None,
            take_records: false,
            stored_records: 0,
            record_fallbacks: 0,
            stream_start: None,
            from_records: VecDeque::new(),
            redelivered: VecDeque::new(),
            done: false,
            received_in_stream: 0,
            opened: false,
            resumes: 0,
            max_resumes: 3,
            bytes: 0,
            batches: 0,
        }
    }

    /// Reads only one sorted run of a one-map range: the batches from `first` to before
    /// `end` (0: to the map's end), where a map that pushed several runs began them (its
    /// commit's run starts).
    pub fn run(mut self, first: u32, end: u32) -> Self {
        self.last = first.checked_sub(1).map(|seq| ResumePoint {
            map_id: self.range.start_map,
            batch_seq: seq,
        });
        self.stream_start = self.last;
        self.end_batch_seq = end;
        self
    }

    /// Reads only if every map of the range has `attempt` committed (the attempt whose
    /// run starts the caller holds); a worker with another committed attempt refuses with
    /// `commit_mismatch` instead of sending that attempt's batches.
    pub fn expecting(mut self, attempt: AttemptId) -> Self {
        self.expected_attempt = Some(attempt);
        self
    }

    /// Takes batches as the worker stores them (`FetchRecords`), which it can send from
    /// its files without reading them; `map_attempts` are the shuffle's committed
    /// attempts per map ([`ShuffleStatus::map_attempts`](crate::ShuffleStatus)), against which each record is
    /// checked.
    pub fn accepting_records(mut self, map_attempts: Vec<Option<AttemptId>>) -> Self {
        self.record_attempts = Some(map_attempts);
        self.take_records = true;
        self
    }

    /// Sets how many times a broken stream is resumed before the error is returned.
    pub fn with_max_resumes(mut self, n: u32) -> Self {
        self.max_resumes = n;
        self
    }

    /// Breaks the current connection (tests use it to exercise resumption).
    pub fn drop_connection(&mut self) {
        self.stream = None;
    }

    async fn open(&mut self) -> Result<()> {
        if self.opened {
            self.resumes += 1;
        }
        self.opened = true;
        let mut stream = connect_stream(&self.addr, &self.keyring).await?;
        let id = handshake(&mut stream, &self.addr, &self.keyring).await?;
        // Appended fields: a later one is sent with those before it, as its "nothing"
        // (0: no cap, no end; NONE: whichever attempt is committed).
        let (run_bytes, end_batch_seq, expected_attempt, flags) =
            match (self.end_batch_seq, self.expected_attempt, self.take_records) {
                (0, None, false) => (
                    Appended(None),
                    Appended(None),
                    Appended(None),
                    Appended(None),
                ),
                (end, attempt, records) => (
                    Appended::of(0),
                    Appended::of(end),
                    Appended(Some(attempt.unwrap_or(AttemptId::NONE))),
                    Appended(records.then_some(FETCH_RECORDS)),
                ),
            };
        let req = Message::Fetch {
            app_id: self.range.app_id.clone(),
            shuffle_id: self.range.shuffle_id,
            partition: self.range.partition,
            start_map: self.range.start_map,
            end_map: self.range.end_map,
            resume_after: self.last,
            run_bytes,
            end_batch_seq,
            expected_attempt,
            flags,
        };
        let io = |source| ClientError::Io {
            addr: self.addr.clone(),
            source,
        };
        write_message(&mut stream, id, &req).await.map_err(io)?;
        stream.flush().await.map_err(io)?;
        self.stream = Some(BufReader::with_capacity(256 << 10, stream));
        self.received_in_stream = 0;
        self.stream_start = self.last;
        self.from_records.clear();
        Ok(())
    }

    /// Reads the next frame of the stream into `ready`. Transport errors are returned
    /// as [`ClientError::Io`] so the caller can resume.
    async fn read_frame(&mut self) -> Result<()> {
        let addr = self.addr.clone();
        let stream = self.stream.as_mut().expect("stream is open");
        let (_, msg) = read_answer(stream, &addr, "fetch stream").await?;
        match msg {
            Message::FetchRecords { batches } if self.take_records => {
                for b in batches {
                    self.check_record(&b)?;
                    self.accept(b.into())?;
                    self.stored_records += 1;
                }
                Ok(())
            }
            Message::FetchChunk { batches } => {
                for b in batches {
                    self.accept(b)?;
                }
                Ok(())
            }
            Message::FetchEnd { batches, .. } => {
                if let Some((map, seq, _)) = self.redelivered.front() {
                    return Err(ClientError::Corrupt(format!(
                        "{addr}'s checked read ended before (map {map}, seq {seq}), which a stored record had delivered"
                    )));
                }
                if batches != self.received_in_stream {
                    return Err(ClientError::Corrupt(format!(
                        "{addr} announced {batches} batches but sent {}",
                        self.received_in_stream
                    )));
                }
                self.done = true;
                self.stream = None;
                Ok(())
            }
            Message::Error { code, message } => {
                self.stream = None;
                Err(ClientError::remote(&addr, code, message))
            }
            other => Err(ClientError::unexpected(&addr, other)),
        }
    }

    /// Checks a batch's order and CRC32C and queues it; it becomes the resume point.
    fn accept(&mut self, b: FetchedBatch) -> Result<()> {
        let addr = &self.addr;
        if let Some(last) = self.last {
            if (b.map_id, b.batch_seq) <= (last.map_id, last.batch_seq) {
                return Err(ClientError::Corrupt(format!(
                    "batch (map {}, seq {}) from {addr} is out of order after (map {}, seq {})",
                    b.map_id, b.batch_seq, last.map_id, last.batch_seq
                )));
            }
        }
        if checksum(&b.payload) != b.crc32c {
            return Err(ClientError::Corrupt(format!(
                "batch (map {}, seq {}) of partition {} from {addr} failed its CRC32C",
                b.map_id, b.batch_seq, self.range.partition
            )));
        }
        let id = (b.map_id, b.batch_seq, b.crc32c);
        self.last = Some(ResumePoint {
            map_id: b.map_id,
            batch_seq: b.batch_seq,
        });
        self.received_in_stream += 1;
        if let Some(&want) = self.redelivered.front() {
            if id != want {
                return Err(ClientError::Corrupt(format!(
                    "{addr}'s checked read sent (map {}, seq {}) where a stored record had delivered (map {}, seq {}): the data already delivered was not the partition's",
                    id.0, id.1, want.0, want.1
                )));
            }
            // Delivered before the fallback: not again.
            self.redelivered.pop_front();
            return Ok(());
        }
        if self.take_records {
            self.from_records.push_back(id);
        }
        self.ready.push_back(b);
        Ok(())
    }

    /// What only a stored record needs checked (the worker did not): its map is in the
    /// range and its attempt is the one committed (the CRC covers the payload alone).
    fn check_record(&self, b: &StoredBatch) -> Result<()> {
        let r = &self.range;
        if self.end_batch_seq > 0 && b.batch_seq >= self.end_batch_seq {
            return Err(ClientError::Corrupt(format!(
                "record (map {}, seq {}) from {} is past the run's end {}",
                b.map_id, b.batch_seq, self.addr, self.end_batch_seq
            )));
        }
        if b.map_id < r.start_map || b.map_id >= r.end_map {
            return Err(ClientError::Corrupt(format!(
                "record (map {}, seq {}) from {} is outside maps [{}, {})",
                b.map_id, b.batch_seq, self.addr, r.start_map, r.end_map
            )));
        }
        let committed = self.expected_attempt.or_else(|| {
            self.record_attempts
                .as_ref()
                .and_then(|a| a.get(b.map_id as usize).copied().flatten())
        });
        if committed != Some(b.attempt_id) {
            return Err(ClientError::Corrupt(format!(
                "record (map {}, seq {}) from {} is of attempt {}, not the committed {}",
                b.map_id,
                b.batch_seq,
                self.addr,
                b.attempt_id,
                committed.map_or("(unknown)".to_string(), |a| a.to_string())
            )));
        }
        Ok(())
    }

    /// Stops taking stored records: the range is asked for again, without them, from where
    /// the current stream began, and what that stream delivered must come first.
    fn drop_records(&mut self) {
        self.take_records = false;
        self.record_fallbacks += 1;
        self.stream = None;
        self.last = self.stream_start;
        self.redelivered = std::mem::take(&mut self.from_records);
    }

    /// The next batch, or `None` at the end of the range.
    pub async fn next_batch(&mut self) -> Result<Option<FetchedBatch>> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                self.bytes += b.payload.len() as u64;
                self.batches += 1;
                return Ok(Some(b));
            }
            if self.done {
                return Ok(None);
            }
            let step = async {
                if self.stream.is_none() {
                    self.open().await?;
                }
                self.read_frame().await
            }
            .await;
            match step {
                Ok(()) => {}
                // A record that fails its checks, or a frame that does not decode, while
                // records are taken: the worker's checked read decides (it reports its
                // copy if the data is damaged). The batches before are good and stay.
                Err(e @ (ClientError::Corrupt(_) | ClientError::Decode { .. }))
                    if self.take_records =>
                {
                    tracing::warn!(error = %e, "a stored record failed the reader's checks; asking again without records");
                    self.drop_records();
                    // Not a resume: nothing broke.
                    self.opened = false;
                }
                Err(e) if e.is_transport() && self.resumes < self.max_resumes => {
                    tracing::debug!(error = %e, "fetch stream broke; resuming");
                    // A stream that delivered records resumes where it began, without them
                    // (their map and sequence numbers were not checked by anyone).
                    if self.take_records && !self.from_records.is_empty() {
                        self.drop_records();
                    }
                    self.stream = None;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
