//! Why a gateway config was refused; each error names the field.

/// A refused gateway config, LoRA ConfigMap or resolution.
#[derive(Debug, thiserror::Error)]
pub enum GatewayConfigError {
    /// Not YAML, an unknown field (named), or a value of the wrong type; the message starts
    /// with the field's path.
    #[error("{0}")]
    Syntax(#[from] serde_norway::Error),
    /// A field whose value breaks a rule.
    #[error("{field}: {reason}")]
    Invalid {
        /// Path of the field, like `spec.schedulers[1].weights.lru`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl GatewayConfigError {
    /// The path of the offending field, when the error is a rule violation.
    pub fn field(&self) -> Option<&str> {
        match self {
            GatewayConfigError::Invalid { field, .. } => Some(field),
            GatewayConfigError::Syntax(_) => None,
        }
    }
}

pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> GatewayConfigError {
    GatewayConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}
