//! Why the coordinator could not carry out a request beyond its state's say: a worker
//! it needed refused or could not be reached, or its journal could not be written.

use crossdock_client::ClientError;
use crossdock_proto::ErrorCode;

use super::state::StateError;
use crate::error::Coded;

/// A request the coordinator could not carry out.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    State(#[from] StateError),
    /// A worker refused: its message, and its code is passed on.
    #[error("worker {addr}: {message}")]
    WorkerRefused {
        addr: String,
        code: u16,
        message: String,
    },
    #[error("worker {addr}: {source}")]
    WorkerUnreachable { addr: String, source: ClientError },
    #[error("writing the coordinator's state journal: {0}")]
    Journal(std::io::Error),
}

impl ServiceError {
    /// The error of a call to the worker at `addr`.
    pub fn worker(addr: &str, e: ClientError) -> ServiceError {
        match e {
            ClientError::Remote { code, message, .. } => ServiceError::WorkerRefused {
                addr: addr.to_string(),
                code,
                message,
            },
            source => ServiceError::WorkerUnreachable {
                addr: addr.to_string(),
                source,
            },
        }
    }
}

impl Coded for ServiceError {
    fn code(&self) -> ErrorCode {
        match self {
            ServiceError::State(e) => e.code(),
            ServiceError::WorkerRefused { code, .. } => {
                ErrorCode::from_u16(*code).unwrap_or(ErrorCode::Internal)
            }
            ServiceError::WorkerUnreachable { .. } => ErrorCode::WorkerUnavailable,
            ServiceError::Journal(_) => ErrorCode::Io,
        }
    }
}
