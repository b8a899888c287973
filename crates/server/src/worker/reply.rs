//! A worker connection's replies: queued by the reader in request order and written by
//! the connection's writer, so a reply that takes time (a replica's acknowledgement, a
//! fetch stream) does not hold up reading the next requests.
//!
//! Two of the coordinator's calls wait for storage rather than for a client: a commit at
//! durability `disk` or `object-store` (its batches synced or uploaded) and an adoption
//! (partitions read back from the object store). Their answers are written when their
//! work ends, ahead of or after later replies ([`answer_when_done`]): in request order,
//! one slow upload would hold back every later answer on the coordinator's one
//! connection to this worker, other applications' commits and placements included,
//! until the coordinator's call timeout declared the worker unreachable.

use std::future::Future;
use std::io;
use std::pin::Pin;

use crossdock_proto::Message;

use crate::error::ServerError;

/// A reply whose answer is computed elsewhere (a task already under way).
pub type Pending = Pin<Box<dyn Future<Output = Result<Message, ServerError>> + Send>>;

/// A reply, in request order.
pub enum Reply {
    /// Known now.
    Now(u64, Result<Message, ServerError>),
    /// Known once `Pending` resolves.
    Later(u64, Pending),
    /// A `Fetch`, streamed by the writer when its turn comes.
    Fetch(u64, super::fetch::FetchRequest),
}

/// Replies queued beyond this many make the reader wait (bounds the memory a slow
/// client can pin through forwarded pushes awaiting acknowledgement).
pub const REPLY_QUEUE: usize = 256;

/// The queue to a connection's writer.
pub type Replies = tokio::sync::mpsc::Sender<Reply>;

/// Queues a reply (waits while the queue is full).
pub async fn send(tx: &Replies, reply: Reply) -> io::Result<()> {
    tx.send(reply)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "connection writer stopped"))
}

/// Queues an immediate reply.
pub async fn answer(
    tx: &Replies,
    request_id: u64,
    res: Result<Message, ServerError>,
) -> io::Result<()> {
    send(tx, Reply::Now(request_id, res)).await
}

/// Runs `work` as a task of its own (it starts at once, whatever is queued before it)
/// and queues its answer when it ends, out of request order: the replies queued after it
/// do not wait for it. Only for calls whose callers match answers by request id and do
/// not depend on their order (the coordinator's; see the module's note).
pub fn answer_when_done<F>(tx: &Replies, request_id: u64, work: F)
where
    F: Future<Output = Result<Message, ServerError>> + Send + 'static,
{
    let tx = tx.clone();
    let task = tokio::spawn(work);
    tokio::spawn(async move {
        // A panic in `work` is answered as an error, not left to the caller's timeout.
        let res = task
            .await
            .unwrap_or_else(|e| Err(ServerError::task("reply", e)));
        // The connection may have closed meanwhile: nobody is left to answer.
        let _ = send(&tx, Reply::Now(request_id, res)).await;
    });
}

/// What to do with the connection after a request.
pub enum Next {
    Continue,
    Close,
}
