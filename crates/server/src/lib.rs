//! Crossdock's coordinator and worker, and the embedded standalone mode that runs both
//! in one process.
//!
//! - [`coordinator`]: membership, app leases, shuffle placement, map commits.
//! - [`worker`]: the push path (destination aggregation into one file per partition,
//!   bounded by a memory budget), the storage layer and the fetch path.
//! - [`standalone`]: a coordinator and N workers in one process.
//!
//! Shared by both, lowest in the crate: [`error`] (the wire reply and how each layer's
//! errors become one), [`auth`] (what a connection proved and may ask), [`limits`] (what a peer may hold: connections, time, frame
//! memory), [`app_limits`] (stricter limits an app asks for), [`memory`] (byte budgets shared between apps by FIFO or fair completion, with quotas), [`congestion`] (slowing the heaviest pusher when writes slow down), [`metrics`] (the Prometheus
//! endpoint), [`names`] (client ids as file names and keys), [`net`] (accept loop,
//! shutdown), [`peers`] (cached connections to other servers), [`units`] (byte counts for people). Every module imports only modules below it and never its parent
//! (`tests/layers.rs` checks it).

pub mod app_limits;
pub mod auth;
pub mod congestion;
pub mod coordinator;
pub mod error;
pub mod heap;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod names;
pub mod net;
pub mod peers;
pub mod standalone;
pub mod units;
pub mod worker;

pub use error::ServerError;
pub use net::ShutdownSignal;
