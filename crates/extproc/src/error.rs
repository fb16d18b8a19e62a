//! Why `infergate extproc` could not start. Errors a client sees are
//! [`infergate_pipeline::ApiError`]s, sent as immediate responses.

use std::net::SocketAddr;

use infergate_control::GatewayError;

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
    #[error("binding {addr}: {cause}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause (in the message, not a `source()`, so a chain printer shows it once).
        cause: std::io::Error,
    },
    /// Another I/O failure.
    #[error("{context}: {cause}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        cause: std::io::Error,
    },
}
