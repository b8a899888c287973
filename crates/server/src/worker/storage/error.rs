//! Why the storage layer refused or failed a request, and the one place where each
//! reason is given its wire error code.

use crossdock_proto::{AttemptId, ErrorCode};

use super::object::ObjectError;
use crate::error::Coded;

/// A refused or failed storage request.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("app '{app}' has no shuffle on this worker (unknown, expired or unregistered)")]
    UnknownApp { app: String },
    #[error("shuffle {shuffle} of app '{app}' is not on this worker")]
    UnknownShuffle { app: String, shuffle: u32 },
    #[error("partition {partition} of shuffle {shuffle} of app '{app}' is out of range (the shuffle's partitions and splits end at {partitions})")]
    PartitionOutOfRange {
        app: String,
        shuffle: u32,
        partition: u32,
        partitions: u32,
    },
    #[error(
        "partition {partition} of shuffle {shuffle} of app '{app}' is not placed on this worker"
    )]
    PartitionNotHere {
        app: String,
        shuffle: u32,
        partition: u32,
    },
    #[error("map {map} is out of range (the shuffle has {maps} maps)")]
    MapOutOfRange { map: u32, maps: u32 },
    #[error("map range [{start}, {end}) is empty or exceeds the shuffle's {maps} maps")]
    BadMapRange { start: u32, end: u32, maps: u32 },
    #[error(
        "shuffle {shuffle} of app '{app}' exists with {maps} maps and {partitions} partitions"
    )]
    ShuffleExists {
        app: String,
        shuffle: u32,
        maps: u32,
        partitions: u32,
    },
    #[error("{forwards} forward addresses for {partitions} partitions")]
    ForwardCount { forwards: usize, partitions: usize },
    #[error("{slots} continuing slots and {addrs} addresses for {partitions} partitions")]
    ContinuedCount {
        slots: usize,
        addrs: usize,
        partitions: usize,
    },
    #[error("partition {partition} is out of range: partitions and splits end at {partitions}")]
    PreparedOutOfRange { partition: u32, partitions: u32 },
    #[error(transparent)]
    BadAppId(#[from] crate::names::BadAppId),
    #[error("{given} map attempts for a shuffle of {maps} maps")]
    AttemptCount { given: usize, maps: u32 },
    #[error("batch {seq} of map {map} attempt {attempt} for partition {partition}: CRC32C {found:08x} does not match the header's {expected:08x}; the batch was dropped")]
    BadChecksum {
        partition: u32,
        map: u32,
        attempt: AttemptId,
        seq: u32,
        found: u32,
        expected: u32,
    },
    #[error("batch of {len} bytes exceeds this worker's limit of {limit} bytes; split it")]
    BatchTooLarge { len: u64, limit: u64 },
    #[error("map {map} of shuffle {shuffle} already committed (attempt {committed}); batch {seq} of attempt {attempt} is refused")]
    PushAfterCommit {
        shuffle: u32,
        map: u32,
        committed: AttemptId,
        seq: u32,
        attempt: AttemptId,
    },
    #[error("map {map} attempt {attempt} reported {want} bytes for partition {partition} but this worker holds {have}")]
    CommitMismatch {
        map: u32,
        attempt: AttemptId,
        partition: u32,
        want: u64,
        have: u64,
    },
    #[error("map {map}'s committed output is attempt {committed}, not attempt {expected} whose run starts the reader holds: the map's output was replaced; read the shuffle's state again")]
    OtherAttempt {
        map: u32,
        expected: AttemptId,
        /// The committed attempt (`NONE`, shown as "none", if there is none).
        committed: AttemptId,
    },
    #[error("{missing} map(s) of [{start}, {end}) have not committed yet (first: map {first}); fetch after the map stage completes")]
    NotCommitted {
        start: u32,
        end: u32,
        first: u32,
        missing: u32,
    },
    #[error("partition {partition} is still being restored after {secs} s; read it again later")]
    StillRestoring { partition: u32, secs: u64 },
    #[error("shuffle {shuffle} of app '{app}' was deleted")]
    Deleted { app: String, shuffle: u32 },
    #[error("app '{app}' has {held} bytes stored on this worker and a push of {len} more would pass its quota of {quota} bytes (the worker's --app-stored-quota, or less if the app asked for less); delete finished shuffles or raise the quota")]
    QuotaExceeded {
        app: String,
        held: u64,
        len: u64,
        quota: u64,
    },
    #[error("disk full: this worker cannot write to {dirs} and its memory is used up; it takes no more data until space is freed")]
    DiskFull { dirs: String },
    #[error("memory exceeded: this worker keeps shuffle data in memory only (--memory-only) and holds {used} of its {budget}-byte push budget; a batch of {len} bytes does not fit and was not stored")]
    MemoryExceeded { len: u64, used: u64, budget: u64 },
    #[error("this worker keeps shuffle data in memory only (--memory-only) and cannot make a commit durable on {level}; run the coordinator with --durability memory")]
    MemoryOnly { level: &'static str },
    #[error("memory exceeded: app '{app}' holds {held} bytes of its {share}-byte share of this memory-only worker (--app-memory-share); a batch of {len} bytes does not fit and was not stored")]
    AppMemoryExceeded {
        app: String,
        len: u64,
        held: u64,
        share: u64,
    },
    #[error("the coordinator commits to the object store, but this worker has none: start every worker with --object-store")]
    NoObjectStore,
    #[error("map {map} attempt {attempt} could not be {what} within {secs} s{}", last_upload_error.as_ref().map_or(String::new(), |e| format!("; last upload error: {e}")))]
    NotDurable {
        map: u32,
        attempt: AttemptId,
        what: &'static str,
        secs: u64,
        last_upload_error: Option<String>,
    },
    #[error("stored batch {seq} of map {map} (attempt {attempt}) failed its check at offset {offset} of the partition file{}", if *from_object { " (read from the object store)" } else { "" })]
    Corrupt {
        map: u32,
        attempt: AttemptId,
        seq: u32,
        offset: u64,
        from_object: bool,
    },
    #[error("no uploaded segment holds offset {offset} of an evicted partition file; the copy is reported as lost")]
    MissingSegment { offset: u64 },
    /// Committed bytes this worker should hold and cannot read: the partition file
    /// deleted or cut short, a disk read error, an uploaded segment gone from the store.
    #[error("committed data is missing here: {what}; the copy is reported as lost")]
    Lost { what: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error("{what} task failed: {source}")]
    Task {
        what: &'static str,
        source: tokio::task::JoinError,
    },
}

impl StorageError {
    /// An I/O failure while doing `context`.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StorageError {
        let context = context.into();
        move |source| StorageError::Io { context, source }
    }

    /// An I/O failure while reading committed data (`context`): [`StorageError::Lost`]
    /// when it means the bytes are gone or unreadable for good (the file does not exist,
    /// ends early, or the disk fails the read), else a plain [`StorageError::Io`] (out of
    /// file descriptors, interrupted: worth asking again, no reason to move the copy).
    pub fn reading(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StorageError {
        let context = context.into();
        move |source| {
            use std::io::ErrorKind as K;
            let gone = matches!(source.kind(), K::NotFound | K::UnexpectedEof)
                || source.raw_os_error() == Some(libc::EIO);
            if gone {
                StorageError::Lost {
                    what: format!("{context}: {source}"),
                }
            } else {
                StorageError::Io { context, source }
            }
        }
    }

    /// An object-store failure while reading committed data: [`StorageError::Lost`] when
    /// the object is not there or shorter than its index says, else as it is.
    pub fn reading_object(e: ObjectError) -> StorageError {
        let gone = match &e {
            ObjectError::ShortRead { .. } => true,
            ObjectError::Op { source, .. } => source.kind() == opendal::ErrorKind::NotFound,
            _ => false,
        };
        if gone {
            StorageError::Lost {
                what: e.to_string(),
            }
        } else {
            StorageError::Object(e)
        }
    }

    /// Whether this failure of a read of committed data means this worker's copy of the
    /// partition is lost (corrupt or missing), to be reported to the coordinator.
    pub fn loses_copy(&self) -> bool {
        matches!(
            self,
            StorageError::Corrupt { .. }
                | StorageError::Lost { .. }
                | StorageError::MissingSegment { .. }
        )
    }
}

impl Coded for StorageError {
    fn code(&self) -> ErrorCode {
        use StorageError as E;
        match self {
            E::UnknownApp { .. } => ErrorCode::UnknownApp,
            E::UnknownShuffle { .. } | E::Deleted { .. } => ErrorCode::UnknownShuffle,
            E::PartitionOutOfRange { .. } | E::PartitionNotHere { .. } => {
                ErrorCode::UnknownPartition
            }
            E::MapOutOfRange { .. } => ErrorCode::UnknownMap,
            E::BadMapRange { .. }
            | E::ForwardCount { .. }
            | E::ContinuedCount { .. }
            | E::PreparedOutOfRange { .. }
            | E::AttemptCount { .. }
            | E::BadAppId(_)
            | E::NoObjectStore => ErrorCode::InvalidArgument,
            E::ShuffleExists { .. } => ErrorCode::ShuffleExists,
            E::BatchTooLarge { .. } => ErrorCode::BatchTooLarge,
            E::QuotaExceeded { .. } | E::MemoryExceeded { .. } | E::AppMemoryExceeded { .. } => {
                ErrorCode::LimitExceeded
            }
            E::MemoryOnly { .. } => ErrorCode::InvalidArgument,
            E::BadChecksum { .. } => ErrorCode::BadChecksum,
            E::PushAfterCommit { .. } => ErrorCode::PushAfterCommit,
            E::CommitMismatch { .. } | E::OtherAttempt { .. } => ErrorCode::CommitMismatch,
            E::NotCommitted { .. } | E::StillRestoring { .. } => ErrorCode::ShuffleNotComplete,
            E::Corrupt { .. } => ErrorCode::CorruptData,
            E::DiskFull { .. } | E::NotDurable { .. } | E::Io { .. } | E::Object(_) => {
                ErrorCode::Io
            }
            E::MissingSegment { .. } | E::Lost { .. } => ErrorCode::DataLost,
            E::Task { .. } => ErrorCode::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind};

    use super::*;

    #[test]
    fn a_read_that_finds_bytes_gone_loses_the_copy_and_a_transient_one_does_not() {
        let gone = [
            Error::from(ErrorKind::NotFound),
            Error::from(ErrorKind::UnexpectedEof),
            Error::from_raw_os_error(libc::EIO),
        ];
        for e in gone {
            let err = StorageError::reading("reading x")(e);
            assert!(err.loses_copy(), "{err}");
            assert_eq!(err.code(), ErrorCode::DataLost, "{err}");
            assert!(err
                .to_string()
                .starts_with("committed data is missing here: reading x"));
        }
        for e in [
            Error::from_raw_os_error(libc::EMFILE),
            Error::from(ErrorKind::Interrupted),
        ] {
            let err = StorageError::reading("reading x")(e);
            assert!(!err.loses_copy(), "{err}");
            assert_eq!(err.code(), ErrorCode::Io, "{err}");
        }
    }

    #[test]
    fn a_missing_or_short_object_loses_the_copy() {
        let op = |kind| ObjectError::Op {
            op: "reading",
            key: "k".into(),
            url: "s3://b".into(),
            source: Box::new(opendal::Error::new(kind, "test")),
        };
        let short = ObjectError::ShortRead {
            key: "k".into(),
            url: "s3://b".into(),
            got: 1,
            want: 2,
        };
        for e in [op(opendal::ErrorKind::NotFound), short] {
            assert!(StorageError::reading_object(e).loses_copy());
        }
        let timeout = StorageError::reading_object(op(opendal::ErrorKind::Unexpected));
        assert!(!timeout.loses_copy());
        assert_eq!(timeout.code(), ErrorCode::Io);
    }
}
