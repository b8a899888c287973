//! One client connection to a worker: pushes, fetches and coordinator calls.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes};
use crossdock_proto::codec::Reader;
use crossdock_proto::io::{read_exact_bytes, read_header, skip, write_message};
use crossdock_proto::{
    checksum, Durability, ErrorCode, FetchedBatch, FrameHeader, Message, MessageKind, PushHeader,
    ResumePoint, FLAG_REPLICA, MAX_CONTROL_FRAME, PROTOCOL_VERSION,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use super::partition::{
    Insert, Piece, ReadView, Source, UploadedRange, RECORD_HEADER, RECORD_MAGIC,
};
use super::{Worker, FETCH_CHUNK};
use crate::error::ServerError;

type In = BufReader<OwnedReadHalf>;
type Out = BufWriter<OwnedWriteHalf>;

/// What to do with the connection after a request.
enum Next {
    Continue,
    Close,
}

/// A response, queued in request order for the connection's writer.
enum Reply {
    Now(u64, Message),
    /// A reply a task computes: a push forwarded to the partition's replica
    /// (acknowledged once the replica is), a commit waiting for its durability, an
    /// adoption from the object store.
    Forwarded(u64, tokio::task::JoinHandle<Message>),
    /// A fetch, streamed by the writer when its turn comes.
    Fetch(u64, FetchRequest),
}

/// How long a fetch waits for a partition being restored (see `Partition::restoring`).
const RESTORE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Replies queued beyond this many make the reader wait (bounds the memory a slow
/// client can pin through forwarded pushes awaiting acknowledgement).
const REPLY_QUEUE: usize = 256;

/// Serves one connection until the peer closes it.
pub(super) async fn serve(stream: TcpStream, worker: Arc<Worker>) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    let mut r = BufReader::with_capacity(256 << 10, r);
    let w = BufWriter::with_capacity(64 << 10, w);
    // The reader parses requests and queues their replies in order; the writer sends
    // them. A forwarded push's reply waits for the replica while the reader goes on
    // reading the next pushes, so replication does not serialize a connection.
    let (tx, rx) = tokio::sync::mpsc::channel(REPLY_QUEUE);
    let writer = tokio::spawn(write_replies(w, rx, worker.clone()));
    let read = read_requests(&mut r, &tx, &worker).await;
    drop(tx);
    let written = writer.await.map_err(io::Error::other)?;
    read.and(written)
}

async fn write_replies(
    mut w: Out,
    mut rx: tokio::sync::mpsc::Receiver<Reply>,
    worker: Arc<Worker>,
) -> io::Result<()> {
    while let Some(reply) = rx.recv().await {
        match reply {
            Reply::Now(id, msg) => write_message(&mut w, id, &msg).await?,
            Reply::Forwarded(id, ack) => {
                let msg = ack.await.unwrap_or_else(|e| {
                    error_reply(
                        &worker,
                        ServerError::new(ErrorCode::Internal, format!("forward task failed: {e}")),
                    )
                });
                write_message(&mut w, id, &msg).await?
            }
            Reply::Fetch(id, req) => {
                if let Err(err) = stream_fetch(&mut w, &worker, id, req).await? {
                    write_message(&mut w, id, &error_reply(&worker, err)).await?;
                }
            }
        }
        if rx.is_empty() {
            w.flush().await?;
        }
    }
    w.flush().await
}

/// Counts and logs a rejection; returns its `Error` message.
fn error_reply(worker: &Worker, err: ServerError) -> Message {
    worker.metrics.errors.inc(err.code);
    tracing::debug!(code = %err.code, message = %err.message, "request rejected");
    err.to_message()
}

type Replies = tokio::sync::mpsc::Sender<Reply>;

async fn send(tx: &Replies, reply: Reply) -> io::Result<()> {
    tx.send(reply)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "connection writer stopped"))
}

async fn reply_error(
    tx: &Replies,
    worker: &Worker,
    request_id: u64,
    err: ServerError,
) -> io::Result<()> {
    send(tx, Reply::Now(request_id, error_reply(worker, err))).await
}

