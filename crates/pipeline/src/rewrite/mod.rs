//! Rewrite, the request's half: the body sent upstream names the model a canary rule (or the
//! rewrite header) chose, and the answer names the client's again ([`restore`]). The choice
//! itself is a lookup in the routing table ([`infergate_control::routes::rewrites`]); what is
//! done here is done to the request's bytes.

pub mod restore;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use infergate_api_error::ApiError;
use infergate_control::routes::rewrites::Decision;

use crate::parse::{range_in, ParsedRequest, PromptBytes};

/// Applies a rewrite decision to the request: the body to send upstream (`None`: the client's
/// as it is) and the model its answer must name again. A request without a body (`None`) is
/// routed by the target alone.
pub fn apply(
    decision: Option<&Decision>,
    body: Option<&[u8]>,
    parsed: &mut ParsedRequest,
) -> Result<(Option<Bytes>, Option<String>), ApiError> {
    let Some(d) = decision else {
        return Ok((None, None));
    };
    let Some(restore) = d.restore().map(str::to_owned) else {
        return Ok((None, None));
    };
    match body {
        Some(body) => Ok((Some(set_model(body, parsed, &d.target)?), Some(restore))),
        None => {
            parsed.model.clone_from(&d.target);
            Ok((None, Some(restore)))
        }
    }
}

#[derive(Deserialize)]
struct ModelField<'a> {
    /// Any value, `null` included (an `Option` alone would read `null` as absent).
    #[serde(default, borrow, deserialize_with = "present")]
    model: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The body with its `model` set to `target` and the parsed request to match: the `model`
/// value is replaced (or, for a body that named its model only in the header, inserted first),
/// every other byte is kept, and a prompt that lies in the body is moved with the bytes.
/// The forwarded `Content-Length` follows the new body (the proxy sets it from the body).
pub fn set_model(body: &[u8], parsed: &mut ParsedRequest, target: &str) -> Result<Bytes, ApiError> {
    let token = serde_json::to_string(target).map_err(ApiError::bad_json)?;
    let field: ModelField<'_> = serde_json::from_slice(body).map_err(ApiError::bad_json)?;
    let out = set_member(body, parsed, "model", field.model, token);
    target.clone_into(&mut parsed.model);
    Ok(out)
}

#[derive(Deserialize)]
struct PriorityField<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    priority: Option<&'a RawValue>,
}

/// The body with its `priority` set to `priority` (a pool's `forwardPriority`: the band as
/// vLLM's priority scheduler reads it), with [`set_model`]'s byte discipline. A `priority` the
/// client wrote is replaced: the band the gateway assigned is the one that counts, or a client
/// could promote itself inside the model server past the gateway's flow control.
pub fn set_priority(
    body: &[u8],
    parsed: &mut ParsedRequest,
    priority: i32,
) -> Result<Bytes, ApiError> {
    let field: PriorityField<'_> = serde_json::from_slice(body).map_err(ApiError::bad_json)?;
    Ok(set_member(
        body,
        parsed,
        "priority",
        field.priority,
        priority.to_string(),
    ))
}

/// Replaces the top-level member `name` (its raw value `found`, if present) with the JSON
/// `token`, or inserts it first; every other byte is kept and the prompt's range follows.
fn set_member(
    body: &[u8],
    parsed: &mut ParsedRequest,
    name: &str,
    found: Option<&RawValue>,
    token: String,
) -> Bytes {
    let (cut, insert) = match found {
        Some(raw) => (range_in(body, raw.get()), token),
        None => {
            // The body parsed as an object, so it has a `{`; what follows decides the comma.
            let open = body.iter().position(|&b| b == b'{').unwrap_or(0) + 1;
            let rest = body.get(open..).unwrap_or_default();
            let empty = rest
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|&b| b == b'}');
            let sep = if empty { "" } else { "," };
            (open..open, format!("\"{name}\":{token}{sep}"))
        }
    };
    let mut out = Vec::with_capacity(body.len() + insert.len());
    out.extend_from_slice(body.get(..cut.start).unwrap_or_default());
    out.extend_from_slice(insert.as_bytes());
    out.extend_from_slice(body.get(cut.end..).unwrap_or_default());
    if let PromptBytes::Body(r) = &mut parsed.prompt {
        // The prompt and `name` are different members, so the prompt lies wholly before
        // or wholly after the cut.
        if r.start >= cut.end {
            let moved = |i: usize| i - cut.end + cut.start + insert.len();
            *r = moved(r.start)..moved(r.end);
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests;
