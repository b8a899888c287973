//! A fetch: the committed batches of a partition's map range, streamed as `FetchChunk`
//! frames and a closing `FetchEnd`. A stream's first chunk holds up to
//! [`FIRST_CHUNK`] bytes and each next one twice the last, up to [`FETCH_CHUNK`]: the
//! reader gets its first records after a small read, and large chunks after that.
//!
//! The path is a straight line: this module asks the storage layer to open the read
//! (checks, a consistent view) and to load each chunk (memory, file or object store,
//! every record checked), and writes the chunks to the socket. The read buffer's
//! memory is credit from the worker's fetch budget.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::BufMut;
use crossdock_proto::io::write_message;
use crossdock_proto::{FetchedBatch, FrameHeader, Message, MessageKind, ResumePoint, StoredBatch};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::config::{FETCH_CHUNK, FIRST_CHUNK};
use super::node::Worker;
use super::sink::{send_file, FileSink, SendFileError};
use super::storage::partition::{Piece, ReadView, Source};
use super::storage::read::{plan_spans, stored_len, Loaded, Span};
use super::storage::{RunCut, StorageError};
use crate::memory::MemoryBudget;

/// What a `Fetch` asks for, taken out of its message when the request is read (the
/// writer streams it when its turn comes).
pub struct FetchRequest {
    pub app_id: String,
    pub shuffle_id: u32,
    pub partition: u32,
    /// `[start_map, end_map)`.
    pub maps: (u32, u32),
    pub resume_after: Option<ResumePoint>,
    /// Per map, where the batches sent stop (a merging reader's segment of one run).
    pub cut: RunCut,
    /// When the request was read: its time to a first frame is measured from here.
    pub received: Instant,
    /// The reader takes `FetchRecords` (it set `FETCH_RECORDS`).
    pub records: bool,
}

/// Streams the fetch `req`. The outer error is a broken connection; the inner one a
/// refusal to report to the reducer.
pub async fn stream<W: FileSink>(
    w: &mut W,
    worker: &Worker,
    request_id: u64,
    req: FetchRequest,
) -> io::Result<Result<(), StorageError>> {
    let FetchRequest {
        app_id,
        shuffle_id,
        partition,
        maps,
        resume_after,
        cut,
        received,
        records,
    } = req;
    let m = &worker.metrics;
    let mut first = Some(received);
    let store = &worker.store;
    // A failure that loses this copy is reported before the reducer hears of it, so that
    // when it asks the coordinator, this copy no longer counts.
    let lost = |e: StorageError| report_if_lost(worker, &app_id, shuffle_id, partition, e);
    let view = match store
        .open_read(&app_id, shuffle_id, partition, maps, resume_after, cut)
        .await
    {
        Ok(v) => v,
        Err(e) => return Ok(Err(lost(e).await)),
    };
    let (mut batches, mut bytes) = (0u64, 0u64);
    // One read buffer for the whole stream, sized by its largest chunk.
    let mut buf: Vec<u8> = Vec::new();
    let mut credit = Credit {
        budget: &worker.fetch_budget,
        app: &app_id,
        held: 0,
    };
    // File and memory pieces go as stored records, file ranges with `sendfile`, when
    // the reader takes them and the connection can.
    let zero_copy = records && worker.zero_copy_fetch.load(Ordering::Relaxed) && w.sends_files();
    let mut rest = &view.pieces[..];
    let mut limit = FIRST_CHUNK;
    while !rest.is_empty() {
        // One chunk: as many pieces as fit in `limit` (at least one).
        let mut n = 0;
        let mut size = 0u64;
        while n < rest.len() && (n == 0 || size + rest[n].len as u64 <= limit) {
            size += rest[n].len as u64;
            n += 1;
        }
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        limit = (limit * 2).min(FETCH_CHUNK);
        // The chunk's runs of adjacent file records (the checked read groups them itself).
        let spans = if zero_copy {
            plan_spans(chunk).0
        } else {
            Vec::new()
        };
        if zero_copy && !spans.iter().any(|s| s.object) {
            match write_records(w, request_id, &view, chunk, &spans).await {
                Ok(sent) => m.zero_copy_bytes.fetch_add(sent, Ordering::Relaxed),
                Err(e) => {
                    return Err(records_failed(worker, &app_id, shuffle_id, partition, e).await)
                }
            };
        } else {
            // The read buffer grows to the largest chunk read from file or store; the
            // stream holds credit for it until it ends (the guard returns it on every path).
            credit.grow_to(stored_len(chunk)).await;
            let (returned, loaded) = store
                .load_chunk(&view, chunk, std::mem::take(&mut buf))
                .await;
            buf = returned;
            match loaded {
                Ok(out) => write_chunk(w, request_id, &out, &buf).await?,
                Err(e) => return Ok(Err(lost(e).await)),
            }
        }
        if let Some(t) = first.take() {
            m.fetch_first_frame.observe(t.elapsed());
        }
        batches += chunk.len() as u64;
        bytes += size;
    }
    m.fetched_batches.fetch_add(batches, Ordering::Relaxed);
    m.fetched_bytes.fetch_add(bytes, Ordering::Relaxed);
    m.apps.fetched(&app_id, bytes);
    store.count_fetched(&app_id, shuffle_id, bytes);
    write_message(w, request_id, &Message::FetchEnd { batches, bytes }).await?;
    if let Some(t) = first {
        // Nothing to send but the end: that is the first frame.
        m.fetch_first_frame.observe(t.elapsed());
    }
    w.flush().await?;
    Ok(Ok(()))
}

