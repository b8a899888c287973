//! One connection to a worker: the reader parses frames and dispatches each request to
//! its handler ([`push`](super::push), [`fetch`](super::fetch) or
//! [`control`](super::control)); the writer sends the replies in request order (only
//! the coordinator's calls that wait for storage are answered when done).

use std::io;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossdock_client::tls::Stream;
use crossdock_proto::io::{read_exact_bytes, read_header, write_message};
use crossdock_proto::{
    DecodeError, FrameHeader, Message, MessageKind, FETCH_RECORDS, MAX_CONTROL_FRAME,
    PROTOCOL_VERSION,
};
use tokio::io::{AsyncRead, AsyncWriteExt, BufReader, BufWriter};

use super::fetch;
use super::node::Worker;
use super::reply::{answer, send, Next, Replies, Reply, REPLY_QUEUE};
use super::sink::{FileSink, ReplySink};
use super::storage::RunCut;
use super::{control, push};
use crate::auth::Access;
use crate::error::ServerError;
use crate::limits::Timed;

/// Serves one connection from the host `peer` until it closes it.
pub async fn serve(stream: Stream, peer: IpAddr, worker: Arc<Worker>) -> io::Result<()> {
    match stream {
        // Split so that the writing half still owns the socket: fetches can `sendfile`.
        Stream::Plain(tcp) if worker.zero_copy_fetch.load(Ordering::Relaxed) => {
            let (r, w) = tcp.into_split();
            serve_halves(r, ReplySink::Tcp(w), peer, worker).await
        }
        stream => {
            let (r, w) = tokio::io::split(stream);
            serve_halves(r, ReplySink::Other(w), peer, worker).await
        }
    }
}

async fn serve_halves<R: AsyncRead + Unpin>(
    r: R,
    w: ReplySink,
    peer: IpAddr,
    worker: Arc<Worker>,
) -> io::Result<()> {
    let mut r = BufReader::with_capacity(64 << 10, Timed::new(r, worker.gate.limits()));
    let w = BufWriter::with_capacity(64 << 10, Timed::writer(w, worker.gate.limits()));
    // The reader parses requests and queues their replies in order; the writer sends
    // them. A forwarded push's reply waits for the replica while the reader goes on
    // reading the next pushes, so replication does not serialize a connection.
    let (tx, rx) = tokio::sync::mpsc::channel(REPLY_QUEUE);
    let mut writer = tokio::spawn(write_replies(w, rx, worker.clone()));
    let read = tokio::select! {
        read = read_requests(&mut r, &tx, &worker, peer) => read,
        // The writer ends before the reader only when the connection broke (a write
        // failed or the peer took nothing for the read timeout): stop reading at once.
        written = &mut writer => return written.map_err(io::Error::other)?,
    };
    drop(tx);
    let written = writer.await.map_err(io::Error::other)?;
    read.and(written)
}

async fn write_replies<W: FileSink>(
    mut w: W,
    mut rx: tokio::sync::mpsc::Receiver<Reply>,
    worker: Arc<Worker>,
) -> io::Result<()> {
    while let Some(reply) = rx.recv().await {
        match reply {
            Reply::Now(id, res) => write_message(&mut w, id, &reply_message(&worker, res)).await?,
            Reply::Later(id, pending) => {
                let res = pending.await;
                write_message(&mut w, id, &reply_message(&worker, res)).await?
            }
            Reply::Fetch(id, req) => {
                if let Err(err) = fetch::stream(&mut w, &worker, id, req).await? {
                    write_message(&mut w, id, &reply_message(&worker, Err(err.into()))).await?;
                }
            }
        }
        if rx.is_empty() {
            w.flush().await?;
        }
    }
    w.flush().await
}

/// The message that answers a request; a refusal is counted and logged.
fn reply_message(worker: &Worker, res: Result<Message, ServerError>) -> Message {
    match res {
        Ok(msg) => msg,
        Err(err) => {
            worker.metrics.errors.inc(err.code);
            tracing::debug!(code = %err.code, message = %err.message, "request rejected");
            err.to_message()
        }
    }
}

async fn read_requests<R: AsyncRead + Unpin>(
    r: &mut BufReader<Timed<R>>,
    tx: &Replies,
    worker: &Arc<Worker>,
    peer: IpAddr,
) -> io::Result<()> {
    let mut access = Access::new(worker.secret.clone());
    loop {
        r.get_mut().expect_frame();
        let h = match read_header(r).await {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let err = DecodeError::Malformed(e.to_string());
                return answer(tx, 0, Err(err.into())).await;
            }
            Err(e) => return Err(e),
        };
        r.get_mut().in_frame();
        if let Next::Close = dispatch(r, tx, worker, &mut access, peer, h).await? {
            return Ok(());
        }
    }
}

/// Reads the rest of one frame and hands the request to its handler.
async fn dispatch<R: AsyncRead + Unpin>(
    r: &mut R,
    tx: &Replies,
    worker: &Arc<Worker>,
    access: &mut Access,
    peer: IpAddr,
    h: FrameHeader,
) -> io::Result<Next> {
    if h.version != PROTOCOL_VERSION {
        let err = DecodeError::UnsupportedVersion(h.version);
        answer(tx, h.request_id, Err(err.into())).await?;
        return Ok(Next::Close);
    }
    if h.kind == MessageKind::PushBatch as u8 {
        return push::handle(r, tx, worker, access, h).await;
    }
    if h.body_len > MAX_CONTROL_FRAME {
        let err = DecodeError::TooLarge {
            len: h.body_len as u64,
            limit: MAX_CONTROL_FRAME as u64,
        };
        answer(tx, h.request_id, Err(err.into())).await?;
        return Ok(Next::Close);
    }
    let room = match worker.gate.frame_room(peer, h.body_len).await {
        Ok(room) => room,
        Err(err) => {
            // The body cannot be skipped without waiting for it: close.
            answer(tx, h.request_id, Err(err)).await?;
            return Ok(Next::Close);
        }
    };
    let body = read_exact_bytes(r, h.body_len as usize).await?;
    let decoded = Message::decode(h.kind, body);
    drop(room);
    match decoded {
        Err(e) => answer(tx, h.request_id, Err(e.into())).await?,
        Ok(Message::Hello) => answer(tx, h.request_id, Ok(access.hello())).await?,
        Ok(Message::Authenticate { app_id, proof }) => {
            answer(tx, h.request_id, access.authenticate(&app_id, &proof)).await?
        }
        Ok(msg) => match access.check(&msg) {
            Err(err) => answer(tx, h.request_id, Err(err)).await?,
            Ok(()) => match msg {
                Message::Fetch {
                    app_id,
                    shuffle_id,
                    partition,
                    start_map,
                    end_map,
                    resume_after,
                    run_bytes,
                    end_batch_seq,
                    expected_attempt,
                    flags,
                } => {
                    let req = fetch::FetchRequest {
                        app_id,
                        shuffle_id,
                        partition,
                        maps: (start_map, end_map),
                        resume_after,
                        cut: RunCut {
                            bytes: run_bytes.value(),
                            end_seq: end_batch_seq.value(),
                            attempt: expected_attempt.0.and_then(|a| a.some()),
                        },
                        received: std::time::Instant::now(),
                        records: flags.value() & FETCH_RECORDS != 0,
                    };
                    send(tx, Reply::Fetch(h.request_id, req)).await?
                }
                msg => control::handle(tx, worker, h.request_id, msg).await?,
            },
        },
    }
    Ok(Next::Continue)
}
