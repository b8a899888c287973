//! Rust client library for Crossdock.
//!
//! - [`RpcConnection`]: one TCP connection carrying many requests at once, matched to
//!   their responses by request id.
//! - [`CoordinatorClient`]: apps, shuffles, commits and shuffle status.
//! - [`WorkerClient`]: pipelined pushes, and [`PartitionReader`], a fetch that resumes
//!   where it stopped when its connection breaks.
//! - [`Keyring`]: the cluster secret or app tokens each new connection proves, and the
//!   authorities a TLS connection checks the server against ([`tls`]).

mod addr;
mod connection;
mod coordinator;
mod error;
mod keyring;
pub mod tls;
mod worker;

pub use addr::host_of;
pub use connection::RpcConnection;
pub use coordinator::{CoordinatorClient, Placement, ShuffleStatus};
pub use error::{ClientError, Result};
pub use keyring::Keyring;
pub use worker::{FetchRange, PartitionReader, PendingPush, Redirect, WorkerClient};