async fn read_requests(r: &mut In, tx: &Replies, worker: &Arc<Worker>) -> io::Result<()> {
    loop {
        let h = match read_header(r).await {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let err = ServerError::new(ErrorCode::MalformedFrame, e.to_string());
                return reply_error(tx, worker, 0, err).await;
            }
            Err(e) => return Err(e),
        };
        let next = if h.version != PROTOCOL_VERSION {
            let err = ServerError::new(
                ErrorCode::UnsupportedVersion,
                format!("protocol version {} is not supported; this worker speaks version {PROTOCOL_VERSION}", h.version),
            );
            reply_error(tx, worker, h.request_id, err).await?;
            Next::Close
        } else if h.kind == MessageKind::PushBatch as u8 {
            handle_push(r, tx, worker, h).await?
        } else if h.body_len > MAX_CONTROL_FRAME {
            let err = ServerError::new(
                ErrorCode::FrameTooLarge,
                format!(
                    "frame body of {} bytes exceeds the limit of {MAX_CONTROL_FRAME} bytes",
                    h.body_len
                ),
            );
            reply_error(tx, worker, h.request_id, err).await?;
            Next::Close
        } else {
            let body = read_exact_bytes(r, h.body_len as usize).await?;
            match Message::decode(h.kind, body) {
                Err(e) => {
                    reply_error(tx, worker, h.request_id, e.into()).await?;
                    Next::Continue
                }
                Ok(Message::Fetch {
                    app_id,
                    shuffle_id,
                    partition,
                    start_map,
                    end_map,
                    resume_after,
                }) => {
                    let req = FetchRequest {
                        app_id,
                        shuffle_id,
                        partition,
                        start_map,
                        end_map,
                        resume_after,
                    };
                    send(tx, Reply::Fetch(h.request_id, req)).await?;
                    Next::Continue
                }
                Ok(Message::MapCommitted {
                    app_id,
                    shuffle_id,
                    map_id,
                    attempt_id,
                    partitions,
                    durability,
                }) => {
                    let store = &worker.store;
                    let reply = match store.map_committed(
                        &app_id,
                        shuffle_id,
                        map_id,
                        attempt_id,
                        &partitions,
                    ) {
                        Err(err) => Reply::Now(h.request_id, error_reply(worker, err)),
                        Ok(()) if durability == Durability::Memory => {
                            Reply::Now(h.request_id, Message::Ok)
                        }
                        // Answer once the map's batches are written and synced, or
                        // uploaded; other requests on the connection go on meanwhile.
                        Ok(()) => {
                            let (store, worker) = (store.clone(), worker.clone());
                            Reply::Forwarded(
                                h.request_id,
                                tokio::spawn(async move {
                                    match store
                                        .persist_map(
                                            &app_id, shuffle_id, map_id, attempt_id, durability,
                                        )
                                        .await
                                    {
                                        Ok(()) => Message::Ok,
                                        Err(err) => error_reply(&worker, err),
                                    }
                                }),
                            )
                        }
                    };
                    send(tx, reply).await?;
                    Next::Continue
                }
                // Adoption reads from the object store: answered when done, meanwhile
                // the connection goes on.
                Ok(Message::CheckCopies {
                    app_id,
                    shuffle_id,
                    map_attempts,
                    partitions,
                    expected_bytes,
                    adopt: true,
                }) => {
                    let worker = worker.clone();
                    let task = tokio::spawn(async move {
                        match worker
                            .store
                            .adopt(
                                &app_id,
                                shuffle_id,
                                &map_attempts,
                                &partitions,
                                &expected_bytes,
                            )
                            .await
                        {
                            Ok(partitions) => Message::CopiesHeld { partitions },
                            Err(err) => error_reply(&worker, err),
                        }
                    });
                    send(tx, Reply::Forwarded(h.request_id, task)).await?;
                    Next::Continue
                }
                Ok(msg) => {
                    let reply = match handle_control(worker, msg) {
                        Ok(m) => m,
                        Err(err) => error_reply(worker, err),
                    };
                    send(tx, Reply::Now(h.request_id, reply)).await?;
                    Next::Continue
                }
            }
        };
        if let Next::Close = next {
            return Ok(());
        }
    }
}

