//! The journal's records: each change of the coordinator's durable state, declared
//! once (tag, fields in order) like the protocol's messages.

use bytes::{BufMut, Bytes};
use crossdock_proto::codec::{Appended, Reader};
use crossdock_proto::{checksum, AttemptId, DecodeError, PartitionStat, RunStart};

crossdock_proto::wire_enum! {
    /// One change of the coordinator's durable state.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Record: RecordTag {
        Worker = 1 {
            id: u32,
            addr: String,
            incarnation: u64,
        },
        App = 2 {
            app_id: String,
            lease_ms: u32,
            /// The limits it asked for (absent in journals written before them).
            stored_quota: Appended<u64>,
            memory_share_ppm: Appended<u64>,
        },
        AppGone = 3 {
            app_id: String,
        },
        Shuffle = 4 {
            app_id: String,
            shuffle_id: u32,
            num_maps: u32,
            num_partitions: u32,
            primary: Vec<u32>,
            replica: Vec<u32>,
        },
        Layout = 5 {
            app_id: String,
            shuffle_id: u32,
            primary: Vec<u32>,
            replica: Vec<u32>,
        },
        Commit = 6 {
            app_id: String,
            shuffle_id: u32,
            map_id: u32,
            attempt_id: AttemptId,
            stats: Vec<PartitionStat>,
            /// Where its further sorted runs begin (absent in journals written before
            /// them, and when it has none).
            run_starts: Appended<Vec<RunStart>>,
        },
        Revoke = 7 {
            app_id: String,
            shuffle_id: u32,
            maps: Vec<u32>,
        },
        ShuffleGone = 8 {
            app_id: String,
            shuffle_id: u32,
        },
        /// Split `slot` of a shuffle (always its next slot number), continuing slot `from`,
        /// on `primary` (and `replica`, or `NO_WORKER`).
        Split = 9 {
            app_id: String,
            shuffle_id: u32,
            slot: u32,
            from: u32,
            primary: u32,
            replica: u32,
        },
    }
}

impl Record {
    /// Appends the framed record to `out`: `u32 length | u32 crc32c | u8 tag | body`,
    /// length and CRC covering tag and body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0u8; 8]);
        out.put_u8(self.kind() as u8);
        self.encode_body(out);
        let body = &out[start + 8..];
        let (len, crc) = (body.len() as u32, checksum(body));
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
        out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    }

    /// Decodes a record from its tag and body (CRC already checked).
    pub fn decode(raw: Bytes) -> Result<Record, DecodeError> {
        let mut r = Reader::new(raw);
        let tag = r.u8("tag")?;
        let kind = RecordTag::from_u8(tag)
            .ok_or_else(|| DecodeError::Malformed(format!("unknown record tag {tag}")))?;
        Record::decode_body(kind, &mut r)
    }
}
