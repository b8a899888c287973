//! Where a connection's replies are written: a socket that can also take file ranges
//! with `sendfile(2)` when the connection is plain TCP, so that a fetch of data on disk
//! goes from the page cache to the socket without passing through the worker (no read
//! into a buffer, no copy out of it). Over TLS the bytes must be encrypted in the
//! process, so file ranges are never sent that way.

use std::fs::File;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use crossdock_client::tls::Stream;
use tokio::io::{AsyncWrite, BufWriter, Interest, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;

use crate::limits::Timed;

/// A writer that may send file ranges without copying them through the process.
pub trait FileSink: AsyncWrite + Unpin {
    /// Whether [`FileSink::poll_send_file`] can be used on this writer.
    fn sends_files(&self) -> bool;

    /// Sends up to `len` bytes of `file` from `*offset` (advanced by what was sent),
    /// after everything written before. `Ok(0)` means the file ends before `*offset`.
    /// Fails with `Unsupported` where [`FileSink::sends_files`] is false.
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: &File,
        offset: &mut u64,
        len: usize,
    ) -> Poll<io::Result<usize>>;
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
    fn sends_files(&self) -> bool {
        matches!(self, ReplySink::Tcp(_))
    }

    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: &File,
        offset: &mut u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        let ReplySink::Tcp(w) = self else {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "file ranges are sent on plain TCP connections only",
            )));
        };
        let tcp: &tokio::net::TcpStream = w.as_ref();
        loop {
            ready!(tcp.poll_write_ready(cx))?;
            // `try_io` clears the readiness when the socket's buffer is full, so the
            // next poll waits for room instead of spinning.
            let sent = tcp.try_io(Interest::WRITABLE, || {
                rustix::fs::sendfile(tcp, file, Some(&mut *offset), len).map_err(io::Error::from)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                res => return Poll::Ready(res),
            }
        }
    }
}

impl<W: FileSink> FileSink for Timed<W> {
    fn sends_files(&self) -> bool {
        self.get_ref().sends_files()
    }

    /// Bounded like every write: the peer must take some of it within the read timeout.
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: &File,
        offset: &mut u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        self.timed_write(cx, |w, cx| {
            w.get_mut().poll_send_file(cx, file, offset, len)
        })
    }
}

impl<W: FileSink> FileSink for BufWriter<W> {
    fn sends_files(&self) -> bool {
        self.get_ref().sends_files()
    }

    /// Flushes what is buffered first, so the file's bytes follow it on the wire.
    fn poll_send_file(
        &mut self,
        cx: &mut Context<'_>,
        file: &File,
        offset: &mut u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        ready!(Pin::new(&mut *self).poll_flush(cx))?;
        self.get_mut().poll_send_file(cx, file, offset, len)
    }
}

/// Sends bytes `[start, start + len)` of `file` to `w`, after what was written before.
/// Fails with `UnexpectedEof` when the file is shorter (its frame is then broken: the
/// caller must drop the connection).
pub async fn send_file<W: FileSink>(
    w: &mut W,
    file: &File,
    start: u64,
    len: u64,
) -> io::Result<()> {
    let (mut offset, end) = (start, start + len);
    while offset < end {
        let want = (end - offset).min(1 << 30) as usize;
        let n = std::future::poll_fn(|cx| w.poll_send_file(cx, file, &mut offset, want)).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the partition file ends at {offset}, before {end}"),
            ));
        }
    }
    Ok(())
}