fn handle_control(worker: &Arc<Worker>, msg: Message) -> Result<Message, ServerError> {
    let store = &worker.store;
    match msg {
        Message::PrepareShuffle {
            app_id,
            shuffle_id,
            num_maps,
            num_partitions,
            partitions,
            forward_to,
        } => {
            store.prepare(
                &app_id,
                shuffle_id,
                num_maps,
                num_partitions,
                &partitions,
                &forward_to,
            )?;
            Ok(Message::Ok)
        }
        Message::CheckCopies {
            app_id,
            shuffle_id,
            map_attempts,
            partitions,
            expected_bytes,
            adopt: false,
        } => Ok(Message::CopiesHeld {
            partitions: store.check_copies(
                &app_id,
                shuffle_id,
                &map_attempts,
                &partitions,
                &expected_bytes,
            )?,
        }),
        Message::DeleteShuffle {
            app_id,
            shuffle_id,
            everywhere,
        } => {
            store.delete_shuffle(&app_id, shuffle_id, everywhere);
            Ok(Message::Ok)
        }
        Message::DeleteApp { app_id, everywhere } => {
            store.delete_app(&app_id, everywhere);
            Ok(Message::Ok)
        }
        Message::SyncCommits {
            app_id,
            shuffle_id,
            map_attempts,
        } => {
            store.sync_commits(&app_id, shuffle_id, &map_attempts)?;
            Ok(Message::Ok)
        }
        Message::GetWorkerStats => Ok(worker.stats()),
        other => Err(ServerError::new(
            ErrorCode::UnknownMessageKind,
            format!("a worker does not accept {:?} messages", other.kind()),
        )),
    }
}

