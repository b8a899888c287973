//! One connection to the coordinator: frames in, each request handled concurrently by
//! [`service`](super::service), replies matched by request id.
//!
//! A connection holds at most [`IN_FLIGHT`] requests being handled or replies waiting
//! to be written: the reader reserves a place in the reply queue before it starts a
//! request, and stops reading while there is none. A client that sends requests and
//! never reads the replies therefore pins a bounded amount of memory.

use crate::app_limits::AppLimits;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crossdock_client::tls::Stream;
use crossdock_proto::io::{read_exact_bytes, read_header, write_message};
use crossdock_proto::{DecodeError, Message, MAX_CONTROL_FRAME, PROTOCOL_VERSION};
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;

use super::node::Coordinator;
use super::service;
use crate::auth::Access;
use crate::error::ServerError;
use crate::limits::Timed;

/// Requests of one connection handled or answered-but-unwritten at once.
pub const IN_FLIGHT: usize = 64;

/// A reply: request id, message, and whether the connection closes after it.
type Reply = (u64, Message, bool);

/// Serves one connection from the host `peer`. Requests on one connection are handled
/// concurrently; responses are matched by id.
pub async fn serve(stream: Stream, peer: IpAddr, coord: Arc<Coordinator>) -> io::Result<()> {
    let (r, w) = tokio::io::split(stream);
    let mut r = BufReader::new(Timed::new(r, coord.gate.limits()));
    let w = Timed::writer(w, coord.gate.limits());
    let (tx, mut rx) = mpsc::channel::<Reply>(IN_FLIGHT);
    let mut writer = tokio::spawn(async move {
        let mut w = BufWriter::new(w);
        while let Some((id, msg, close)) = rx.recv().await {
            write_message(&mut w, id, &msg).await?;
            if rx.is_empty() || close {
                w.flush().await?;
            }
            if close {
                break;
            }
        }
        io::Result::Ok(())
    });
    let reject = |coord: &Coordinator, err: ServerError| {
        coord.metrics.errors.inc(err.code);
        tracing::debug!(code = %err.code, message = %err.message, "request rejected");
        err.to_message()
    };
    let access = Arc::new(Mutex::new(Access::new(coord.cfg.secret.clone())));
    let read = async {
        loop {
            // A place for the reply first: with none, the next request stays unread.
            let Ok(place) = tx.clone().reserve_owned().await else {
                return Ok(()); // the writer stopped: the connection is broken
            };
            r.get_mut().expect_frame();
            let h = match read_header(&mut r).await {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    let err = DecodeError::Malformed(e.to_string());
                    place.send((0, reject(&coord, err.into()), true));
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            r.get_mut().in_frame();
            if h.version != PROTOCOL_VERSION {
                let err = DecodeError::UnsupportedVersion(h.version);
                place.send((h.request_id, reject(&coord, err.into()), true));
                return Ok(());
            }
            if h.body_len > MAX_CONTROL_FRAME {
                let err = DecodeError::TooLarge {
                    len: h.body_len as u64,
                    limit: MAX_CONTROL_FRAME as u64,
                };
                place.send((h.request_id, reject(&coord, err.into()), true));
                return Ok(());
            }
            let room = match coord.gate.frame_room(peer, h.body_len).await {
                Ok(room) => room,
                Err(err) => {
                    // The body cannot be skipped without waiting for it: close.
                    place.send((h.request_id, reject(&coord, err), true));
                    return Ok(());
                }
            };
            let body = read_exact_bytes(&mut r, h.body_len as usize).await?;
            let decoded = Message::decode(h.kind, body);
            drop(room);
            let msg = match decoded {
                Ok(m) => m,
                Err(e) => {
                    place.send((h.request_id, reject(&coord, e.into()), false));
                    continue;
                }
            };
            // The handshake and the check of what this connection may ask happen here,
            // in request order, so a request sent right after `Authenticate` sees it.
            let checked = {
                let mut access = access.lock().expect("access lock");
                match msg {
                    Message::Hello => Err(Ok(access.hello())),
                    Message::Authenticate { app_id, proof } => {
                        Err(access.authenticate(&app_id, &proof))
                    }
                    msg => match access.check(&msg) {
                        Ok(()) => Ok(msg),
                        Err(err) => Err(Err(err)),
                    },
                }
            };
            let msg = match checked {
                Ok(msg) => msg,
                Err(answer) => {
                    let reply = answer.unwrap_or_else(|err| reject(&coord, err));
                    place.send((h.request_id, reply, false));
                    continue;
                }
            };
            let coord = coord.clone();
            let access = access.clone();
            tokio::spawn(async move {
                let reply = match handle(&coord, &access, msg).await {
                    Ok(m) => m,
                    Err(err) => reject(&coord, err),
                };
                place.send((h.request_id, reply, false));
            });
        }
    };
    let read: io::Result<()> = tokio::select! {
        read = read => read,
        // The writer ends before the reader only when the connection broke (a write
        // failed or the peer took nothing for the read timeout): stop reading at once.
        written = &mut writer => return written.map_err(io::Error::other)?,
    };
    drop(tx);
    let written = writer.await.map_err(io::Error::other)?;
    read.and(written)
}

/// Handles a request that passed the connection's check. A registration is the one
/// request that changes what the connection may do: the app is its own once registered.
async fn handle(
    coord: &Arc<Coordinator>,
    access: &Mutex<Access>,
    msg: Message,
) -> Result<Message, ServerError> {
    let Message::RegisterApp {
        app_id,
        lease_ms,
        stored_quota,
        memory_share_ppm,
    } = msg
    else {
        return service::handle(coord, msg).await;
    };
    let owner = access.lock().expect("access lock").owns(&app_id);
    let limits = AppLimits {
        stored_quota: stored_quota.value(),
        memory_share_ppm: memory_share_ppm.value(),
    };
    let reply = service::register_app(coord, &app_id, lease_ms, limits, owner).await?;
    access.lock().expect("access lock").grant(&app_id)?;
    Ok(reply)
}
