//! Why `infergate extproc` could not start. Errors a client sees are
//! [`infergate_pipeline::ApiError`]s, sent as immediate responses.

use infergate_control::GatewayError;

/// A server that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExtProcError {
    /// The control plane could not start (config, TLS, admin listener) or a gRPC listener could
    /// not be bound; the message names the field or the address.
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
}
