//! How a worker runs: its settings and the split of its memory budget.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossdock_proto::auth::ClusterSecret;

use crate::limits::ConnLimits;
use crate::memory::{Order, Sharing};

/// How a worker shares itself between applications (`docs/operations.md`, "Many
/// applications on one service").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tenancy {
    /// Who gets memory credit (pushes) and fetch buffer credit first when they are short.
    pub order: Order,
    /// The share of the push budget, and of the fetch buffers, one app may hold, in (0, 1].
    pub app_memory_share: f64,
    /// Most payload bytes one app may have stored on this worker; `None`: no limit.
    pub app_stored_quota: Option<u64>,
    /// Congestion throttling's step per doubling of write latency; zero turns it off.
    pub congestion_step: Duration,
}

impl Default for Tenancy {
    /// Fair completion order, no quota (an app alone gets the whole worker), the
    /// dissertation's 50 ms congestion step.
    fn default() -> Self {
        Tenancy {
            order: Order::fair(),
            app_memory_share: 1.0,
            app_stored_quota: None,
            congestion_step: Duration::from_millis(50),
        }
    }
}

impl Tenancy {
    /// How the memory budgets are shared.
    pub fn sharing(&self) -> Sharing {
        Sharing {
            order: self.order,
            app_share: self.app_memory_share,
        }
    }
}

/// The split size by default: past it a partition continues on another worker, so no
/// partition fills one worker's disk or is read whole from one place (Celeborn splits at
/// the same size).
pub const DEFAULT_SPLIT_BYTES: u64 = 1 << 30;

/// Largest batch a worker accepts by default.
pub const DEFAULT_MAX_BATCH: u64 = 16 << 20;
/// Largest chunk of a fetch stream. A reader reads a chunk whole before it can hand any of
/// it on, and holds it until the last of its batches is consumed, so the chunk is what a
/// reader holds beyond its in-flight limit: 1 MiB keeps that small beside a small
/// executor's limit (4 MiB chunks made a 64 MiB executor run out of heap in its reads),
/// and in a Spark A/B at normal memory was within the runs' spread (docs/benchmarks-service.md).
pub const FETCH_CHUNK: u64 = 1 << 20;
/// Largest first chunk of a fetch stream (the next ones double up to [`FETCH_CHUNK`]).
pub const FIRST_CHUNK: u64 = 128 << 10;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Address to listen on for pushes, fetches and coordinator calls.
    pub listen: String,
    /// Address given to the coordinator for clients to connect to; defaults to the
    /// bound address (which must then not be a wildcard such as 0.0.0.0).
    pub advertise: Option<String>,
    /// The machine's name as engines know it (Spark's executor host), so that reduce
    /// tasks can be run here; empty: the host part of the advertised address (Spark names
    /// an executor by its IP unless `SPARK_LOCAL_HOSTNAME` says otherwise).
    pub host: String,
    /// The failure domain (rack or availability zone); empty: unlabelled. Replicas go to
    /// another zone when one has a live worker.
    pub zone: String,
    /// The coordinator's address.
    pub coordinator: String,
    /// Budget for buffered shuffle data (pushed batches in memory and fetch buffers).
    pub memory: u64,
    /// Directory for partition files.
    pub data_dir: PathBuf,
    /// More directories (other disks): partitions are spread over all of them.
    pub extra_data_dirs: Vec<PathBuf>,
    /// The object store partition files are uploaded to (`s3://bucket/prefix?...` or
    /// `file:///path`), if any.
    pub object_store: Option<String>,
    /// With an object store: above this many bytes of partition files on local disk,
    /// wholly uploaded partitions are evicted from it.
    pub disk_quota: Option<u64>,
    /// What clients may hold on this worker: connections, time, frame memory.
    pub limits: ConnLimits,
    /// The cluster secret that authenticates the coordinator and the workers to each
    /// other and from which app tokens are derived; `None`: authentication is off.
    pub secret: Option<Arc<ClusterSecret>>,
    /// TLS on every connection this server accepts and opens to its peers
    /// (`docs/security.md`, "TLS"); `None`: plain TCP.
    pub tls: Option<crossdock_client::tls::ServerTls>,
    /// How the worker is shared between applications.
    pub tenancy: Tenancy,
    /// A partition whose bytes here reach this continues on another worker (and one
    /// crowding a worker short of memory does sooner); 0 turns splits off.
    pub split_bytes: u64,
    /// No local disk tier: pushed batches stay in memory until their app is deleted, and
    /// a batch that finds no room is refused (`memory exceeded`) instead of waiting for a
    /// spill (a node without a local disk, as the SMS paper's HPC nodes). Commits must
    /// then be of durability `memory`.
    pub memory_only: bool,
    /// Fetches of data on disk, by readers that take stored records, are sent from the
    /// page cache with `sendfile` on plain-TCP connections (the reader checks each
    /// record); false: every fetch is read and checked here (`FetchChunk` only).
    pub zero_copy_fetch: bool,
}

/// The least fetch buffer credit of a worker with the memory for it: room for a few
/// streams' chunks at once.
const MIN_FETCH_CREDIT: u64 = 4 << 20;

/// The most fetch buffer credit a worker keeps, whatever its memory.
const MAX_FETCH_CREDIT: u64 = 64 << 20;

/// The part of a worker's memory kept for fetch buffers: an eighth, at least
/// [`MIN_FETCH_CREDIT`] (half the memory when that is less) and at most [`MAX_FETCH_CREDIT`].
fn fetch_credit(memory: u64) -> u64 {
    (memory / 8).clamp(MIN_FETCH_CREDIT.min(memory / 2), MAX_FETCH_CREDIT)
}

/// The smallest worker memory (`--memory`) whose push credit is at least `push`: what a
/// benchmark that sets the workers' job limit asks for.
pub fn memory_for_push_credit(push: u64) -> u64 {
    // The push credit, memory less its fetch part, never falls as memory grows, and the
    // fetch part is at most MAX_FETCH_CREDIT: the answer lies in [push, push + MAX_FETCH_CREDIT].
    let (mut lo, mut hi) = (push, push + MAX_FETCH_CREDIT);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if mid - fetch_credit(mid) >= push {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

impl WorkerConfig {
    /// The budget's split: (push credit, fetch buffer credit, max batch).
    pub fn derived(&self) -> (u64, u64, u64) {
        let fetch = fetch_credit(self.memory);
        let push = self.memory - fetch;
        let max_batch = DEFAULT_MAX_BATCH.min(push / 4).max(1);
        (push, fetch, max_batch)
    }

    /// Every data directory, the main one first.
    pub fn data_dirs(&self) -> Vec<PathBuf> {
        std::iter::once(self.data_dir.clone())
            .chain(self.extra_data_dirs.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_for_a_push_credit_is_the_smallest_that_gives_it() {
        for push in [
            1u64,
            3 << 20,
            12 << 20,
            (12 << 20) + 7,
            100 << 20,
            (448 << 20) + 1,
            10 << 30,
        ] {
            let m = memory_for_push_credit(push);
            assert!(m - fetch_credit(m) >= push, "{push}: {m} gives less");
            assert!(
                (m - 1) - fetch_credit(m - 1) < push,
                "{push}: {m} is not the smallest"
            );
        }
    }
}