/// Reports this worker's copy of the partition as lost if `e` says it is (corrupt or
/// missing committed data; see [`StorageError::loses_copy`]). Returns `e`.
async fn report_if_lost(
    worker: &Worker,
    app_id: &str,
    shuffle_id: u32,
    partition: u32,
    e: StorageError,
) -> StorageError {
    if e.loses_copy() {
        worker
            .links
            .report_lost_copy(&worker.advertised, app_id, shuffle_id, partition, &e)
            .await;
    }
    e
}

/// What a `FetchRecords` frame that could not be finished leaves behind; returns the error
/// that drops the connection (the reader then asks again through the checked read, which
/// reports the copy on its own too).
async fn records_failed(
    worker: &Worker,
    app_id: &str,
    shuffle_id: u32,
    partition: u32,
    e: SendFileError,
) -> io::Error {
    match e {
        SendFileError::Socket(e) => e,
        SendFileError::File(e) => {
            // As the checked read would: committed bytes that cannot be read lose this
            // copy, reported before the reader hears of it.
            let err = StorageError::reading("sending the partition file")(e);
            let err = report_if_lost(worker, app_id, shuffle_id, partition, err).await;
            io::Error::other(err.to_string())
        }
        SendFileError::Unsupported(e) => {
            if worker.zero_copy_fetch.swap(false, Ordering::Relaxed) {
                tracing::warn!(error = %e, "sendfile is not supported here; fetches are read and checked by the worker from now on");
            }
            e
        }
    }
}

/// Credit held from a memory budget, returned when dropped.
struct Credit<'a> {
    budget: &'a MemoryBudget,
    app: &'a str,
    held: u64,
}

impl Credit<'_> {
    /// Holds at least `n` bytes (never more than the whole budget). To grow, it first
    /// returns what it holds and then queues for the whole amount, so streams never
    /// wait on each other while holding credit (no deadlock).
    async fn grow_to(&mut self, n: u64) {
        let n = n.min(self.budget.total());
        if n > self.held {
            self.budget
                .give_back(self.app, std::mem::take(&mut self.held));
            self.budget.take(self.app, n).await;
            self.held = n;
        }
    }
}

impl Drop for Credit<'_> {
    fn drop(&mut self) {
        self.budget.give_back(self.app, self.held);
    }
}

/// Writes one `FetchChunk` frame without copying the payloads.
async fn write_chunk<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    batches: &[Loaded],
    buf: &[u8],
) -> io::Result<()> {
    let body_len: usize = 4 + batches
        .iter()
        .map(|b| FetchedBatch::HEADER_LEN + b.payload_len())
        .sum::<usize>();
    let mut head = Vec::with_capacity(20);
    head.extend_from_slice(
        &FrameHeader::new(MessageKind::FetchChunk as u8, request_id, body_len as u32).encode(),
    );
    head.put_u32(batches.len() as u32);
    w.write_all(&head).await?;
    for b in batches {
        let mut bh = [0u8; FetchedBatch::HEADER_LEN];
        FetchedBatch::put_header(
            &mut &mut bh[..],
            b.map_id,
            b.seq,
            b.payload_len() as u32,
            b.crc,
        );
        w.write_all(&bh).await?;
        w.write_all(b.payload(buf)).await?;
    }
    Ok(())
}

/// Writes one `FetchRecords` frame of `chunk` (memory and file pieces; `spans` its runs
/// of adjacent file records, from [`plan_spans`]): a memory piece's record header is
/// written here, and each span is sent from the page cache as it lies in the file, unread
/// and unchecked (the reader checks every record). Returns the bytes sent from the file.
/// An error leaves the frame unfinished: the connection must be dropped.
async fn write_records<W: FileSink>(
    w: &mut W,
    request_id: u64,
    view: &ReadView,
    chunk: &[Piece],
    spans: &[Span],
) -> Result<u64, SendFileError> {
    let socket = SendFileError::Socket;
    let body_len: usize = 4 + chunk
        .iter()
        .map(|p| StoredBatch::HEADER_LEN + p.len as usize)
        .sum::<usize>();
    let mut head = Vec::with_capacity(20);
    head.extend_from_slice(
        &FrameHeader::new(MessageKind::FetchRecords as u8, request_id, body_len as u32).encode(),
    );
    head.put_u32(chunk.len() as u32);
    w.write_all(&head).await.map_err(socket)?;
    let mut from_file = 0u64;
    let mut spans = spans.iter().peekable();
    let mut i = 0;
    while i < chunk.len() {
        if let Some(span) = spans.next_if(|s| s.first == i) {
            debug_assert!(!span.object, "evicted pieces go as FetchChunk");
            let file = view.file.as_ref().ok_or_else(|| {
                SendFileError::File(io::Error::other(
                    "a read view with file pieces has its file open",
                ))
            })?;
            send_file(w, file, span.start, span.end - span.start).await?;
            from_file += span.end - span.start;
            i = span.last;
            continue;
        }
        // Not in a span: a piece held in memory.
        let p = &chunk[i];
        let Source::Memory(data) = &p.source else {
            return Err(SendFileError::File(io::Error::other(
                "a stored piece outside every span (plan_spans covers them all)",
            )));
        };
        let mut h = [0u8; StoredBatch::HEADER_LEN];
        StoredBatch::put_header(&mut &mut h[..], p.map_id, p.attempt_id, p.seq, p.len, p.crc);
        w.write_all(&h).await.map_err(socket)?;
        w.write_all(data).await.map_err(socket)?;
        i += 1;
    }
    Ok(from_file)
}
