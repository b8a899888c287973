//! Crossdock's wire protocol, as specified in `docs/protocol.md`.
//!
//! One framed binary protocol carries both planes: the control plane (apps, shuffles,
//! commits, worker membership) and the data plane (pushes and fetches). Every frame is a
//! 16-byte [`FrameHeader`] followed by a body whose layout depends on the
//! [`MessageKind`]. Bodies are encoded with the primitives of [`codec`], all big-endian.
//!
//! The shared test vectors in `testdata/protocol/` pin the exact bytes; every client
//! implementation's tests read the same file.

pub mod attempt;
pub mod auth;
pub mod codec;
pub mod error;
pub mod frame;
pub mod io;
pub mod message;
mod wire_enum;

/// Re-exported for the code [`wire_enum!`] and [`wire_struct!`] generate in other crates.
pub use bytes;

pub use attempt::AttemptId;
pub use codec::Appended;
pub use error::{DecodeError, ErrorCode};
pub use frame::{FrameHeader, FLAG_REPLICA, HEADER_LEN, MAX_CONTROL_FRAME, PROTOCOL_VERSION};
pub use message::*;

/// CRC32C (Castagnoli) of a payload, the checksum carried by every pushed batch.
pub fn checksum(payload: &[u8]) -> u32 {
    crc32c::crc32c(payload)
}
