//! A multiplexed request/response connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossdock_proto::io::{read_exact_bytes, read_header, write_message, write_push_flagged};
use crossdock_proto::{Message, PushHeader, MAX_CONTROL_FRAME};
use tokio::io::{AsyncRead, AsyncWriteExt, BufReader, BufWriter, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::error::{ClientError, Result};
use crate::keyring::{handshake, Keyring};
use crate::tls::Stream;

type Pending = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Result<Message>>>>>>;

/// How long a connection attempt may take before it is reported as failed.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One TCP connection on which many requests may be outstanding at once.
///
/// Responses are matched to requests by request id, so callers can pipeline (send many
/// pushes before the first acknowledgement arrives). When the connection fails, every
/// outstanding call fails with [`ClientError::Io`] and the connection reports itself
/// closed; callers open a new one.
pub struct RpcConnection {
    addr: String,
    writer: tokio::sync::Mutex<BufWriter<WriteHalf<Stream>>>,
    pending: Pending,
    next_id: AtomicU64,
    closed: Arc<AtomicBool>,
}

impl RpcConnection {
    /// Connects to `addr` (`host:port`) and proves the keys of `keyring` on the new
    /// connection (none: no handshake).
    pub async fn connect(addr: &str, keyring: &Keyring) -> Result<RpcConnection> {
        let mut stream = connect_stream(addr, keyring).await?;
        let next_id = handshake(&mut stream, addr, keyring).await?;
        let (read, write) = tokio::io::split(stream);
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let closed = Arc::new(AtomicBool::new(false));
        tokio::spawn(read_responses(
            addr.to_string(),
            read,
            pending.clone(),
            closed.clone(),
        ));
        Ok(RpcConnection {
            addr: addr.to_string(),
            writer: tokio::sync::Mutex::new(BufWriter::with_capacity(64 << 10, write)),
            pending,
            next_id: AtomicU64::new(next_id),
            closed,
        })
    }

    /// The address this connection goes to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// True once the connection has failed or closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn register(&self) -> Result<(u64, oneshot::Receiver<Result<Message>>)> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match self.pending.lock().expect("pending lock").as_mut() {
            Some(map) => {
                map.insert(id, tx);
                Ok((id, rx))
            }
            None => Err(self.io_error("connection is closed")),
        }
    }

    fn io_error(&self, what: &str) -> ClientError {
        ClientError::Io {
            addr: self.addr.clone(),
            source: std::io::Error::new(std::io::ErrorKind::NotConnected, what.to_string()),
        }
    }

    async fn send(&self, id: u64, msg: &Message) -> Result<()> {
        let mut w = self.writer.lock().await;
        let res = async {
            write_message(&mut *w, id, msg).await?;
            w.flush().await
        }
        .await;
        res.map_err(|source| self.fail(source))
    }

    fn fail(&self, source: std::io::Error) -> ClientError {
        self.closed.store(true, Ordering::Release);
        ClientError::Io {
            addr: self.addr.clone(),
            source,
        }
    }

    /// Sends `msg` and waits for its response. An `Error` response becomes
    /// [`ClientError::Remote`].
    pub async fn call(&self, msg: &Message) -> Result<Message> {
        let (id, rx) = self.register()?;
        self.send(id, msg).await?;
        self.wait(rx).await
    }

    /// Sends a pushed batch and returns a receiver for its acknowledgement, so the
    /// caller can keep sending while earlier batches are in flight. The frame is fully
    /// written when this returns; the payload is not copied.
    pub async fn start_push(
        &self,
        header: &PushHeader,
        payload: &[u8],
    ) -> Result<oneshot::Receiver<Result<Message>>> {
        self.start_push_flagged(header, payload, 0).await
    }

    /// [`RpcConnection::start_push`] with frame flags (a worker forwarding to a replica
    /// sets [`crossdock_proto::FLAG_REPLICA`]).
    pub async fn start_push_flagged(
        &self,
        header: &PushHeader,
        payload: &[u8],
        flags: u16,
    ) -> Result<oneshot::Receiver<Result<Message>>> {
        let (id, rx) = self.register()?;
        let mut w = self.writer.lock().await;
        let res = async {
            write_push_flagged(&mut *w, id, flags, header, payload).await?;
            w.flush().await
        }
        .await;
        drop(w);
        res.map_err(|e| self.fail(e))?;
        Ok(rx)
    }

    /// Waits for the response behind a receiver from [`RpcConnection::start_push`].
    pub async fn wait(&self, rx: oneshot::Receiver<Result<Message>>) -> Result<Message> {
        match rx.await {
            Ok(Ok(Message::Error { code, message })) => {
                Err(ClientError::remote(&self.addr, code, message))
            }
            Ok(other) => other,
            Err(_) => Err(self.io_error("connection closed before the response arrived")),
        }
    }
}

