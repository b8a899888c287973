//! What one server lets its peers hold: connections (per process and per peer host),
//! time (a silent connection is closed, a frame must keep arriving once begun) and
//! memory in frames being received (admitted before anything is allocated).
//!
//! Pushed batches are not counted here: a worker admits their payloads against its
//! memory budget before reading them ([`crate::worker`]); what this module bounds is
//! everything else a peer can make a server hold by opening sockets and sending
//! headers. The defaults and the reasons for them are in `docs/security.md`.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::error::ServerError;

/// Frame bodies up to this size are read without asking [`Gate::frame_memory`]: every
/// ordinary request is this small, and what they can hold is bounded by the number of
/// connections times this size.
pub const SMALL_FRAME: u32 = 64 << 10;

/// How much one server lets its peers hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnLimits {
    /// Open connections to this server at once; one more is refused.
    pub max_connections: usize,
    /// Open connections from one peer host (IP address) at once.
    pub max_connections_per_peer: usize,
    /// A connection that starts no frame for this long is closed (none: never).
    pub idle_timeout: Option<Duration>,
    /// Once a frame has begun, its next bytes must arrive within this long, or the
    /// connection is closed (a stalled sender gives back what it held). Writes have the
    /// same bound: a peer that takes none of a reply for this long is cut off, so that a
    /// client that stops reading a fetch gives back its connection and fetch memory.
    pub read_timeout: Duration,
    /// Bytes of frame bodies larger than [`SMALL_FRAME`] being received at once, over
    /// all connections; one peer host may hold at most half of it (a frame larger than
    /// half is received only while its host holds no other). A frame waits for room up
    /// to `read_timeout`, then is refused.
    pub frame_memory: u64,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 4096,
            max_connections_per_peer: 1024,
            idle_timeout: Some(Duration::from_secs(600)),
            read_timeout: Duration::from_secs(60),
            frame_memory: 256 << 20,
        }
    }
}

/// The admission state of one server: open connections by peer host, and the room
/// left for large frames.
pub struct Gate {
    limits: ConnLimits,
    by_peer: Mutex<HashMap<IpAddr, usize>>,
    /// `frame_memory` in KiB, the unit of `frames`' permits.
    frame_kib: u64,
    /// One peer host's share of `frame_memory`, in KiB: half of it.
    peer_kib: u64,
    /// Each peer host's share, while it has connections open.
    peer_frames: Mutex<HashMap<IpAddr, Arc<Semaphore>>>,
    refused: AtomicU64,
    timed_out: AtomicU64,
    frames: Arc<Semaphore>,
}

/// Holds a connection's place; dropping it frees the place.
pub struct Ticket {
    gate: Arc<Gate>,
    peer: IpAddr,
}

/// Room for one large frame's body (from its host's share, and from the whole);
/// dropping it gives the room back.
pub type FrameRoom = Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>;

impl Gate {
    /// A gate enforcing `limits`.
    pub fn new(limits: ConnLimits) -> Arc<Gate> {
        // The semaphore counts KiB so that any budget fits its permit count.
        let kib = (limits.frame_memory >> 10).clamp(1, Semaphore::MAX_PERMITS as u64);
        Arc::new(Gate {
            frames: Arc::new(Semaphore::new(kib as usize)),
            frame_kib: kib,
            peer_kib: (kib / 2).max(1),
            peer_frames: Mutex::new(HashMap::new()),
            limits,
            by_peer: Mutex::new(HashMap::new()),
            refused: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
        })
    }

    /// The limits this gate enforces.
    pub fn limits(&self) -> &ConnLimits {
        &self.limits
    }

