//! Where a connection's replies are written: a socket that can also take file ranges
//! with `sendfile(2)` when the connection is plain TCP, so that a fetch of data on disk
//! goes from the page cache to the socket without passing through the worker (no read
//! into a buffer, no copy out of it). Over TLS the bytes must be encrypted in the
//! process, so file ranges are never sent that way.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crossdock_client::tls::Stream;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter, Interest, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use crate::limits::Timed;

/// A writer that may send file ranges without copying them through the process.
pub trait FileSink: AsyncWrite + Unpin {
    /// The TCP socket under this writer, and how long the peer may keep a write waiting
    /// (`None`: no limit); `None` when file ranges cannot be sent on it.
    fn file_socket(&self) -> Option<(&TcpStream, Option<Duration>)>;

    /// Whether [`send_file`] can be used on this writer.
    fn sends_files(&self) -> bool {
        self.file_socket().is_some()
    }
}

/// The writing half of a worker's connection.
pub enum ReplySink {
    /// Plain TCP: file ranges go with `sendfile`.
    Tcp(OwnedWriteHalf),
    /// TLS (or plain TCP with zero-copy fetches turned off): bytes only.
    Other(WriteHalf<Stream>),
}

impl AsyncWrite for ReplySink {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ReplySink::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            ReplySink::Other(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ReplySink::Tcp(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            ReplySink::Other(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ReplySink::Tcp(w) => w.is_write_vectored(),
            ReplySink::Other(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReplySink::Tcp(w) => Pin::new(w).poll_flush(cx),
            ReplySink::Other(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReplySink::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            ReplySink::Other(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

impl FileSink for ReplySink {
    fn file_socket(&self) -> Option<(&TcpStream, Option<Duration>)> {
        match self {
            ReplySink::Tcp(w) => Some((w.as_ref(), None)),
            ReplySink::Other(_) => None,
        }
    }
}

impl<W: FileSink> FileSink for Timed<W> {
    /// Bounded like every write: the peer must take some of it within the read timeout.
    fn file_socket(&self) -> Option<(&TcpStream, Option<Duration>)> {
        let (tcp, _) = self.get_ref().file_socket()?;
        Some((tcp, Some(self.write_timeout())))
    }
}

impl<W: FileSink> FileSink for BufWriter<W> {
    fn file_socket(&self) -> Option<(&TcpStream, Option<Duration>)> {
        self.get_ref().file_socket()
    }
}

/// Why a file range could not be sent.
#[derive(Debug)]
pub enum SendFileError {
    /// The connection failed (or the peer took nothing for the write timeout).
    Socket(io::Error),
    /// The file could not be read: it is shorter than its index says, or the disk failed.
    File(io::Error),
    /// The file system or socket does not support `sendfile`.
    Unsupported(io::Error),
}

/// Sends bytes `[start, start + len)` of `file` to `w`, after everything written to it
/// before (its buffer is flushed first). Each `sendfile` call runs on the blocking pool:
/// a range not in the page cache is read from the disk inside the call, which must not
/// hold up the connections served by this thread. Any error leaves the frame being
/// written unfinished: the caller must drop the connection.
pub async fn send_file<W: FileSink>(
    w: &mut W,
    file: &Arc<File>,
    start: u64,
    len: u64,
) -> Result<(), SendFileError> {
    w.flush().await.map_err(SendFileError::Socket)?;
    let (tcp, limit) = w.file_socket().ok_or_else(|| {
        SendFileError::Unsupported(io::Error::new(
            io::ErrorKind::Unsupported,
            "file ranges are sent on plain TCP connections only",
        ))
    })?;
    // The blocking call needs a handle of its own on the socket (the same socket).
    let mut sock = tcp
        .as_fd()
        .try_clone_to_owned()
        .map_err(SendFileError::Socket)?;
    let (mut offset, end) = (start, start + len);
    // The write timeout runs from the last byte the peer took.
    let mut progress = tokio::time::Instant::now();
    let mut full = false;
    while offset < end {
        let room = wait_for_room(tcp);
        match limit {
            Some(d) => tokio::time::timeout_at(progress + d, room)
                .await
                .map_err(|_| {
                    SendFileError::Socket(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("peer took nothing of a reply for {d:?}"),
                    ))
                })?,
            None => room.await,
        }
        .map_err(SendFileError::Socket)?;
        let want = (end - offset).min(1 << 30) as usize;
        let f = file.clone();
        let (s, at, sent) = tokio::task::spawn_blocking(move || {
            let mut at = offset;
            let sent = rustix::fs::sendfile(&sock, &*f, Some(&mut at), want);
            (sock, at, sent)
        })
        .await
        .map_err(|e| SendFileError::Socket(io::Error::other(e)))?;
        sock = s;
        offset = at;
        match sent {
            Ok(0) => {
                return Err(SendFileError::File(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the partition file ends at {offset}, before {end}"),
                )))
            }
            Ok(_) => {
                progress = tokio::time::Instant::now();
                full = false;
            }
            Err(Errno::INTR) => {}
            // Full socket buffer: the next wait is for room. Should `poll` have reported
            // room all the same (the kernel short of socket memory), a pause keeps this
            // from spinning.
            Err(Errno::AGAIN) => {
                if std::mem::replace(&mut full, true) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            Err(e @ (Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP)) => {
                return Err(SendFileError::Unsupported(e.into()))
            }
            Err(e @ Errno::IO) => return Err(SendFileError::File(e.into())),
            Err(e) => return Err(SendFileError::Socket(e.into())),
        }
    }
    Ok(())
}

/// Waits until the socket's send buffer has room. The `sendfile` calls run on another
/// thread, so tokio never sees their `EAGAIN`; instead the socket is asked (`poll` with
/// no wait) under tokio's readiness, which then clears it only if no wake-up came in
/// the meantime (clearing after a `sendfile` could swallow the edge that came between).
async fn wait_for_room(tcp: &TcpStream) -> io::Result<()> {
    loop {
        tcp.writable().await?;
        let checked = tcp.try_io(Interest::WRITABLE, || {
            let mut fds = [PollFd::new(tcp, PollFlags::OUT)];
            rustix::event::poll(&mut fds, Some(&Timespec::default())).map_err(io::Error::from)?;
            let revents = fds[0].revents();
            if revents.intersects(PollFlags::OUT | PollFlags::ERR | PollFlags::HUP) {
                // An error or hang-up is ready too: the next `sendfile` reports it.
                Ok(())
            } else {
                Err(io::Error::from(io::ErrorKind::WouldBlock))
            }
        });
        match checked {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            res => return res,
        }
    }
}
