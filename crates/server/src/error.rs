use crossdock_proto::{ErrorCode, Message};

/// A rejected request: the code and message sent back in an `Error` frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ServerError {
    pub code: ErrorCode,
    pub message: String,
}

impl ServerError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ServerError {
            code,
            message: message.into(),
        }
    }

    /// The `Error` frame for this error.
    pub fn to_message(&self) -> Message {
        Message::error(self.code, self.message.clone())
    }

    pub fn io(context: &str, e: std::io::Error) -> Self {
        ServerError::new(ErrorCode::Io, format!("{context}: {e}"))
    }
}

impl From<crossdock_proto::DecodeError> for ServerError {
    fn from(e: crossdock_proto::DecodeError) -> Self {
        ServerError::new(e.code(), e.to_string())
    }
}