/// Reads a push: header first, credit second, payload last.
async fn handle_push(
    r: &mut In,
    tx: &Replies,
    worker: &Arc<Worker>,
    h: FrameHeader,
) -> io::Result<Next> {
    let body_len = h.body_len as u64;
    // The header: a string and the fixed fields.
    if body_len < 2 {
        skip(r, body_len).await?;
        let err = ServerError::new(
            ErrorCode::TruncatedFrame,
            "push frame ends before its app id",
        );
        reply_error(tx, worker, h.request_id, err).await?;
        return Ok(Next::Continue);
    }
    // One buffer for the whole routing header: its first two bytes give its length.
    let mut raw = vec![0u8; 2];
    r.read_exact(&mut raw).await?;
    let app_len = u16::from_be_bytes([raw[0], raw[1]]) as u64;
    let header_len = 2 + app_len + PushHeader::FIXED_LEN as u64;
    if body_len < header_len {
        skip(r, body_len - 2).await?;
        let err = ServerError::new(
            ErrorCode::TruncatedFrame,
            format!("push frame of {body_len} bytes ends inside its {header_len}-byte header"),
        );
        reply_error(tx, worker, h.request_id, err).await?;
        return Ok(Next::Continue);
    }
    raw.resize(header_len as usize, 0);
    r.read_exact(&mut raw[2..]).await?;
    let header = match PushHeader::decode(&mut Reader::new(Bytes::from(raw))) {
        Ok(hdr) => hdr,
        Err(e) => {
            skip(r, body_len - header_len).await?;
            reply_error(tx, worker, h.request_id, e.into()).await?;
            return Ok(Next::Continue);
        }
    };
    let payload_len = body_len - header_len;
    let store = &worker.store;
    let (shuffle, part) = match store.admit_push(&header, payload_len) {
        Ok(x) => x,
        Err(err) => {
            // Skip the payload so the connection stays usable, unless it is absurdly
            // large, which means the stream is not what it claims to be.
            let next = if payload_len <= 4 * store.max_batch + (1 << 20) {
                skip(r, payload_len).await?;
                Next::Continue
            } else {
                Next::Close
            };
            reply_error(tx, worker, h.request_id, err).await?;
            return Ok(next);
        }
    };
    store.budget.take(payload_len).await;
    let payload = match read_exact_bytes(r, payload_len as usize).await {
        Ok(p) => p,
        Err(e) => {
            store.budget.give_back(payload_len);
            return Err(e);
        }
    };
    if checksum(&payload) != header.crc32c {
        store.budget.give_back(payload_len);
        let err = ServerError::new(
            ErrorCode::BadChecksum,
            format!(
                "batch {} of map {} attempt {} for partition {}: CRC32C {:08x} does not match the header's {:08x}; the batch was dropped",
                header.batch_seq, header.map_id, header.attempt_id, header.partition, checksum(&payload), header.crc32c
            ),
        );
        reply_error(tx, worker, h.request_id, err).await?;
        return Ok(Next::Continue);
    }
    let copy = payload.clone();
    match part.insert(
        header.map_id,
        header.attempt_id,
        header.batch_seq,
        header.crc32c,
        payload,
    ) {
        Insert::Stored => {
            worker
                .metrics
                .pushed_bytes
                .fetch_add(payload_len, Ordering::Relaxed);
            worker
                .metrics
                .pushed_batches
                .fetch_add(1, Ordering::Relaxed);
            if store.budget.used() > store.high_water {
                store.budget.pressure.notify_one();
            }
        }
        Insert::Duplicate => {
            store.budget.give_back(payload_len);
            worker
                .metrics
                .duplicate_batches
                .fetch_add(1, Ordering::Relaxed);
        }
        Insert::Deleted => {
            store.budget.give_back(payload_len);
            let err = ServerError::new(
                ErrorCode::UnknownShuffle,
                format!(
                    "shuffle {} of app '{}' was deleted while the batch arrived",
                    shuffle.shuffle_id, shuffle.app_id
                ),
            );
            reply_error(tx, worker, h.request_id, err).await?;
            return Ok(Next::Continue);
        }
    }
    // A primary acknowledges only once the replica holds the batch too (a retried,
    // duplicate batch is forwarded again: the replica may be the one that missed it).
    let forward = if h.flags & FLAG_REPLICA == 0 {
        part.forward_to()
    } else {
        None
    };
    let reply = match forward {
        None => Reply::Now(h.request_id, Message::Ok),
        Some(addr) => match worker.forward(&addr, &header, &copy).await {
            Ok(ack) => Reply::Forwarded(h.request_id, ack),
            Err(err) => Reply::Now(h.request_id, error_reply(worker, err)),
        },
    };
    send(tx, reply).await?;
    Ok(Next::Continue)
}

struct FetchRequest {
    app_id: String,
    shuffle_id: u32,
    partition: u32,
    start_map: u32,
    end_map: u32,
    resume_after: Option<ResumePoint>,
}

