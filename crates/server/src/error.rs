//! The reply to a refused request, and how each layer's errors become one.
//!
//! Every layer has its own error enum, and each enum's [`Coded`] impl, beside it, is
//! the one place that gives its variants their wire [`ErrorCode`]:
//!
//! | layer | error |
//! |---|---|
//! | protocol decoding | [`crossdock_proto::DecodeError`] |
//! | worker storage | [`StorageError`](crate::worker::storage::StorageError) (wrapping the object tier's [`ObjectError`](crate::worker::storage::object::ObjectError)) |
//! | replication | [`ReplicaError`](crate::worker::links::ReplicaError) |
//! | coordinator state | [`StateError`](crate::coordinator::state::StateError) |
//! | coordinator service | [`ServiceError`](crate::coordinator::error::ServiceError) |
//!
//! [`ServerError`] is what goes back on the wire: a code and a message.

use crossdock_proto::{ErrorCode, Message, MessageKind};

/// A refused request: the code and message sent back in an `Error` frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ServerError {
    pub code: ErrorCode,
    pub message: String,
}

impl ServerError {
    /// The `Error` frame for this error.
    pub fn to_message(&self) -> Message {
        Message::error(self.code, self.message.clone())
    }

    /// A task that was to compute a reply failed (it panicked or was cancelled).
    pub fn task(what: &str, e: tokio::task::JoinError) -> ServerError {
        ServerError {
            code: ErrorCode::Internal,
            message: format!("{what} task failed: {e}"),
        }
    }

    /// A limit or quota was reached; `message` names it and the setting that raises it.
    pub fn limit(message: String) -> ServerError {
        ServerError {
            code: ErrorCode::LimitExceeded,
            message,
        }
    }

    fn from_coded(code: ErrorCode, e: &dyn std::fmt::Display) -> ServerError {
        ServerError {
            code,
            message: e.to_string(),
        }
    }
}

/// A message kind the endpoint does not take (a worker sent a coordinator's request,
/// or the reverse).
#[derive(Debug, thiserror::Error)]
#[error("{endpoint} does not accept {kind:?} messages")]
pub struct NotAccepted {
    /// "a worker" or "the coordinator".
    pub endpoint: &'static str,
    pub kind: MessageKind,
}

/// An error with a wire code: any of them converts into the [`ServerError`] reply.
pub trait Coded: std::fmt::Display {
    /// The wire error code that reports this error.
    fn code(&self) -> ErrorCode;
}

impl<E: Coded> From<E> for ServerError {
    fn from(e: E) -> Self {
        ServerError::from_coded(e.code(), &e)
    }
}

impl Coded for crossdock_proto::DecodeError {
    fn code(&self) -> ErrorCode {
        crossdock_proto::DecodeError::code(self)
    }
}

impl Coded for NotAccepted {
    fn code(&self) -> ErrorCode {
        ErrorCode::UnknownMessageKind
    }
}
