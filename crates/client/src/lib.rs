//! Rust client library for Crossdock.
//!
//! - [`RpcConnection`]: one TCP connection carrying many requests at once, matched to
//!   their responses by request id.
//! - [`CoordinatorClient`]: apps, shuffles, commits and shuffle status.
//! - [`WorkerClient`]: pipelined pushes, and [`PartitionReader`], a fetch that resumes
//!   where it stopped when its connection breaks.

mod connection;
mod coordinator;
mod error;
mod worker;

pub use connection::RpcConnection;
pub use coordinator::{CoordinatorClient, Placement, ShuffleStatus};
pub use error::{ClientError, Result};
pub use worker::{FetchRange, PartitionReader, PendingPush, WorkerClient};
