//! Why `infergate extproc` could not start. Errors a client sees are
//! [`infergate_gateway::ApiError`]s, sent as immediate responses.

use std::net::SocketAddr;

use infergate_gateway::GatewayError;

/// A server that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExtProcError {
    /// The data plane could not start (config, TLS, admin listener); the message names the
    /// field or the address.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// A field extproc mode cannot honour, refused rather than ignored.
    #[error("{field}: {reason}")]
    Unsupported {
        /// The field's path, like `spec.endpoints[0].address`.
        field: String,
        /// Why it cannot be honoured.
        reason: String,
    },
    /// A gRPC listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// Another I/O failure.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
}