    /// A place for a new connection from `peer`, or the refusal to send it.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, ServerError> {
        let mut by_peer = self.by_peer.lock().expect("gate lock");
        let total: usize = by_peer.values().sum();
        let mine = by_peer.get(&peer).copied().unwrap_or(0);
        let refusal = if total >= self.limits.max_connections {
            Some(format!(
                "too many connections: {total} open, the limit is {} (max_connections)",
                self.limits.max_connections
            ))
        } else if mine >= self.limits.max_connections_per_peer {
            Some(format!(
                "too many connections from {peer}: {mine} open, the limit is {} \
                 (max_connections_per_peer)",
                self.limits.max_connections_per_peer
            ))
        } else {
            None
        };
        if let Some(msg) = refusal {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(ServerError::limit(msg));
        }
        *by_peer.entry(peer).or_default() += 1;
        Ok(Ticket {
            gate: self.clone(),
            peer,
        })
    }

    /// Room to receive a frame body of `len` bytes from a connection of `peer`: nothing
    /// to wait for when it is small; otherwise room in the peer host's share and in the
    /// whole, waited for up to the read timeout, then refused. The share keeps one host
    /// from holding the whole room while it stalls its frames.
    pub async fn frame_room(&self, peer: IpAddr, len: u32) -> Result<FrameRoom, ServerError> {
        if len <= SMALL_FRAME {
            return Ok(None);
        }
        let kib = len.div_ceil(1 << 10);
        if kib as u64 > self.frame_kib {
            return Err(ServerError::limit(format!(
                "a frame of {len} bytes is larger than the {} bytes allowed for frames \
                 being received (frame_memory)",
                self.limits.frame_memory
            )));
        }
        let share = self
            .peer_frames
            .lock()
            .expect("gate lock")
            .entry(peer)
            .or_insert_with(|| Arc::new(Semaphore::new(self.peer_kib as usize)))
            .clone();
        // A frame larger than the share takes all of it.
        let mine = (kib as u64).min(self.peer_kib) as u32;
        let wait = async {
            let p = share.clone().acquire_many_owned(mine).await;
            let all = self.frames.clone().acquire_many_owned(kib).await;
            let closed = "the frame semaphores are never closed";
            (p.expect(closed), all.expect(closed))
        };
        match tokio::time::timeout(self.limits.read_timeout, wait).await {
            Ok(room) => Ok(Some(room)),
            Err(_) => {
                let whose = if share.available_permits() < mine as usize {
                    format!(
                        "{peer}'s frames being received already hold its share, half of {} bytes",
                        self.limits.frame_memory
                    )
                } else {
                    format!(
                        "{} bytes of frames are being received",
                        self.limits.frame_memory
                    )
                };
                Err(ServerError::limit(format!(
                    "no room within {:?} to receive a frame of {len} bytes: {whose} \
                     (frame_memory)",
                    self.limits.read_timeout
                )))
            }
        }
    }

    /// Counts a connection closed for a timeout.
    pub fn count_timeout(&self) {
        self.timed_out.fetch_add(1, Ordering::Relaxed);
    }

    /// (open connections, connections refused, connections closed for a timeout).
    pub fn counts(&self) -> (u64, u64, u64) {
        let open: usize = self.by_peer.lock().expect("gate lock").values().sum();
        (
            open as u64,
            self.refused.load(Ordering::Relaxed),
            self.timed_out.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut by_peer = self.gate.by_peer.lock().expect("gate lock");
        if let Some(n) = by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                by_peer.remove(&self.peer);
                // Its last connection is gone, and with it any frame it was receiving.
                let mut shares = self.gate.peer_frames.lock().expect("gate lock");
                shares.remove(&self.peer);
            }
        }
    }
}

/// A reader that fails with `TimedOut` when its source keeps it waiting too long: up to
/// the idle timeout for the first byte after [`Timed::expect_frame`], then up to the
/// read timeout for every later byte. Only time spent waiting on the peer counts: a
/// server that stops reading (back-pressure) runs no clock. As a writer
/// ([`Timed::writer`]), it fails a write or flush the peer takes nothing of for the
/// read timeout; a server with nothing to send runs no clock.
pub struct Timed<R> {
    inner: R,
    idle: Option<Duration>,
    read: Duration,
    between_frames: bool,
    /// The clock of the current wait on the peer; `waiting` says whether one runs.
    /// One timer per connection, reset for each wait, so the read path allocates
    /// nothing per wait.
    clock: Pin<Box<Sleep>>,
    waiting: bool,
}

impl<R> Timed<R> {
    /// Wraps `inner` with the timeouts of `limits`; it starts between frames.
    pub fn new(inner: R, limits: &ConnLimits) -> Self {
        Timed {
            inner,
            idle: limits.idle_timeout,
            read: limits.read_timeout,
            between_frames: true,
            clock: Box::pin(tokio::time::sleep(Duration::ZERO)),
            waiting: false,
        }
    }

