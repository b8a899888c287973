//! The 16-byte frame header shared by every message.
//!
//! ```text
//! offset  size  field
//!      0     4  length      bytes that follow this field (12 + body length), big-endian
//!      4     1  version     PROTOCOL_VERSION
//!      5     1  kind        MessageKind
//!      6     2  flags       FLAG_REPLICA on a forwarded PushBatch; otherwise 0
//!      8     8  request_id  chosen by the requester, echoed in every response frame
//!     16     …  body
//! ```

use crate::error::DecodeError;

/// Protocol version spoken by this build.
pub const PROTOCOL_VERSION: u8 = 2;
/// Size of the frame header, including the length field.
pub const HEADER_LEN: usize = 16;
/// Bytes counted by `length` that belong to the header (everything after the length field).
pub const HEADER_AFTER_LEN: u32 = 12;
/// Largest frame body a receiver accepts for any message other than a pushed batch or a
/// fetched chunk, whose limits are the batch and chunk sizes.
pub const MAX_CONTROL_FRAME: u32 = 64 << 20;
/// Set on a `PushBatch` that a primary worker forwards to the partition's replica. The
/// receiver stores the batch and never forwards it again.
pub const FLAG_REPLICA: u16 = 0x0001;

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Length of the body in bytes.
    pub body_len: u32,
    /// Protocol version of the frame.
    pub version: u8,
    /// Raw message kind.
    pub kind: u8,
    /// Flags ([`FLAG_REPLICA`]); 0 on every other frame.
    pub flags: u16,
    /// Request id, echoed by responses.
    pub request_id: u64,
}

impl FrameHeader {
    /// A version-1 header for a body of `body_len` bytes.
    pub fn new(kind: u8, request_id: u64, body_len: u32) -> Self {
        FrameHeader {
            body_len,
            version: PROTOCOL_VERSION,
            kind,
            flags: 0,
            request_id,
        }
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&(self.body_len + HEADER_AFTER_LEN).to_be_bytes());
        out[4] = self.version;
        out[5] = self.kind;
        out[6..8].copy_from_slice(&self.flags.to_be_bytes());
        out[8..16].copy_from_slice(&self.request_id.to_be_bytes());
        out
    }

    /// Decodes a header. Only the length is checked here; the version and kind are
    /// checked by the receiver, which still needs the request id to answer.
    pub fn decode(raw: &[u8; HEADER_LEN]) -> Result<Self, DecodeError> {
        let length = u32::from_be_bytes(raw[0..4].try_into().expect("4 bytes"));
        if length < HEADER_AFTER_LEN {
            return Err(DecodeError::Malformed(format!(
                "frame length {length} is shorter than the 12 header bytes it must cover"
            )));
        }
        Ok(FrameHeader {
            body_len: length - HEADER_AFTER_LEN,
            version: raw[4],
            kind: raw[5],
            flags: u16::from_be_bytes(raw[6..8].try_into().expect("2 bytes")),
            request_id: u64::from_be_bytes(raw[8..16].try_into().expect("8 bytes")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = FrameHeader::new(0x40, 0x0102_0304_0506_0708, 99);
        let raw = h.encode();
        assert_eq!(&raw[0..4], &111u32.to_be_bytes());
        assert_eq!(FrameHeader::decode(&raw).unwrap(), h);
    }

    #[test]
    fn short_length_is_malformed() {
        let mut raw = FrameHeader::new(1, 0, 0).encode();
        raw[0..4].copy_from_slice(&11u32.to_be_bytes());
        assert!(matches!(
            FrameHeader::decode(&raw),
            Err(DecodeError::Malformed(_))
        ));
    }
}
