//! The stored record: how one pushed batch is laid out in a partition file and in the
//! object store's segments, which is also the protocol's `StoredBatch` (`FetchRecords`
//! sends records as they lie in the file). The worker writes, parses and checks it here.
//!
//! ```text
//! u32 magic "CDK1" | u32 map_id | u32 attempt_id | u32 batch_seq | u32 len | u32 crc32c | payload
//! ```
//!
//! Every record is self-describing, so a file or a segment can be checked and indexed on
//! its own (recovery after a restart, adoption from the object store).

use crossdock_proto::{checksum, AttemptId, StoredBatch};

/// Size of a record header: the protocol's stored record (`FetchRecords` sends records as
/// they lie in the file), so the two cannot drift apart.
pub const RECORD_HEADER: usize = StoredBatch::HEADER_LEN;
/// Magic number that starts every record ("CDK1").
pub const RECORD_MAGIC: u32 = crossdock_proto::RECORD_MAGIC;

/// The header of one stored record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub map: u32,
    pub attempt: AttemptId,
    pub seq: u32,
    /// Payload length.
    pub len: u32,
    /// CRC32C of the payload.
    pub crc: u32,
}

impl RecordHeader {
    /// The header's bytes (the protocol's stored-record header).
    pub fn encode(&self) -> [u8; RECORD_HEADER] {
        let mut out = [0u8; RECORD_HEADER];
        let (map, attempt, seq) = (self.map, self.attempt, self.seq);
        StoredBatch::put_header(&mut &mut out[..], map, attempt, seq, self.len, self.crc);
        out
    }

    /// Reads a header from the first [`RECORD_HEADER`] bytes of `buf`; `None` if `buf`
    /// is shorter or does not start with the magic number.
    pub fn decode(buf: &[u8]) -> Option<RecordHeader> {
        let raw = buf.get(..RECORD_HEADER)?;
        let f = |i: usize| u32::from_be_bytes(raw[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        (f(0) == RECORD_MAGIC).then(|| RecordHeader {
            map: f(1),
            attempt: AttemptId(f(2)),
            seq: f(3),
            len: f(4),
            crc: f(5),
        })
    }

    /// Bytes the whole record takes (header and payload).
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER as u64 + self.len as u64
    }
}

/// A whole record found at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub header: RecordHeader,
    /// Where the payload lies in the buffer parsed.
    pub payload: std::ops::Range<usize>,
}

/// What [`parse`] found at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole record whose CRC matches.
    Record(Record),
    /// The buffer ends inside the record: read more.
    Incomplete,
    /// Not a record (bad magic) or a record whose payload fails its CRC.
    Bad,
}

/// Parses the record at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    if buf.len() < RECORD_HEADER {
        return Parsed::Incomplete;
    }
    let Some(header) = RecordHeader::decode(buf) else {
        return Parsed::Bad;
    };
    let end = RECORD_HEADER + header.len as usize;
    if buf.len() < end {
        return Parsed::Incomplete;
    }
    if checksum(&buf[RECORD_HEADER..end]) != header.crc {
        return Parsed::Bad;
    }
    Parsed::Record(Record {
        header,
        payload: RECORD_HEADER..end,
    })
}

/// Checks the record at the start of `buf` against what the index says it is: the
/// header fields must match and the payload its CRC. Returns the payload's range.
pub fn verify(buf: &[u8], expected: &RecordHeader) -> Option<std::ops::Range<usize>> {
    let found = RecordHeader::decode(buf)?;
    let end = RECORD_HEADER + expected.len as usize;
    (found == *expected && buf.len() >= end && checksum(&buf[RECORD_HEADER..end]) == expected.crc)
        .then_some(RECORD_HEADER..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(payload: &[u8]) -> (RecordHeader, Vec<u8>) {
        let h = RecordHeader {
            map: 3,
            attempt: AttemptId(1 << 16),
            seq: 9,
            len: payload.len() as u32,
            crc: checksum(payload),
        };
        let mut raw = h.encode().to_vec();
        raw.extend_from_slice(payload);
        (h, raw)
    }

    #[test]
    fn a_record_parses_back_and_verifies() {
        let (h, raw) = record(b"payload");
        assert_eq!(RecordHeader::decode(&raw), Some(h));
        assert_eq!(
            parse(&raw),
            Parsed::Record(Record {
                header: h,
                payload: RECORD_HEADER..raw.len()
            })
        );
        assert_eq!(verify(&raw, &h), Some(RECORD_HEADER..raw.len()));
        assert_eq!(h.record_len(), raw.len() as u64);
    }

    #[test]
    fn a_record_is_the_protocols_stored_batch() {
        use bytes::Bytes;
        use crossdock_proto::codec::{Reader, Wire};
        let (h, raw) = record(b"payload");
        let mut wire = Vec::new();
        StoredBatch {
            map_id: h.map,
            attempt_id: h.attempt,
            batch_seq: h.seq,
            crc32c: h.crc,
            payload: Bytes::from_static(b"payload"),
        }
        .put(&mut wire);
        assert_eq!(wire, raw);
        let back = StoredBatch::get(&mut Reader::new(Bytes::from(raw)), "record").unwrap();
        assert_eq!(
            (back.map_id, back.attempt_id, back.batch_seq, back.crc32c),
            (h.map, h.attempt, h.seq, h.crc)
        );
        assert_eq!(back.payload, Bytes::from_static(b"payload"));
    }

    #[test]
    fn cut_corrupt_and_foreign_bytes_are_told_apart() {
        let (h, mut raw) = record(b"payload");
        assert_eq!(parse(&raw[..raw.len() - 1]), Parsed::Incomplete);
        assert_eq!(parse(&raw[..10]), Parsed::Incomplete);
        let other = RecordHeader { seq: 10, ..h };
        assert_eq!(verify(&raw, &other), None, "another batch's header");
        let last = raw.len() - 1;
        raw[last] ^= 1;
        assert_eq!(parse(&raw), Parsed::Bad);
        assert_eq!(verify(&raw, &h), None);
        raw[0] = 0;
        assert_eq!(parse(&raw), Parsed::Bad);
    }
}
