//! A pushed batch: routing header first, memory credit second, payload last.
//!
//! The header is checked before anything is allocated, so a refused push costs no
//! memory, and its payload is skipped so the connection stays usable. Credit for the
//! payload comes from the worker's budget before the payload is read: with no credit
//! left the connection stops reading, the pusher's TCP window fills, and that is the
//! back-pressure. A primary forwards the stored batch to the partition's replica and
//! acknowledges only once the replica did.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use crossdock_proto::codec::Reader;
use crossdock_proto::io::{read_exact_bytes, skip};
use crossdock_proto::{DecodeError, FrameHeader, PushHeader, FLAG_REPLICA};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::node::Worker;
use super::reply::{answer, send, Next, Pending, Replies, Reply};
use super::split;
use crate::auth::{unauthorized, Access};
use crate::error::ServerError;

/// How long a push to a memory-only worker waits for memory credit before it is refused.
const MEMORY_ONLY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and stores one `PushBatch` frame whose header `h` was read.
pub async fn handle<R: AsyncRead + Unpin>(
    r: &mut R,
    tx: &Replies,
    worker: &Arc<Worker>,
    access: &Access,
    h: FrameHeader,
) -> io::Result<Next> {
    let started = Instant::now();
    let body_len = h.body_len as u64;
    let header = match read_header(r, body_len).await? {
        Ok(header) => header,
        Err(e) => {
            answer(tx, h.request_id, Err(e.into())).await?;
            return Ok(Next::Continue);
        }
    };
    let payload_len = body_len - header.encoded_len() as u64;
    let store = &worker.store;
    // Only the app's own connections push to it; only a worker forwards to a replica.
    let allowed = match access.check_app(&header.app_id) {
        Ok(()) if h.flags & FLAG_REPLICA != 0 && !access.is_cluster() => Err(unauthorized(
            "only a worker forwards batches to a replica (the cluster secret)",
        )),
        other => other,
    };
    let admitted = allowed.and_then(|()| Ok(store.admit_push(&header, payload_len)?));
    let (shuffle, part) = match admitted {
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
            answer(tx, h.request_id, Err(err)).await?;
            return Ok(next);
        }
    };
    if let Some(delay) = store.congestion.delay_for(&store.budget, &header.app_id) {
        tokio::time::sleep(delay).await;
    }
    let from_map = h.flags & FLAG_REPLICA == 0;
    if store.memory_only() {
        if part.forward_to().is_none()
            && part.holds(header.map_id, header.attempt_id, header.batch_seq)
        {
            // A retry of a stored batch (its answer was lost) on a worker whose memory may
            // be spent: answered without taking credit it would never get back. (With a
            // replica the retry goes the usual way: it is forwarded again, and needs its
            // payload.)
            skip(r, payload_len).await?;
            let m = &worker.metrics;
            m.duplicate_batches.fetch_add(1, Ordering::Relaxed);
            let ok = split::answer(worker, &header, &part, part.split.took(0), from_map);
            answer(tx, h.request_id, Ok(ok)).await?;
            return Ok(Next::Continue);
        }
        // Without a disk, credit only returns when an app is deleted: a push that finds
        // none soon is refused rather than left waiting (concurrent pushes can pass the
        // admission check together).
        let take = store.budget.take(&header.app_id, payload_len);
        if tokio::time::timeout(MEMORY_ONLY_WAIT, take).await.is_err() {
            skip(r, payload_len).await?;
            let err = store.memory_exceeded(payload_len);
            answer(tx, h.request_id, Err(err.into())).await?;
            return Ok(Next::Continue);
        }
    } else {
        store.budget.take(&header.app_id, payload_len).await;
    }
    let payload = match read_exact_bytes(r, payload_len as usize).await {
        Ok(p) => p,
        Err(e) => {
            store.budget.give_back(&header.app_id, payload_len);
            return Err(e);
        }
    };
    let copy = payload.clone();
    let m = &worker.metrics;
    let taken = match store.insert(&shuffle, &part, &header, payload) {
        Ok(true) => {
            m.pushed_bytes.fetch_add(payload_len, Ordering::Relaxed);
            m.apps.pushed(&header.app_id, payload_len);
            m.pushed_batches.fetch_add(1, Ordering::Relaxed);
            part.split.took(payload_len)
        }
        Ok(false) => {
            m.duplicate_batches.fetch_add(1, Ordering::Relaxed);
            part.split.took(0)
        }
        Err(err) => {
            answer(tx, h.request_id, Err(err.into())).await?;
            return Ok(Next::Continue);
        }
    };
    let ok = split::answer(worker, &header, &part, taken, from_map);
    // A primary acknowledges only once the replica holds the batch too (a retried,
    // duplicate batch is forwarded again: the replica may be the one that missed it).
    let forward = if from_map { part.forward_to() } else { None };
    let reply = match forward {
        None => {
            m.push_ack.observe(started.elapsed());
            Reply::Now(h.request_id, Ok(ok))
        }
        Some(addr) => match worker.links.forward(&addr, &header, &copy).await {
            Ok(ack) => {
                let worker = Arc::clone(worker);
                let pending: Pending = Box::pin(async move {
                    let res = match ack.await {
                        Ok(res) => res.map(|()| ok).map_err(ServerError::from),
                        Err(e) => Err(ServerError::task("forward", e)),
                    };
                    if res.is_ok() {
                        worker.metrics.push_ack.observe(started.elapsed());
                    }
                    res
                });
                Reply::Later(h.request_id, pending)
            }
            Err(err) => Reply::Now(h.request_id, Err(err.into())),
        },
    };
    send(tx, reply).await?;
    Ok(Next::Continue)
}

/// Reads the routing header of a push frame whose body is `body_len` bytes: its first
/// two bytes give its length. Outer error: the connection broke; inner: the header is
/// cut or malformed (the rest of the frame was skipped). Public for the fuzzer
/// (`crates/fuzz`), which feeds it hostile push frames.
pub async fn read_header<R: AsyncRead + Unpin>(
    r: &mut R,
    body_len: u64,
) -> io::Result<Result<PushHeader, DecodeError>> {
    if body_len < 2 {
        skip(r, body_len).await?;
        return Ok(Err(DecodeError::Truncated {
            field: "app_id",
            missing: (2 - body_len) as usize,
        }));
    }
    let mut raw = vec![0u8; 2];
    r.read_exact(&mut raw).await?;
    let app_len = u16::from_be_bytes([raw[0], raw[1]]) as u64;
    let header_len = 2 + app_len + PushHeader::FIXED_LEN as u64;
    if body_len < header_len {
        skip(r, body_len - 2).await?;
        return Ok(Err(DecodeError::Truncated {
            field: "push header",
            missing: (header_len - body_len) as usize,
        }));
    }
    raw.resize(header_len as usize, 0);
    r.read_exact(&mut raw[2..]).await?;
    let decoded = PushHeader::decode(&mut Reader::new(Bytes::from(raw)));
    if decoded.is_err() {
        skip(r, body_len - header_len).await?;
    }
    Ok(decoded)
}