impl Drop for RpcConnection {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
    }
}

/// Reads one whole frame from a stream of answers (a fetch stream, a handshake) and
/// returns its request id and message; `what` names the stream in errors. The end of
/// the stream and transport failures are [`ClientError::Io`], so callers may resume.
pub(crate) async fn read_answer<S: AsyncRead + Unpin>(
    stream: &mut S,
    addr: &str,
    what: &str,
) -> Result<(u64, Message)> {
    let io = |source| ClientError::Io {
        addr: addr.to_string(),
        source,
    };
    let header = read_header(stream).await.map_err(io)?.ok_or_else(|| {
        io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{what} closed before its end"),
        ))
    })?;
    if header.body_len > MAX_CONTROL_FRAME {
        return Err(ClientError::Corrupt(format!(
            "{what} frame of {} bytes from {addr} exceeds the limit",
            header.body_len
        )));
    }
    let body = read_exact_bytes(stream, header.body_len as usize)
        .await
        .map_err(io)?;
    let msg = Message::decode(header.kind, body).map_err(|source| ClientError::Decode {
        addr: addr.to_string(),
        source,
    })?;
    Ok((header.request_id, msg))
}

/// Opens a connection with a timeout and `TCP_NODELAY`, with TLS when `keyring` says so
/// (the TLS handshake within the same timeout).
pub(crate) async fn connect_stream(addr: &str, keyring: &Keyring) -> Result<Stream> {
    let io = |source| ClientError::Io {
        addr: addr.to_string(),
        source,
    };
    let tls = keyring.tls();
    let open = async {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        match &tls {
            None => Ok(Stream::Plain(tcp)),
            Some(tls) => tls.connect(addr, tcp).await,
        }
    };
    tokio::time::timeout(CONNECT_TIMEOUT, open)
        .await
        .map_err(|_| {
            io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {CONNECT_TIMEOUT:?}"),
            ))
        })?
        .map_err(io)
}

async fn read_responses(
    addr: String,
    read: ReadHalf<Stream>,
    pending: Pending,
    closed: Arc<AtomicBool>,
) {
    let mut r = BufReader::with_capacity(64 << 10, read);
    // An error the server sent about the connection itself (request id 0: a limit was
    // reached, a frame could not be parsed) before closing it: the reason to report.
    let mut last_word: Option<String> = None;
    let outcome: std::io::Result<()> = async {
        while let Some(h) = read_header(&mut r).await? {
            if h.body_len > MAX_CONTROL_FRAME {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("response of {} bytes exceeds the limit", h.body_len),
                ));
            }
            let body = read_exact_bytes(&mut r, h.body_len as usize).await?;
            let msg = Message::decode(h.kind, body).map_err(|source| ClientError::Decode {
                addr: addr.clone(),
                source,
            });
            let tx = pending
                .lock()
                .expect("pending lock")
                .as_mut()
                .and_then(|m| m.remove(&h.request_id));
            match tx {
                Some(tx) => {
                    let _ = tx.send(msg);
                }
                None => match msg {
                    Ok(Message::Error { code, message }) if h.request_id == 0 => {
                        let code = crossdock_proto::ErrorCode::from_u16(code)
                            .map_or(code.to_string(), |c| c.to_string());
                        last_word = Some(format!("{code}: {message}"));
                    }
                    _ => tracing::warn!(%addr, request_id = h.request_id, "response to no outstanding request"),
                },
            }
        }
        Ok(())
    }
    .await;
    closed.store(true, Ordering::Release);
    let waiting = pending
        .lock()
        .expect("pending lock")
        .take()
        .unwrap_or_default();
    let reason = match (outcome, last_word) {
        (_, Some(word)) => format!("connection closed by the server: {word}"),
        (Ok(()), None) => "connection closed by the server".to_string(),
        (Err(e), None) => e.to_string(),
    };
    for (_, tx) in waiting {
        let _ = tx.send(Err(ClientError::Io {
            addr: addr.clone(),
            source: std::io::Error::new(std::io::ErrorKind::ConnectionAborted, reason.clone()),
        }));
    }
}
