//! Why the coordinator's state refused a request, and each reason's wire code.

use crossdock_proto::ErrorCode;

use crate::error::Coded;

/// A request the coordinator's state cannot take.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "app '{app}' is not registered (never registered, unregistered, or its lease expired)"
    )]
    UnknownApp { app: String },
    #[error("shuffle {shuffle} of app '{app}' is not registered")]
    UnknownShuffle { app: String, shuffle: u32 },
    #[error("worker {id} is not registered; register again")]
    UnknownWorker { id: u32 },
    #[error("no worker at {addr}")]
    NoWorkerAt { addr: String },
    #[error(transparent)]
    BadAppId(#[from] crate::names::BadAppId),
    #[error("lease_ms must be positive")]
    ZeroLease,
    #[error("{what} is over the quota of {max} ({setting})")]
    Quota {
        what: String,
        max: u64,
        setting: &'static str,
    },
    #[error("shuffle {shuffle} of app '{app}' is registered with {maps} maps and {partitions} partitions, not {asked_maps} and {asked_partitions}")]
    ShuffleExists {
        app: String,
        shuffle: u32,
        maps: u32,
        partitions: u32,
        asked_maps: u32,
        asked_partitions: u32,
    },
    #[error(
        "no live worker is registered with the coordinator; start a worker or check its heartbeats"
    )]
    NoWorkers,
    #[error("every live worker ({full}) reports a full disk; free space on them or add workers")]
    AllDisksFull { full: usize },
    #[error("map {map} is out of range: shuffle {shuffle} has {maps} maps")]
    MapOutOfRange { map: u32, shuffle: u32, maps: u32 },
    #[error("attempt id 4294967295 is reserved")]
    ReservedAttempt,
    #[error(
        "partition {partition} is out of range: the shuffle has {partitions} partitions and splits"
    )]
    PartitionOutOfRange { partition: u32, partitions: u32 },
    #[error("invalid run starts: {reason}")]
    InvalidRuns { reason: String },
    #[error("invalid input sample: {reason}")]
    InvalidSample { reason: String },
    #[error("shuffle {shuffle} has {max} splits, the most a shuffle may have")]
    SplitLimit { shuffle: u32, max: u32 },
    #[error("no other live worker with room to continue partition {partition} on")]
    NoSplitTarget { partition: u32 },
}

impl Coded for StateError {
    fn code(&self) -> ErrorCode {
        use StateError as E;
        match self {
            E::UnknownApp { .. } => ErrorCode::UnknownApp,
            E::UnknownShuffle { .. } => ErrorCode::UnknownShuffle,
            E::UnknownWorker { .. } | E::NoWorkerAt { .. } => ErrorCode::UnknownWorker,
            E::BadAppId(_)
            | E::ZeroLease
            | E::ReservedAttempt
            | E::PartitionOutOfRange { .. }
            | E::InvalidRuns { .. }
            | E::InvalidSample { .. } => ErrorCode::InvalidArgument,
            E::ShuffleExists { .. } => ErrorCode::ShuffleExists,
            E::NoWorkers | E::AllDisksFull { .. } | E::NoSplitTarget { .. } => ErrorCode::NoWorkers,
            E::SplitLimit { .. } => ErrorCode::LimitExceeded,
            E::MapOutOfRange { .. } => ErrorCode::UnknownMap,
            E::Quota { .. } => ErrorCode::LimitExceeded,
        }
    }
}
