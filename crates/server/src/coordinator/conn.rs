//! One connection to the coordinator: frames in, each request handled concurrently by
//! [`service`](super::service), replies matched by request id.

use std::io;
use std::sync::Arc;

use crossdock_proto::io::{read_exact_bytes, read_header, write_message};
use crossdock_proto::{DecodeError, Message, MAX_CONTROL_FRAME, PROTOCOL_VERSION};
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;

use super::node::Coordinator;
use super::service;
use crate::error::ServerError;

/// Requests on one connection are handled concurrently; responses are matched by id.
pub async fn serve(stream: TcpStream, coord: Arc<Coordinator>) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    let mut r = BufReader::new(r);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, Message, bool)>();
    let writer = tokio::spawn(async move {
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
    loop {
        let h = match read_header(&mut r).await {
            Ok(Some(h)) => h,
            Ok(None) => break,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let err = DecodeError::Malformed(e.to_string());
                let _ = tx.send((0, reject(&coord, err.into()), true));
                break;
            }
            Err(e) => return Err(e),
        };
        if h.version != PROTOCOL_VERSION {
            let err = DecodeError::UnsupportedVersion(h.version);
            let _ = tx.send((h.request_id, reject(&coord, err.into()), true));
            break;
        }
        if h.body_len > MAX_CONTROL_FRAME {
            let err = DecodeError::TooLarge {
                len: h.body_len as u64,
                limit: MAX_CONTROL_FRAME as u64,
            };
            let _ = tx.send((h.request_id, reject(&coord, err.into()), true));
            break;
        }
        let body = read_exact_bytes(&mut r, h.body_len as usize).await?;
        let msg = match Message::decode(h.kind, body) {
            Ok(m) => m,
            Err(e) => {
                let _ = tx.send((h.request_id, reject(&coord, e.into()), false));
                continue;
            }
        };
        let coord = coord.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let reply = match service::handle(&coord, msg).await {
                Ok(m) => m,
                Err(err) => reject(&coord, err),
            };
            let _ = tx.send((h.request_id, reply, false));
        });
    }
    drop(tx);
    writer.await.map_err(io::Error::other)?
}
