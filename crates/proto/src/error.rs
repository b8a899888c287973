//! Error codes carried by `Error` frames, and decoding errors.

use std::fmt;

/// A precise reason for a rejected request. The numeric values are part of the wire
/// protocol and never change meaning; new codes are only ever added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u16)]
pub enum ErrorCode {
    /// A frame's body does not match the layout of its message kind.
    MalformedFrame = 1,
    /// A frame's body ends before a field its kind requires.
    TruncatedFrame = 2,
    /// A frame is longer than the receiver accepts.
    FrameTooLarge = 3,
    /// The frame's protocol version is not one the receiver speaks.
    UnsupportedVersion = 4,
    /// The frame's message kind is unknown or not accepted by this endpoint.
    UnknownMessageKind = 5,
    /// The app is not registered (or its lease expired and it was cleaned up).
    UnknownApp = 16,
    /// The shuffle is not registered for this app.
    UnknownShuffle = 17,
    /// The partition is out of range or not placed on this worker.
    UnknownPartition = 18,
    /// The map id is out of range for this shuffle.
    UnknownMap = 19,
    /// The worker id is not (or no longer) known to the coordinator.
    UnknownWorker = 20,
    /// A pushed payload does not match its CRC32C.
    BadChecksum = 32,
    /// A pushed batch is larger than the worker accepts.
    BatchTooLarge = 33,
    /// A batch was pushed for a map that has already committed.
    PushAfterCommit = 34,
    /// A fetch asked for maps that have not all committed yet.
    ShuffleNotComplete = 35,
    /// A shuffle was registered again with different parameters.
    ShuffleExists = 36,
    /// A commit's sizes do not match what the worker received for that attempt.
    CommitMismatch = 37,
    /// A field has a value outside its allowed range.
    InvalidArgument = 38,
    /// No live worker can take the request.
    NoWorkers = 48,
    /// A worker needed for the request cannot be reached or was lost.
    WorkerUnavailable = 49,
    /// Stored data failed its checksum when read back.
    CorruptData = 50,
    /// A local I/O operation failed on the server.
    Io = 51,
    /// An unexpected server-side failure.
    Internal = 52,
    /// The server is shutting down.
    ShuttingDown = 53,
    /// A limit or quota was reached (connections, frames being received, apps,
    /// shuffles per app, partitions per shuffle, lease length). The message names the
    /// limit and the setting that raises it.
    LimitExceeded = 54,
    /// The connection has not proved the credential the request needs: the app's token
    /// for an app's requests, the cluster secret for the coordinator's and workers' own
    /// messages. Nothing was read or changed.
    Unauthorized = 55,
    /// Committed data of the fetched partition is missing or unreadable on this worker
    /// (a partition file deleted or cut short, an unreadable disk, an uploaded segment
    /// gone). The worker reported its copy to the coordinator before answering, which
    /// handles it as a lost copy: another copy takes over, the object store restores it,
    /// or the maps that wrote into it are revoked. Ask the coordinator again.
    DataLost = 56,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 26] = [
        ErrorCode::MalformedFrame,
        ErrorCode::TruncatedFrame,
        ErrorCode::FrameTooLarge,
        ErrorCode::UnsupportedVersion,
        ErrorCode::UnknownMessageKind,
        ErrorCode::UnknownApp,
        ErrorCode::UnknownShuffle,
        ErrorCode::UnknownPartition,
        ErrorCode::UnknownMap,
        ErrorCode::UnknownWorker,
        ErrorCode::BadChecksum,
        ErrorCode::BatchTooLarge,
        ErrorCode::PushAfterCommit,
        ErrorCode::ShuffleNotComplete,
        ErrorCode::ShuffleExists,
        ErrorCode::CommitMismatch,
        ErrorCode::InvalidArgument,
        ErrorCode::NoWorkers,
        ErrorCode::WorkerUnavailable,
        ErrorCode::CorruptData,
        ErrorCode::Io,
        ErrorCode::Internal,
        ErrorCode::ShuttingDown,
        ErrorCode::LimitExceeded,
        ErrorCode::Unauthorized,
        ErrorCode::DataLost,
    ];

    /// The code's wire value.
    pub fn as_u16(self) -> u16 {
        self as u16
    }

    /// The code for a wire value, if it is one this build knows.
    pub fn from_u16(v: u16) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_u16() == v)
    }

    /// A stable snake_case name, used in logs and as a metrics label.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::MalformedFrame => "malformed_frame",
            ErrorCode::TruncatedFrame => "truncated_frame",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::UnknownMessageKind => "unknown_message_kind",
            ErrorCode::UnknownApp => "unknown_app",
            ErrorCode::UnknownShuffle => "unknown_shuffle",
            ErrorCode::UnknownPartition => "unknown_partition",
            ErrorCode::UnknownMap => "unknown_map",
            ErrorCode::UnknownWorker => "unknown_worker",
            ErrorCode::BadChecksum => "bad_checksum",
            ErrorCode::BatchTooLarge => "batch_too_large",
            ErrorCode::PushAfterCommit => "push_after_commit",
            ErrorCode::ShuffleNotComplete => "shuffle_not_complete",
            ErrorCode::ShuffleExists => "shuffle_exists",
            ErrorCode::CommitMismatch => "commit_mismatch",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::NoWorkers => "no_workers",
            ErrorCode::WorkerUnavailable => "worker_unavailable",
            ErrorCode::CorruptData => "corrupt_data",
            ErrorCode::Io => "io",
            ErrorCode::Internal => "internal",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::DataLost => "data_lost",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.as_u16())
    }
}

/// Why a frame could not be decoded. Each maps to the [`ErrorCode`] the receiver sends back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("frame body ends {missing} byte(s) early while reading {field}")]
    Truncated { field: &'static str, missing: usize },
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("frame of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: u64, limit: u64 },
    #[error("protocol version {0} is not supported (this build speaks version {speaks})", speaks = crate::frame::PROTOCOL_VERSION)]
    UnsupportedVersion(u8),
    #[error("unknown message kind 0x{0:02x}")]
    UnknownKind(u8),
}

impl DecodeError {
    /// The wire error code that reports this decoding failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Truncated { .. } => ErrorCode::TruncatedFrame,
            DecodeError::Malformed(_) => ErrorCode::MalformedFrame,
            DecodeError::TooLarge { .. } => ErrorCode::FrameTooLarge,
            DecodeError::UnsupportedVersion(_) => ErrorCode::UnsupportedVersion,
            DecodeError::UnknownKind(_) => ErrorCode::UnknownMessageKind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_u16(c.as_u16()), Some(c));
            assert!(seen.insert(c.as_u16()), "duplicate code {c}");
        }
        assert_eq!(ErrorCode::from_u16(0), None);
        assert_eq!(ErrorCode::from_u16(9999), None);
    }
}
