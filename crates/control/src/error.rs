//! Why a gateway could not start or reload. Errors a client sees are the pipeline's
//! `ApiError`.
//!
//! Each message carries its cause once: a variant that wraps another error is `transparent`,
//! and a leaf writes its I/O cause into its message without exposing it as `source()`, so a
//! printer that walks the chain (anyhow's `{:#}`) never repeats it.

use std::net::SocketAddr;

use infergate_config::gateway::GatewayConfigError;
use infergate_telemetry::capture::CaptureError;

/// A gateway that could not start, or a reload that was refused (the running config stays).
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The config file was refused; the message names the field.
    #[error(transparent)]
    Config(#[from] GatewayConfigError),
    /// The trace capture file could not be opened.
    #[error(transparent)]
    Capture(#[from] CaptureError),
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
    #[error("binding {addr}: {cause}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        cause: std::io::Error,
    },
    /// Reading the config file or another I/O failure.
    #[error("{context}: {cause}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        cause: std::io::Error,
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
    /// A field that cannot be honoured, and why.
    pub fn unsupported(field: impl Into<String>, reason: impl Into<String>) -> Self {
        GatewayError::Unsupported {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// An I/O failure while doing `context`.
    pub fn io(context: impl Into<String>, cause: std::io::Error) -> Self {
        GatewayError::Io {
            context: context.into(),
            cause,
        }
    }
}

/// An error and its causes on one line (hyper's own message is only the outermost).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
