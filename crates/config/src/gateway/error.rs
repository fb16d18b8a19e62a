//! Why a gateway config was refused; each error names the field.
//!
//! The rule for every error type of the pure crates: `Display` states the whole cause, once.
//! An error that wraps another either forwards to it (`#[error(transparent)]`) or prints it in
//! its own message and does not also return it from `source()` — never both, since a chain
//! printer (anyhow's `{:#}`) prints every `source()` after the message and would say it twice.

/// A refused gateway config, LoRA ConfigMap or resolution.
#[derive(Debug, thiserror::Error)]
pub enum GatewayConfigError {
    /// Not YAML, an unknown field (named), or a value of the wrong type; the message starts
    /// with the field's path. serde stops at the first such mistake, so there is one.
    #[error(transparent)]
    Syntax(#[from] serde_norway::Error),
    /// A field whose value breaks a rule.
    #[error("{field}: {reason}")]
    Invalid {
        /// Path of the field, like `spec.schedulers[1].weights.lru`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// Several fields break rules: every one found, in the order the document is checked, one
    /// per line. Each is an [`GatewayConfigError::Invalid`].
    #[error("{}", display_lines(.0))]
    Several(Vec<GatewayConfigError>),
}

fn display_lines(errors: &[GatewayConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl GatewayConfigError {
    /// The path of the offending field, when the error is a rule violation.
    /// With several, the first one's.
    pub fn field(&self) -> Option<&str> {
        match self {
            GatewayConfigError::Invalid { field, .. } => Some(field),
            GatewayConfigError::Several(all) => all.first().and_then(GatewayConfigError::field),
            GatewayConfigError::Syntax(_) => None,
        }
    }

    /// Every error this one holds: itself, or each of several.
    pub fn all(&self) -> &[GatewayConfigError] {
        match self {
            GatewayConfigError::Several(all) => all,
            one => std::slice::from_ref(one),
        }
    }

    /// One error for `errors` in order: `None` for none, the error itself for one, else
    /// [`GatewayConfigError::Several`] (nested ones flattened).
    pub(crate) fn from_all(errors: Vec<GatewayConfigError>) -> Option<GatewayConfigError> {
        let mut flat: Vec<GatewayConfigError> = Vec::with_capacity(errors.len());
        for e in errors {
            match e {
                GatewayConfigError::Several(inner) => flat.extend(inner),
                one => flat.push(one),
            }
        }
        match flat.len() {
            0 => None,
            1 => flat.pop(),
            _ => Some(GatewayConfigError::Several(flat)),
        }
    }
}

pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> GatewayConfigError {
    GatewayConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}
