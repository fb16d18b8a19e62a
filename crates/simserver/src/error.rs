//! Errors: [`SimError`] for the caller that starts servers, [`ApiError`] for HTTP clients, in
//! the OpenAI shape vLLM answers with.

use bytes::Bytes;
use hyper::StatusCode;
use infergate_engine::ConfigError;
use serde::Serialize;

/// Why a simulated server could not start or keep running.
///
/// Each message carries its cause, and no variant exposes it again as `source()`, so a printer
/// that walks the chain shows each cause once.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The engine settings are ones vLLM would refuse.
    #[error("invalid engine config: {0}")]
    Config(ConfigError),
    /// A server knob is out of range; the message names it.
    #[error("invalid replica spec: {0}")]
    InvalidSpec(String),
    /// The listener failed (reading its address, or binding it again after a restart).
    #[error("listener: {0}")]
    Io(std::io::Error),
}

impl From<ConfigError> for SimError {
    fn from(e: ConfigError) -> Self {
        SimError::Config(e)
    }
}

impl From<std::io::Error> for SimError {
    fn from(e: std::io::Error) -> Self {
        SimError::Io(e)
    }
}

/// An error answered to an HTTP client: `{"error": {"message", "type", "param", "code"}}` with
/// the status it names, as vLLM's OpenAI server writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl ApiError {
    /// An error with an explicit status and OpenAI error type.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
        }
    }

    /// 400: the body is malformed or a field is missing, mistyped or out of range.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "BadRequestError", message)
    }

    /// 404: vLLM's answer to an unknown model name.
    pub fn unknown_model(model: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            format!("The model `{model}` does not exist."),
        )
    }

    /// An injected or simulated failure with this status.
    pub fn from_status(status: u16) -> ApiError {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let (kind, message) = match status.as_u16() {
            429 => ("RateLimitError", "The server is overloaded; retry later."),
            500 => (
                "InternalServerError",
                "Internal server error (injected fault).",
            ),
            503 => (
                "ServiceUnavailableError",
                "The server is unavailable (injected fault).",
            ),
            400..=499 => ("BadRequestError", "Request refused (injected fault)."),
            _ => ("InternalServerError", "Server error (injected fault)."),
        };
        ApiError::new(status, kind, message)
    }

    /// 503 while a restarted replica loads its weights.
    pub fn starting_up() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "The server is starting up.",
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The OpenAI error type (`BadRequestError`, `NotFoundError`, …).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The JSON body.
    pub fn body(&self) -> Bytes {
        #[derive(Serialize)]
        struct Body<'a> {
            error: Inner<'a>,
        }
        #[derive(Serialize)]
        struct Inner<'a> {
            message: &'a str,
            #[serde(rename = "type")]
            kind: &'a str,
            param: Option<&'a str>,
            code: u16,
        }
        let body = Body {
            error: Inner {
                message: &self.message,
                kind: self.kind,
                param: None,
                code: self.status.as_u16(),
            },
        };
        // Serializing plain strings and numbers cannot fail.
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.kind,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_the_openai_shape() {
        let e = ApiError::unknown_model("gpt-9");
        let v: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
        assert_eq!(v["error"]["message"], "The model `gpt-9` does not exist.");
        assert_eq!(v["error"]["type"], "NotFoundError");
        assert_eq!(v["error"]["param"], serde_json::Value::Null);
        assert_eq!(v["error"]["code"], 404);
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
    }
}
