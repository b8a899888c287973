use crossdock_proto::{DecodeError, ErrorCode};

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection failed or closed.
    #[error("connection to {addr} failed: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The server sent bytes this client cannot decode.
    #[error("undecodable response from {addr}: {source}")]
    Decode {
        addr: String,
        #[source]
        source: DecodeError,
    },
    /// The server rejected the request.
    #[error("{addr} rejected the request: {code_name} ({code}): {message}")]
    Remote {
        addr: String,
        code: u16,
        code_name: &'static str,
        message: String,
    },
    /// The server answered with a message the call did not expect.
    #[error("unexpected response from {addr}: {what}")]
    Unexpected { addr: String, what: String },
    /// Data failed its end-to-end check on the client.
    #[error("data check failed: {0}")]
    Corrupt(String),
}

impl ClientError {
    /// The server's error code, if the server rejected the request.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Remote { code, .. } => ErrorCode::from_u16(*code),
            _ => None,
        }
    }

    /// True when retrying on a new connection may succeed (the transport failed).
    pub fn is_transport(&self) -> bool {
        matches!(self, ClientError::Io { .. })
    }

    pub(crate) fn remote(addr: &str, code: u16, message: String) -> ClientError {
        ClientError::Remote {
            addr: addr.to_string(),
            code,
            code_name: ErrorCode::from_u16(code).map_or("unknown_code", |c| c.name()),
            message,
        }
    }

    /// A reply of a kind the call did not expect from `addr`.
    pub fn unexpected(addr: &str, what: impl std::fmt::Debug) -> ClientError {
        let mut what = format!("{what:?}");
        what.truncate(200);
        ClientError::Unexpected {
            addr: addr.to_string(),
            what,
        }
    }
}

/// Result of a client call.
pub type Result<T> = std::result::Result<T, ClientError>;
