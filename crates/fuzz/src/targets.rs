//! The targets: each feeds its bytes to a decoder the way the service does, and checks
//! what the decoder made of them. A target panics when a property fails; the decoder
//! itself must never panic, hang or allocate past the input's allowance.
//!
//! The properties, beyond "returns":
//!
//! - A decoded value encodes back to the bytes it was read from: exactly for fixed
//!   layouts (frame headers, record headers), as a prefix of the body for messages and
//!   journal records (decoders ignore bytes after the last field they know, so a newer
//!   peer may append fields), and decodes again to the same value.
//! - What a decoder says about lengths holds: a parsed record's payload lies inside the
//!   buffer and matches its CRC, a journal's good prefix is no longer than the file.
//! - An error names a known wire code and a cut body a positive number of missing bytes.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use crossdock_proto::io::{read_exact_bytes, read_header, skip};
use crossdock_proto::{
    checksum, DecodeError, ErrorCode, FrameHeader, Message, MessageKind, HEADER_LEN,
    PROTOCOL_VERSION,
};
use crossdock_server::coordinator::journal::{decode_records, Record};
use crossdock_server::names::{app_id_of, app_name};
use crossdock_server::worker::push;
use crossdock_server::worker::storage::layout::{partition_of, ShuffleMeta};
use crossdock_server::worker::storage::record::{
    self, Parsed, RecordHeader, RECORD_HEADER, RECORD_MAGIC,
};

/// Largest body the stream target reads: a receiver admits a declared body against its
/// frame limit and budget before it reads it (`MAX_CONTROL_FRAME`, the frame budget),
/// and this stands for that limit. A larger frame is refused as receivers do; one this
/// size or smaller is read, its buffer allocated before its bytes arrive.
pub const STREAM_FRAME_LIMIT: usize = 1 << 20;

/// Checks what a decoding error says of itself: a known wire code, a positive count
/// of missing bytes, a message that formats.
fn check_error(e: &DecodeError) {
    assert!(ErrorCode::ALL.contains(&e.code()), "{e:?}");
    if let DecodeError::Truncated { missing, .. } = e {
        assert!(*missing > 0, "a cut body misses at least one byte: {e:?}");
    }
    assert!(!e.to_string().is_empty());
}

/// Checks that `msg`, decoded from `body`, encodes back to a prefix of `body` and
/// decodes from that again to itself.
fn check_message_round_trip(kind: u8, body: &[u8], msg: &Message) {
    assert_eq!(msg.kind() as u8, kind, "decoded as another kind");
    let mut again = Vec::new();
    msg.encode_body(&mut again);
    assert!(
        body.starts_with(&again),
        "{msg:?} encodes to bytes that are not the ones it was read from"
    );
    let back = Message::decode(kind, Bytes::from(again)).expect("an encoded message decodes");
    assert_eq!(&back, msg);
}

/// `frame`: a whole frame in memory, as the test vectors and `decode_frame` take it.
pub fn frame(data: &[u8]) {
    if let Some(raw) = data.first_chunk::<HEADER_LEN>() {
        match FrameHeader::decode(raw) {
            // Every field of the header is kept: it encodes back exactly.
            Ok(h) => assert_eq!(&h.encode(), raw),
            Err(e) => check_error(&e),
        }
    }
    match Message::decode_frame(data) {
        Ok((h, msg)) => {
            let body = &data[HEADER_LEN..HEADER_LEN + h.body_len as usize];
            check_message_round_trip(h.kind, body, &msg);
            let encoded = msg.encode_frame(h.request_id);
            let (h2, msg2) = Message::decode_frame(&encoded).expect("an encoded frame decodes");
            assert_eq!(
                (h2.kind, h2.request_id, &msg2),
                (h.kind, h.request_id, &msg)
            );
        }
        Err(e) => check_error(&e),
    }
}

/// `message`: a kind byte, then a body, as `Message::decode` gets them from a receiver
/// that read the frame header.
pub fn message(data: &[u8]) {
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    match Message::decode(kind, Bytes::copy_from_slice(body)) {
        Ok(msg) => check_message_round_trip(kind, body, &msg),
        Err(e) => check_error(&e),
    }
}

/// Polls a future that reads from memory to its end. A reader over a byte slice is
/// always ready, so the future never waits; polling stops after a bound that no
/// finite read needs, and the target fails there (a loop that never ends).
fn complete<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("a read from memory did not finish");
}

