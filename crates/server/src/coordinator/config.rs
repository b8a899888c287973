//! How a coordinator runs.

use std::path::PathBuf;
use std::time::Duration;

use crossdock_proto::Durability;

/// How a coordinator runs.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Address to listen on.
    pub listen: String,
    /// Directory for the coordinator's own files.
    pub data_dir: PathBuf,
    /// A worker that sends no heartbeat for this long is marked lost.
    pub worker_timeout: Duration,
    /// How often workers send heartbeats.
    pub heartbeat: Duration,
    /// Copies of every partition: 1, or 2 (a primary and a replica on another worker).
    pub replication: u32,
    /// Sync the state journal to the device on every change (survives a machine crash;
    /// without it, only a crash of the coordinator process).
    pub fsync: bool,
    /// The commit rule: a map counts once its data is held by its workers (`Memory`),
    /// written and synced to their disks (`Disk`), or stored in their object store
    /// (`ObjectStore`).
    pub durability: Durability,
}

impl CoordinatorConfig {
    /// Defaults: heartbeats every second, a worker is lost after 10 s of silence.
    pub fn new(listen: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        CoordinatorConfig {
            listen: listen.into(),
            data_dir: data_dir.into(),
            worker_timeout: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
            replication: 1,
            fsync: true,
            durability: Durability::Memory,
        }
    }
}