/// Streams the committed batches of a partition's map range as `FetchChunk` frames
/// followed by `FetchEnd`. The outer error is a broken connection; the inner one is a
/// rejection to report to the reducer.
async fn stream_fetch(
    w: &mut Out,
    worker: &Arc<Worker>,
    request_id: u64,
    req: FetchRequest,
) -> io::Result<Result<(), ServerError>> {
    let (shuffle, part) = match worker
        .store
        .partition(&req.app_id, req.shuffle_id, req.partition)
    {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    if req.start_map >= req.end_map || req.end_map > shuffle.num_maps {
        return Ok(Err(ServerError::new(
            ErrorCode::InvalidArgument,
            format!(
                "map range [{}, {}) is empty or exceeds the shuffle's {} maps",
                req.start_map, req.end_map, shuffle.num_maps
            ),
        )));
    }
    // A copy placed here for a lost one is read once the coordinator found it whole.
    let restore_deadline = tokio::time::Instant::now() + RESTORE_WAIT;
    while part.restoring.load(Ordering::Acquire) {
        if tokio::time::Instant::now() > restore_deadline {
            return Ok(Err(ServerError::new(
                ErrorCode::ShuffleNotComplete,
                format!(
                    "partition {} is still being restored after {} s; read it again later",
                    req.partition,
                    RESTORE_WAIT.as_secs()
                ),
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    if let Some((first, missing)) = shuffle.first_uncommitted(req.start_map, req.end_map) {
        return Ok(Err(ServerError::new(
            ErrorCode::ShuffleNotComplete,
            format!(
                "{missing} map(s) of [{}, {}) have not committed yet (first: map {first}); fetch after the map stage completes",
                req.start_map, req.end_map
            ),
        )));
    }
    let view = match part.read_view(
        req.start_map,
        req.end_map,
        |m| shuffle.committed(m),
        req.resume_after,
    ) {
        Ok(v) => v,
        Err(e) => {
            return Ok(Err(ServerError::io(
                &format!("opening {}", part.path.display()),
                e,
            )))
        }
    };
    let pieces = &view.pieces;
    let budget = &worker.fetch_budget;
    let (mut batches, mut bytes) = (0u64, 0u64);
    // One read buffer for the whole stream, sized by its largest chunk.
    let mut buf: Vec<u8> = Vec::new();
    let mut credit = Credit { budget, held: 0 };
    let mut rest = &pieces[..];
    while !rest.is_empty() {
        // One chunk: as many pieces as fit in FETCH_CHUNK (at least one).
        let mut n = 0;
        let mut size = 0u64;
        while n < rest.len() && (n == 0 || size + rest[n].len as u64 <= FETCH_CHUNK) {
            size += rest[n].len as u64;
            n += 1;
        }
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        // The read buffer grows to the largest chunk read from the file; the stream
        // holds credit for it until it ends (the guard returns it on every path).
        let stored_bytes: u64 = chunk
            .iter()
            .filter(|p| !matches!(p.source, Source::Memory(_)))
            .map(|p| (RECORD_HEADER as u32 + p.len) as u64)
            .sum();
        credit.grow_to(stored_bytes).await;
        let (returned, loaded) = load_chunk(chunk, worker, &view, std::mem::take(&mut buf)).await;
        buf = returned;
        match loaded {
            Ok(batches_out) => write_chunk(w, request_id, &batches_out, &buf).await?,
            Err(e) => {
                if e.code == ErrorCode::CorruptData {
                    // Before the reducer hears of it, so that when it asks the
                    // coordinator, this copy no longer counts.
                    worker
                        .report_corruption(&req.app_id, req.shuffle_id, req.partition)
                        .await;
                }
                return Ok(Err(e));
            }
        }
        batches += chunk.len() as u64;
        bytes += size;
    }
    worker
        .metrics
        .fetched_batches
        .fetch_add(batches, Ordering::Relaxed);
    worker
        .metrics
        .fetched_bytes
        .fetch_add(bytes, Ordering::Relaxed);
    write_message(w, request_id, &Message::FetchEnd { batches, bytes }).await?;
    w.flush().await?;
    Ok(Ok(()))
}

/// Credit held from a memory budget, returned when dropped.
struct Credit<'a> {
    budget: &'a crate::memory::MemoryBudget,
    held: u64,
}

impl Credit<'_> {
    /// Holds at least `n` bytes (never more than the whole budget). To grow, it first
    /// returns what it holds and then queues for the whole amount, so streams never
    /// wait on each other while holding credit (no deadlock).
    async fn grow_to(&mut self, n: u64) {
        let n = n.min(self.budget.total());
        if n > self.held {
            self.budget.give_back(std::mem::take(&mut self.held));
            self.budget.take(n).await;
            self.held = n;
        }
    }
}

impl Drop for Credit<'_> {
    fn drop(&mut self) {
        self.budget.give_back(self.held);
    }
}

/// Where a batch of an outgoing chunk is held.
enum Held {
    Memory(Bytes),
    /// A range of the stream's read buffer.
    Buffer(usize, usize),
}

struct OutBatch {
    map_id: u32,
    seq: u32,
    crc: u32,
    held: Held,
}

/// Records that follow each other in the partition file (`chunk[first..last]`, bytes
/// `[start, end)` of the file), read with one call into `buf[pos..]`.
struct Span {
    first: usize,
    last: usize,
    start: u64,
    end: u64,
    pos: usize,
    /// Read from the object store (the local copy was evicted).
    object: bool,
}

/// Groups a chunk's stored pieces into spans. Returns them and the buffer size they need.
fn plan_spans(chunk: &[Piece]) -> (Vec<Span>, usize) {
    let mut spans = Vec::new();
    let (mut i, mut pos) = (0, 0usize);
    while i < chunk.len() {
        let (start, object) = match chunk[i].source {
            Source::Memory(_) => {
                i += 1;
                continue;
            }
            Source::File(o) => (o, false),
            Source::Object(o) => (o, true),
        };
        let mut end = start + (RECORD_HEADER as u64) + chunk[i].len as u64;
        let mut j = i + 1;
        while j < chunk.len() {
            match chunk[j].source {
                Source::File(o) | Source::Object(o)
                    if o == end && object == matches!(chunk[j].source, Source::Object(_)) =>
                {
                    end += RECORD_HEADER as u64 + chunk[j].len as u64;
                    j += 1;
                }
                _ => break,
            }
        }
        spans.push(Span {
            first: i,
            last: j,
            start,
            end,
            pos,
            object,
        });
        pos += (end - start) as usize;
        i = j;
    }
    (spans, pos)
}

/// Loads a chunk's payloads into `buf` (reused across the chunks of a stream): records
/// that follow each other are read with one call, from the data file or, for evicted
/// ones, from the object store; every record's header and CRC32C is checked.
async fn load_chunk(
    chunk: &[Piece],
    worker: &Worker,
    view: &ReadView,
    mut buf: Vec<u8>,
) -> (Vec<u8>, Result<Vec<OutBatch>, ServerError>) {
    let (spans, need) = plan_spans(chunk);
    if buf.len() < need {
        buf.resize(need, 0);
    }
    for span in spans.iter().filter(|s| s.object) {
        let dst = &mut buf[span.pos..span.pos + (span.end - span.start) as usize];
        if let Err(e) = read_evicted(worker, &view.segments, span.start, dst).await {
            return (buf, Err(e));
        }
    }
    // (buffer position, file range) of every span on local disk, read off the runtime.
    let reads: Vec<(usize, u64, u64)> = spans
        .iter()
        .filter(|s| !s.object)
        .map(|s| (s.pos, s.start, s.end))
        .collect();
    if !reads.is_empty() {
        let file = view.file.clone().expect("file opened for file pieces");
        let task = move || {
            let res = reads.iter().try_for_each(|&(pos, start, end)| {
                file.read_exact_at(&mut buf[pos..pos + (end - start) as usize], start)
            });
            (buf, res)
        };
        match tokio::task::spawn_blocking(task).await {
            Ok((returned, res)) => {
                buf = returned;
                if let Err(e) = res {
                    return (buf, Err(ServerError::io("reading partition file", e)));
                }
            }
            Err(e) => {
                let err = ServerError::new(ErrorCode::Internal, format!("read task failed: {e}"));
                return (Vec::new(), Err(err));
            }
        }
    }
    let out = check_chunk(chunk, &spans, &buf);
    (buf, out)
}

/// Reads bytes `[start, start + dst.len())` of an evicted partition file from the
/// segments that hold them.
async fn read_evicted(
    worker: &Worker,
    segments: &[UploadedRange],
    start: u64,
    dst: &mut [u8],
) -> Result<(), ServerError> {
    let store = worker.store.object_store().ok_or_else(|| {
        ServerError::new(
            ErrorCode::Internal,
            "evicted data but no object store".to_string(),
        )
    })?;
    let end = start + dst.len() as u64;
    let mut at = start;
    while at < end {
        let seg = segments
            .iter()
            .find(|s| s.start <= at && at < s.end)
            .ok_or_else(|| {
                ServerError::new(
                    ErrorCode::Internal,
                    format!("no uploaded segment holds offset {at} of an evicted partition file"),
                )
            })?;
        let upto = end.min(seg.end);
        let bytes = store
            .read_range(&seg.key, at - seg.start..upto - seg.start)
            .await
            .map_err(|e| ServerError::new(ErrorCode::Io, e))?;
        let from = (at - start) as usize;
        dst[from..from + bytes.len()].copy_from_slice(&bytes);
        worker
            .metrics
            .object_read_bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        at = upto;
    }
    Ok(())
}

/// Checks the loaded records against the index (header fields and CRC32C) and lists
/// the chunk's batches in order.
fn check_chunk(chunk: &[Piece], spans: &[Span], buf: &[u8]) -> Result<Vec<OutBatch>, ServerError> {
    let mut out = Vec::with_capacity(chunk.len());
    let mut spans = spans.iter().peekable();
    let mut i = 0;
    while i < chunk.len() {
        let p = &chunk[i];
        if let Source::Memory(data) = &p.source {
            out.push(OutBatch {
                map_id: p.map_id,
                seq: p.seq,
                crc: p.crc,
                held: Held::Memory(data.clone()),
            });
            i += 1;
            continue;
        }
        let span = spans.next().expect("a span for every stored piece");
        debug_assert_eq!(span.first, i);
        let mut off = span.pos;
        for q in &chunk[span.first..span.last] {
            let mut hdr = &buf[off..off + RECORD_HEADER];
            let fields = [
                hdr.get_u32(),
                hdr.get_u32(),
                hdr.get_u32(),
                hdr.get_u32(),
                hdr.get_u32(),
                hdr.get_u32(),
            ];
            let want = [RECORD_MAGIC, q.map_id, q.attempt_id, q.seq, q.len, q.crc];
            let body = off + RECORD_HEADER;
            let payload = &buf[body..body + q.len as usize];
            if fields != want || checksum(payload) != q.crc {
                let place = if span.object {
                    "the partition file (read from the object store)"
                } else {
                    "the partition file"
                };
                return Err(ServerError::new(
                    ErrorCode::CorruptData,
                    format!(
                        "stored batch {} of map {} (attempt {}) failed its check at offset {} of {place}",
                        q.seq,
                        q.map_id,
                        q.attempt_id,
                        span.start + (off - span.pos) as u64
                    ),
                ));
            }
            out.push(OutBatch {
                map_id: q.map_id,
                seq: q.seq,
                crc: q.crc,
                held: Held::Buffer(body, q.len as usize),
            });
            off = body + q.len as usize;
        }
        i = span.last;
    }
    Ok(out)
}

async fn write_chunk(
    w: &mut Out,
    request_id: u64,
    batches: &[OutBatch],
    buf: &[u8],
) -> io::Result<()> {
    let data = |b: &OutBatch| -> usize {
        match &b.held {
            Held::Memory(d) => d.len(),
            Held::Buffer(_, len) => *len,
        }
    };
    let body_len: usize = 4 + batches
        .iter()
        .map(|b| FetchedBatch::HEADER_LEN + data(b))
        .sum::<usize>();
    let mut head = Vec::with_capacity(20);
    head.extend_from_slice(
        &FrameHeader::new(MessageKind::FetchChunk as u8, request_id, body_len as u32).encode(),
    );
    head.put_u32(batches.len() as u32);
    w.write_all(&head).await?;
    for b in batches {
        let mut bh = [0u8; FetchedBatch::HEADER_LEN];
        let mut s = &mut bh[..];
        s.put_u32(b.map_id);
        s.put_u32(b.seq);
        s.put_u32(data(b) as u32);
        s.put_u32(b.crc);
        w.write_all(&bh).await?;
        match &b.held {
            Held::Memory(d) => w.write_all(d).await?,
            Held::Buffer(start, len) => w.write_all(&buf[*start..*start + *len]).await?,
        }
    }
    Ok(())
}