/// `stream`: a connection's bytes, read frame by frame as a worker reads them: the
/// header, then a push's routing header (the worker's own reader) and its payload, or
/// another message's whole body; a frame refused for its size or version ends the
/// connection, a malformed body does not.
pub fn stream(data: &[u8]) {
    let mut r = data;
    loop {
        let before = r.len();
        let h = match complete(read_header(&mut r)) {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(e) => {
                assert!(
                    matches!(
                        e.kind(),
                        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
                    ),
                    "{e}"
                );
                return;
            }
        };
        assert_eq!(before - r.len(), HEADER_LEN, "a header is 16 bytes");
        if h.version != PROTOCOL_VERSION {
            return;
        }
        let body_len = h.body_len as u64;
        if h.kind == MessageKind::PushBatch as u8 {
            let header = match complete(push::read_header(&mut r, body_len)) {
                Err(_) => return, // the stream ended inside the frame
                Ok(Err(e)) => {
                    check_error(&e);
                    continue; // the rest of the frame was skipped
                }
                Ok(Ok(header)) => header,
            };
            let payload_len = body_len - header.encoded_len() as u64;
            let read = if payload_len <= STREAM_FRAME_LIMIT as u64 {
                complete(read_exact_bytes(&mut r, payload_len as usize))
                    .map(|p| assert_eq!(p.len() as u64, payload_len))
            } else {
                complete(skip(&mut r, payload_len))
            };
            if read.is_err() {
                return;
            }
            continue;
        }
        if body_len > STREAM_FRAME_LIMIT as u64 {
            return;
        }
        let Ok(body) = complete(read_exact_bytes(&mut r, body_len as usize)) else {
            return;
        };
        assert_eq!(body.len() as u64, body_len);
        match Message::decode(h.kind, body.clone()) {
            Ok(msg) => check_message_round_trip(h.kind, &body, &msg),
            Err(e) => check_error(&e),
        }
    }
}

/// `record`: a partition file or object-store segment: the record at its start, its
/// check against its own header, and a scan record after record as recovery and
/// adoption do.
pub fn record(data: &[u8]) {
    if let Some(h) = RecordHeader::decode(data) {
        assert_eq!(&h.encode()[..], &data[..RECORD_HEADER]);
        match record::verify(data, &h) {
            Some(payload) => {
                assert_eq!(payload.end as u64, h.record_len());
                assert_eq!(checksum(&data[payload]), h.crc);
            }
            // Refused only if cut short or corrupt.
            None => assert!(
                (data.len() as u64) < h.record_len()
                    || checksum(&data[RECORD_HEADER..h.record_len() as usize]) != h.crc
            ),
        }
    } else {
        assert!(data.len() < RECORD_HEADER || data[..4] != RECORD_MAGIC.to_be_bytes());
    }
    let mut pos = 0;
    loop {
        match record::parse(&data[pos..]) {
            Parsed::Record(r) => {
                let payload = pos + r.payload.start..pos + r.payload.end;
                assert_eq!(r.payload.start, RECORD_HEADER);
                assert_eq!(checksum(&data[payload.clone()]), r.header.crc);
                assert_eq!(
                    record::verify(&data[pos..], &r.header),
                    Some(r.payload.clone())
                );
                assert!(payload.end > pos, "each record moves the scan on");
                pos = payload.end;
            }
            Parsed::Incomplete => {
                let rest = &data[pos..];
                assert!(
                    rest.len() < RECORD_HEADER
                        || RecordHeader::decode(rest)
                            .is_some_and(|h| (rest.len() as u64) < h.record_len()),
                    "incomplete, yet the whole record is there"
                );
                return;
            }
            Parsed::Bad => return,
        }
    }
}

/// `journal-record`: the tag and body of one record of the coordinator's journal,
/// as its reader hands them over once the record's CRC matched.
pub fn journal_record(data: &[u8]) {
    match Record::decode(Bytes::copy_from_slice(data)) {
        Ok(rec) => {
            let mut framed = Vec::new();
            rec.encode(&mut framed);
            let again = &framed[8..];
            assert!(
                data.starts_with(again),
                "{rec:?} encodes to bytes that are not the ones it was read from"
            );
            let back = Record::decode(Bytes::copy_from_slice(again)).expect("an encoded record");
            assert_eq!(back, rec);
        }
        Err(e) => check_error(&e),
    }
}

/// `journal`: a whole `state.wal` or `state.snapshot`, read up to its first torn or
/// corrupt record.
pub fn journal(data: &[u8]) {
    let (records, good) = decode_records(data);
    assert!(good <= data.len());
    assert!(records.len() * 9 <= good, "a record takes at least 9 bytes");
    let mut again = Vec::new();
    for r in &records {
        r.encode(&mut again);
    }
    let (back, back_good) = decode_records(&again);
    assert_eq!(back, records);
    assert_eq!(back_good, again.len());
}

/// `shuffle-meta`: the contents of a shuffle directory's `shuffle.meta` (read as UTF-8
/// text, as the worker does: other bytes are no meta at all), the app-id names in it and
/// data-file names.
pub fn shuffle_meta(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(meta) = ShuffleMeta::parse(text) {
        assert_eq!(ShuffleMeta::parse(&meta.to_text()), Ok(meta));
    }
    for line in text.lines().take(8) {
        // One id, one name: a name decodes only if it is the name of what it decodes to.
        if let Some(id) = app_id_of(line) {
            assert_eq!(app_name(&id), line, "{line:?} decodes to {id:?}");
        }
        if let Some(p) = partition_of(line) {
            assert_eq!(partition_of(&format!("{p}.data")), Some(p));
        }
    }
}
