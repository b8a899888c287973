//! A worker connection's replies: queued by the reader in request order and written by
//! the connection's writer, so a reply that takes time (a replica's acknowledgement, a
//! commit's durability wait, a fetch stream) does not hold up reading the next requests.

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
/// and queues its answer.
pub async fn answer_later<F>(tx: &Replies, request_id: u64, work: F) -> io::Result<()>
where
    F: Future<Output = Result<Message, ServerError>> + Send + 'static,
{
    let task = tokio::spawn(work);
    let pending: Pending = Box::pin(async move {
        task.await
            .unwrap_or_else(|e| Err(ServerError::task("reply", e)))
    });
    send(tx, Reply::Later(request_id, pending)).await
}

/// What to do with the connection after a request.
pub enum Next {
    Continue,
    Close,
}
