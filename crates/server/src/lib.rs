//! Crossdock's coordinator and worker, and the embedded standalone mode that runs both
//! in one process.
//!
//! - [`coordinator`]: membership, app leases, shuffle placement, map commits.
//! - [`worker`]: the push path (destination aggregation into one file per partition,
//!   bounded by a memory budget), the map index and the fetch path.
//! - [`standalone`]: a coordinator and N workers in one process.
//! - [`metrics`]: counters and the Prometheus `/metrics` endpoint.

pub mod coordinator;
pub mod error;
pub mod memory;
pub mod metrics;
pub mod standalone;
pub mod worker;

pub use error::ServerError;

/// Signals shutdown to the accept loops and background tasks of a server.
pub type ShutdownSignal = tokio::sync::watch::Receiver<bool>;