    /// Wraps the writing half `inner` of a connection: every wait for the peer to take
    /// bytes is bounded by the read timeout of `limits`.
    pub fn writer(inner: R, limits: &ConnLimits) -> Self {
        Timed {
            idle: None,
            between_frames: false,
            ..Timed::new(inner, limits)
        }
    }

    /// Starts the clock of a wait on the peer if none runs; `Err` once it ran out.
    fn wait(&mut self, cx: &mut Context<'_>, limit: Duration) -> Poll<()> {
        if !self.waiting {
            self.waiting = true;
            self.clock
                .as_mut()
                .reset(tokio::time::Instant::now() + limit);
        }
        if self.clock.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.waiting = false;
        Poll::Ready(())
    }

    /// The wrapped reader or writer.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// How long the peer may keep a write waiting before it fails.
    pub fn write_timeout(&self) -> Duration {
        self.read
    }

    /// Polls one write-side operation of the inner writer under the clock.
    fn timed_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(Pin<&mut R>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>>
    where
        R: Unpin,
    {
        match op(Pin::new(&mut self.inner), cx) {
            Poll::Ready(res) => {
                self.waiting = false;
                Poll::Ready(res)
            }
            Poll::Pending => {
                let limit = self.read;
                match self.wait(cx, limit) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("peer took nothing of a reply for {limit:?}"),
                    ))),
                }
            }
        }
    }

    /// The next byte starts a frame: the idle timeout applies until it arrives.
    pub fn expect_frame(&mut self) {
        self.between_frames = true;
    }

    /// A frame's header was read (perhaps from bytes buffered above this reader, which
    /// it never saw): the read timeout applies to the rest.
    pub fn in_frame(&mut self) {
        self.between_frames = false;
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Timed<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(res) => {
                // A wait is over: the next one starts its own clock.
                this.waiting = false;
                if buf.filled().len() > before {
                    this.between_frames = false;
                }
                Poll::Ready(res)
            }
            Poll::Pending => {
                let limit = if this.between_frames {
                    match this.idle {
                        Some(d) => d,
                        None => return Poll::Pending,
                    }
                } else {
                    this.read
                };
                if this.wait(cx, limit).is_pending() {
                    return Poll::Pending;
                }
                let what = if this.between_frames {
                    "idle"
                } else {
                    "stalled inside a frame"
                };
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("peer {what} for {limit:?}"),
                )))
            }
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Timed<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.timed_write(cx, |w, cx| w.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.timed_write(cx, |w, cx| w.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed_write(cx, |w, cx| w.poll_flush(cx))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed_write(cx, |w, cx| w.poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    fn limits(max: usize, per_peer: usize) -> ConnLimits {
        ConnLimits {
            max_connections: max,
            max_connections_per_peer: per_peer,
            idle_timeout: Some(Duration::from_secs(10)),
            read_timeout: Duration::from_secs(2),
            frame_memory: 1 << 20,
        }
    }

    #[test]
    fn connections_are_capped_per_peer_and_in_total_and_freed_on_drop() {
        let gate = Gate::new(limits(3, 2));
        let (a, b) = (A, B);
        let a1 = gate.admit(a).unwrap();
        let _a2 = gate.admit(a).unwrap();
        let err = gate.admit(a).err().unwrap();
        assert_eq!(err.code, crossdock_proto::ErrorCode::LimitExceeded);
        assert!(
            err.message.contains("max_connections_per_peer"),
            "{}",
            err.message
        );
        let _b1 = gate.admit(b).unwrap();
        let err = gate.admit(b).err().unwrap();
        assert!(err.message.contains("(max_connections)"), "{}", err.message);
        drop(a1);
        let _b2 = gate.admit(b).unwrap();
        assert_eq!(gate.counts(), (3, 2, 0));
    }

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    const C: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

    #[tokio::test(start_paused = true)]
    async fn large_frames_wait_for_room_and_are_refused_after_the_read_timeout() {
        let gate = Gate::new(limits(10, 10));
        assert!(gate.frame_room(A, SMALL_FRAME).await.unwrap().is_none());
        // Larger than a host's half: taken while the host holds nothing else.
        let held = gate.frame_room(A, 768 << 10).await.unwrap();
        assert!(held.is_some());
        // 768 KiB of 1 MiB held: another host's 512 KiB frame waits, refused after 2 s.
        let started = Instant::now();
        let err = gate.frame_room(B, 512 << 10).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(err.message.contains("frame_memory"), "{}", err.message);
        // Given back, the room serves the next frame at once.
        drop(held);
        assert!(gate.frame_room(B, 1 << 20).await.unwrap().is_some());
        // Larger than the whole budget: refused without waiting.
        let err = gate.frame_room(B, (1 << 20) + 1).await.unwrap_err();
        assert!(err.message.contains("larger than"), "{}", err.message);
    }

    #[tokio::test(start_paused = true)]
    async fn one_host_holds_at_most_half_of_the_frame_room() {
        let gate = Gate::new(limits(10, 10));
        // Host A stalls two 256 KiB frames: its whole half of 1 MiB.
        let a1 = gate.frame_room(A, 256 << 10).await.unwrap();
        let a2 = gate.frame_room(A, 256 << 10).await.unwrap();
        // Its third waits for its own share and is refused, naming the share...
        let err = gate.frame_room(A, 256 << 10).await.unwrap_err();
        assert!(
            err.message.contains("127.0.0.1's frames"),
            "{}",
            err.message
        );
        // ...while other hosts still find the room A could otherwise have taken.
        let b = gate.frame_room(B, 256 << 10).await.unwrap();
        let c = gate.frame_room(C, 256 << 10).await.unwrap();
        assert!(b.is_some() && c.is_some());
        drop((a1, a2));
        assert!(gate.frame_room(A, 256 << 10).await.unwrap().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_stops_reading_times_out_and_a_slow_one_does_not() {
        // 64 bytes of room between us and the peer.
        let (ours, mut peer) = tokio::io::duplex(64);
        let mut w = Timed::writer(ours, &limits(10, 10));
        let started = Instant::now();
        let err = w.write_all(&[7u8; 1000]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(2),
            "the read timeout"
        );
        // A peer that takes a little every second keeps the write alive far longer.
        let (ours, mut slow) = tokio::io::duplex(64);
        let mut w = Timed::writer(ours, &limits(10, 10));
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 16];
            while got < 1000 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                got += slow.read(&mut buf).await.unwrap();
            }
        });
        let started = Instant::now();
        w.write_all(&[7u8; 1000]).await.unwrap();
        w.flush().await.unwrap();
        assert!(started.elapsed() > Duration::from_secs(10));
        reader.await.unwrap();
        drop(peer.read(&mut [0u8; 1]).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_times_out_idle_between_frames_and_sooner_inside_one() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut r = Timed::new(rx, &limits(1, 1));
        let mut byte = [0u8; 1];
        tx.write_all(b"ab").await.unwrap();
        r.read_exact(&mut byte).await.unwrap();
        // Inside a frame: the read timeout (2 s).
        r.read_exact(&mut byte).await.unwrap();
        let started = Instant::now();
        let err = r.read_exact(&mut byte).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(err.to_string().contains("stalled inside a frame"), "{err}");
        // A header read from a buffer above: the rest of the frame gets the read timeout.
        r.expect_frame();
        r.in_frame();
        let started = Instant::now();
        r.read_exact(&mut byte).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        // Between frames: the idle timeout (10 s).
        r.expect_frame();
        let started = Instant::now();
        let err = r.read_exact(&mut byte).await.unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert!(err.to_string().contains("idle"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn time_the_server_spends_not_reading_does_not_count() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut r = Timed::new(rx, &limits(1, 1));
        let mut byte = [0u8; 1];
        tx.write_all(b"a").await.unwrap();
        r.read_exact(&mut byte).await.unwrap();
        // The server does other things for longer than the read timeout...
        tokio::time::sleep(Duration::from_secs(5)).await;
        // ...and the peer's next byte, sent 1 s into the next wait, is still in time.
        let send = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            tx.write_all(b"b").await.unwrap();
            tx
        });
        r.read_exact(&mut byte).await.unwrap();
        assert_eq!(&byte, b"b");
        drop(send.await.unwrap());
    }
}
