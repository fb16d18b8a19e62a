//! Why a gateway could not start or reload. Errors a client sees are [`crate::ApiError`].

use std::net::SocketAddr;

use infergate_config::gateway::GatewayConfigError;

/// A gateway that could not start, or a reload that was refused (the running config stays).
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The config file was refused; the message names the field.
    #[error("{0}")]
    Config(#[from] GatewayConfigError),
    /// A field the standalone gateway does not honour yet. Refused rather than ignored: a knob
    /// that is set is never silently dropped.
    #[error("{field}: {reason}")]
    Unsupported {
        /// The field's path, like `spec.auth`.
        field: String,
        /// Why it cannot be honoured.
        reason: String,
    },
    /// A pool's picker configuration could not be turned into a policy.
    #[error("spec.schedulers[{pool}]: picker: {reason}")]
    Picker {
        /// The pool's name.
        pool: String,
        /// What is wrong.
        reason: String,
    },
    /// A listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// Reading the config file or another I/O failure.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// TLS could not be set up.
    #[error("tls: {0}")]
    Tls(String),
    /// The JWT signing keys could not be set up (a JWKS file that cannot be read or used, a
    /// URL that cannot be parsed).
    #[error("{field}: {reason}")]
    Keys {
        /// The field's path, like `spec.auth.jwt.provider.localJWKS.file`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl GatewayError {
    pub(crate) fn unsupported(field: impl Into<String>, reason: impl Into<String>) -> Self {
        GatewayError::Unsupported {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        GatewayError::Io {
            context: context.into(),
            source,
        }
    }
}
