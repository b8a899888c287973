//! How a coordinator runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossdock_proto::auth::ClusterSecret;
use crossdock_proto::Durability;

use crate::limits::ConnLimits;

/// Default observation threshold of the partition-size prediction: the fraction of a
/// shuffle's maps that must have committed before its partition sizes are predicted (at
/// least one map). SCache (Fu & Qi, Section 3.2.2) predicts once the observed map output
/// "reaches an observation threshold" and gives no value. A tenth of the maps is what
/// `crossdock sim size-prediction` observes: for a hash partitioner it predicts within
/// a share std of 0.00024 and a mean relative error of 6% per partition (200 maps, 100
/// partitions; `docs/papers.md`), while nine tenths of the map stage remain to act on it.
/// Waiting for more maps makes a better prediction that comes later.
pub const DEFAULT_PREDICTION_THRESHOLD: f64 = 0.1;

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
    /// What clients and workers may hold on the coordinator: connections, time, frame
    /// memory.
    pub limits: ConnLimits,
    /// The cluster secret that authenticates the coordinator and the workers to each
    /// other and from which app tokens are derived; `None`: authentication is off.
    pub secret: Option<Arc<ClusterSecret>>,
    /// TLS on every connection this server accepts and opens to its peers
    /// (`docs/security.md`, "TLS"); `None`: plain TCP.
    pub tls: Option<crossdock_client::tls::ServerTls>,
    /// How much one client may register.
    pub quotas: Quotas,
    /// Fraction of a shuffle's maps (in `[0, 1]`; at least one map) that must have
    /// committed before its partition sizes are predicted (see
    /// [`DEFAULT_PREDICTION_THRESHOLD`] and `docs/architecture.md`, "Partition-size
    /// prediction").
    pub prediction_threshold: f64,
    /// Once a shuffle's sizes are predicted, continue partitions on other hosts until every
    /// host's predicted load is within 10% of SCache's MinHeap placement
    /// (`coordinator::rebalance`), a join's two sides together. Off by default: on the
    /// emulated cluster it balances the hosts' bytes without shortening the jobs measured,
    /// and a join's sides are recognised by the timing of their registrations.
    pub rebalance: bool,
}

/// How much clients may register: every registration beyond a quota is refused with
/// `limit_exceeded`, naming the quota. See `docs/security.md` for the defaults' reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotas {
    /// Apps registered at once.
    pub max_apps: usize,
    /// Shuffles registered at once by one app.
    pub max_shuffles_per_app: usize,
    /// Partitions of one shuffle.
    pub max_partitions: u32,
    /// Maps of one shuffle.
    pub max_maps: u32,
    /// Longest lease an app may ask for.
    pub max_lease: Duration,
}

/// Bytes of a `ShuffleStatus` reply per partition (primary, replica, bytes, records)
/// and per map (its committed attempt).
const STATUS_BYTES_PER_PARTITION: u64 = 4 + 4 + 8 + 8;
const STATUS_BYTES_PER_MAP: u64 = 4;
/// Room in a reply for its fixed fields and the list of workers.
const STATUS_OVERHEAD: u64 = 4 << 20;

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_apps: 10_000,
            max_shuffles_per_app: 100_000,
            max_partitions: 1 << 20,
            max_maps: 1 << 20,
            max_lease: Duration::from_secs(24 * 3600),
        }
    }
}

impl Quotas {
    /// Checks that the largest shuffle the quotas allow can be described in one reply
    /// (a client could not read a bigger one).
    pub fn check(&self) -> Result<(), String> {
        let status = self.max_partitions as u64 * STATUS_BYTES_PER_PARTITION
            + self.max_maps as u64 * STATUS_BYTES_PER_MAP
            + STATUS_OVERHEAD;
        if status > crossdock_proto::MAX_CONTROL_FRAME as u64 {
            return Err(format!(
                "max_partitions {} and max_maps {} allow a shuffle whose status ({status}                  bytes) exceeds the largest frame ({} bytes)",
                self.max_partitions,
                self.max_maps,
                crossdock_proto::MAX_CONTROL_FRAME
            ));
        }
        if self.max_apps == 0
            || self.max_shuffles_per_app == 0
            || self.max_partitions == 0
            || self.max_maps == 0
        {
            return Err("quotas must be positive".to_string());
        }
        Ok(())
    }
}

/// Checks a prediction threshold: a fraction of the maps, in `[0, 1]`.
pub fn check_prediction_threshold(t: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&t) {
        Ok(t)
    } else {
        Err(format!(
            "prediction_threshold must be a fraction of the maps between 0 and 1, not {t}"
        ))
    }
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
            limits: ConnLimits::default(),
            quotas: Quotas::default(),
            prediction_threshold: DEFAULT_PREDICTION_THRESHOLD,
            rebalance: false,
            secret: None,
            tls: None,
        }
    }
}
