//! Reading and writing frames on tokio streams.

use std::io;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::frame::{FrameHeader, HEADER_LEN};
use crate::message::{Message, MessageKind, PushHeader};

/// Reads the next frame header. Returns `Ok(None)` when the peer closed the stream
/// cleanly between frames, and `UnexpectedEof` when it closed inside a header.
pub async fn read_header<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Option<FrameHeader>> {
    let mut raw = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        let n = r.read(&mut raw[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("stream closed after {got} of {HEADER_LEN} header bytes"),
                ))
            };
        }
        got += n;
    }
    FrameHeader::decode(&raw)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads exactly `len` bytes into a fresh buffer without zero-filling it first.
pub async fn read_exact_bytes<R: AsyncRead + Unpin>(r: &mut R, len: usize) -> io::Result<Bytes> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let want = (len - buf.len()) as u64;
        let n = (&mut *r).take(want).read_buf(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("stream closed after {} of {len} body bytes", buf.len()),
            ));
        }
    }
    Ok(Bytes::from(buf))
}

/// Reads and discards `len` bytes.
pub async fn skip<R: AsyncRead + Unpin>(r: &mut R, len: u64) -> io::Result<()> {
    let copied = tokio::io::copy(&mut (&mut *r).take(len), &mut tokio::io::sink()).await?;
    if copied < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "stream closed while skipping a rejected frame",
        ));
    }
    Ok(())
}

/// Writes one message as a frame. The caller flushes.
pub async fn write_message<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    msg: &Message,
) -> io::Result<()> {
    if let Message::PushBatch { header, payload } = msg {
        return write_push(w, request_id, header, payload).await;
    }
    w.write_all(&msg.encode_frame(request_id)).await
}

/// Writes a push frame without copying the payload. The caller flushes.
pub async fn write_push<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    header: &PushHeader,
    payload: &[u8],
) -> io::Result<()> {
    write_push_flagged(w, request_id, 0, header, payload).await
}

/// Writes a `PushBatch` frame with the given frame flags (see [`crate::FLAG_REPLICA`]).
pub async fn write_push_flagged<W: AsyncWrite + Unpin>(
    w: &mut W,
    request_id: u64,
    flags: u16,
    header: &PushHeader,
    payload: &[u8],
) -> io::Result<()> {
    let body_len = header.encoded_len() + payload.len();
    let mut head = Vec::with_capacity(HEADER_LEN + header.encoded_len());
    let mut fh = FrameHeader::new(MessageKind::PushBatch as u8, request_id, body_len as u32);
    fh.flags = flags;
    head.extend_from_slice(&fh.encode());
    header.encode(&mut head);
    w.write_all(&head).await?;
    w.write_all(payload).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    #[tokio::test]
    async fn frames_round_trip_through_a_stream() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let msg = Message::PushBatch {
            header: PushHeader {
                app_id: "app".into(),
                shuffle_id: 1,
                partition: 2,
                map_id: 3,
                attempt_id: crate::AttemptId(4),
                batch_seq: 5,
                crc32c: crate::checksum(b"hello"),
            },
            payload: Bytes::from_static(b"hello"),
        };
        write_message(&mut a, 9, &msg).await.unwrap();
        write_message(&mut a, 10, &Message::Ok).await.unwrap();
        drop(a);
        let h = read_header(&mut b).await.unwrap().unwrap();
        let body = read_exact_bytes(&mut b, h.body_len as usize).await.unwrap();
        assert_eq!(h.request_id, 9);
        assert_eq!(Message::decode(h.kind, body).unwrap(), msg);
        let h = read_header(&mut b).await.unwrap().unwrap();
        assert_eq!(h.request_id, 10);
        assert!(read_header(&mut b).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn eof_inside_a_header_is_an_error() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&[0, 0, 0]).await.unwrap();
        drop(a);
        let err = read_header(&mut b).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
