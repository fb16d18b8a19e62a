//! Parse once: pull out of the body what routing and picking need — the model, the stream
//! flag, where the prompt is, the most tokens it may generate — in one pass over the JSON.
//! The body is forwarded as received, so nothing here rewrites it (that is [`crate::rewrite`]);
//! reading it off the wire, bounded by `bbr.maxRequestBodyBytes`, is each front's own I/O.

use std::borrow::Cow;
use std::ops::Range;

use hyper::HeaderMap;
use infergate_api_error::ApiError;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Header naming the model when the body does not.
pub const MODEL_HEADER: &str = "x-gateway-model-name";

/// What the gateway reads from an inference request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRequest {
    /// The body's `model`, else the `x-gateway-model-name` header.
    pub model: String,
    /// `stream: true`.
    pub stream: bool,
    /// The serialized prompt: the JSON of `messages` (chat), the text of a string `prompt` or
    /// `input`, or the JSON of a list of them.
    pub prompt: PromptBytes,
    /// `max_completion_tokens`, else `max_tokens`, when it is a whole number (anything else is
    /// the model server's to refuse): the most tokens the request may generate.
    pub max_tokens: Option<u64>,
}

/// Where the prompt's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptBytes {
    /// A range of the body (no escapes to undo).
    Body(Range<usize>),
    /// Unescaped text.
    Owned(Vec<u8>),
    /// No prompt field.
    None,
}

impl PromptBytes {
    /// The bytes, given the body they may point into.
    pub fn get<'a>(&'a self, body: &'a [u8]) -> &'a [u8] {
        match self {
            PromptBytes::Body(r) => body.get(r.clone()).unwrap_or_default(),
            PromptBytes::Owned(v) => v,
            PromptBytes::None => &[],
        }
    }
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default, borrow)]
    messages: Option<&'a RawValue>,
    #[serde(default, borrow)]
    prompt: Option<&'a RawValue>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    #[serde(default, borrow)]
    max_tokens: Option<&'a RawValue>,
    #[serde(default, borrow)]
    max_completion_tokens: Option<&'a RawValue>,
}

/// The model and prompt of a request as it arrived: its body parsed (an empty body is not
/// JSON: 400), or, for a request with no body at all (`None`: a GET through Envoy), the model
/// the `x-gateway-model-name` header names, and no prompt.
pub fn parse_request(headers: &HeaderMap, body: Option<&[u8]>) -> Result<ParsedRequest, ApiError> {
    let header_model = headers.get(MODEL_HEADER).and_then(|v| v.to_str().ok());
    if let Some(body) = body {
        return parse(body, header_model);
    }
    match header_model {
        Some(m) if !m.is_empty() => Ok(ParsedRequest {
            model: m.to_owned(),
            stream: false,
            prompt: PromptBytes::None,
            max_tokens: None,
        }),
        _ => Err(ApiError::no_model()),
    }
}

/// Whether `path` (with or without its query) is the embeddings route: an embedding
/// generates nothing, so only its input counts against tokens per minute.
pub fn is_embeddings(path: &str) -> bool {
    path.split('?').next() == Some("/v1/embeddings")
}

/// Parses a body; `header_model` is the `x-gateway-model-name` value, used when the body names
/// no model.
pub fn parse(body: &[u8], header_model: Option<&str>) -> Result<ParsedRequest, ApiError> {
    let head: Head<'_> = serde_json::from_slice(body).map_err(ApiError::bad_json)?;
    // serde reads a struct from a JSON array as well (its members in declaration order), so
    // `["m"]` would be a request for model `m` whose rewrite then replaces the wrong element.
    if body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        != Some(&b'{')
    {
        return Err(ApiError::bad_json("it is an array"));
    }
    let model = match (head.model, header_model) {
        (Some(m), _) if !m.is_empty() => m.into_owned(),
        (_, Some(h)) if !h.is_empty() => h.to_owned(),
        _ => return Err(ApiError::no_model()),
    };
    let prompt = match (head.messages, head.prompt.or(head.input)) {
        (Some(raw), _) => PromptBytes::Body(range_in(body, raw.get())),
        (None, Some(raw)) if raw.get().starts_with('"') => {
            match serde_json::from_str::<Cow<'_, str>>(raw.get()) {
                Ok(Cow::Borrowed(s)) => PromptBytes::Body(range_in(body, s)),
                Ok(Cow::Owned(s)) => PromptBytes::Owned(s.into_bytes()),
                Err(e) => return Err(ApiError::bad_json(e)),
            }
        }
        (None, Some(raw)) => PromptBytes::Body(range_in(body, raw.get())),
        (None, None) => PromptBytes::None,
    };
    let whole = |raw: Option<&RawValue>| raw.and_then(|r| r.get().parse::<u64>().ok());
    Ok(ParsedRequest {
        model,
        stream: head.stream.unwrap_or(false),
        prompt,
        max_tokens: whole(head.max_completion_tokens).or(whole(head.max_tokens)),
    })
}

/// The position of `part`, a slice borrowed from `whole`, within it.
pub(crate) fn range_in(whole: &[u8], part: &str) -> Range<usize> {
    let start = (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    let start = start.min(whole.len());
    start..(start + part.len()).min(whole.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_prompt_is_the_json_of_messages() {
        let body = br#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
        let p = parse(body, None).unwrap();
        assert_eq!(p.model, "m");
        assert!(p.stream);
        assert_eq!(
            p.prompt.get(body),
            br#"[{"role":"user","content":"hi"}]"#.as_slice()
        );
    }

    #[test]
    fn completion_prompt_is_its_text_unescaped() {
        let body = br#"{"model":"m","prompt":"a \"quoted\" word"}"#;
        let p = parse(body, None).unwrap();
        assert_eq!(p.prompt.get(body), br#"a "quoted" word"#.as_slice());
        assert!(!p.stream);
        let plain = br#"{"model":"m","input":"plain text"}"#;
        assert_eq!(
            parse(plain, None).unwrap().prompt.get(plain),
            b"plain text".as_slice()
        );
    }

    #[test]
    fn the_completion_maximum_is_read_when_it_is_a_whole_number() {
        let max = |body: &str| parse(body.as_bytes(), None).unwrap().max_tokens;
        assert_eq!(max(r#"{"model":"m","max_tokens":64}"#), Some(64));
        assert_eq!(
            max(r#"{"model":"m","max_tokens":64,"max_completion_tokens":32}"#),
            Some(32)
        );
        for other in [
            r#"{"model":"m"}"#,
            r#"{"model":"m","max_tokens":null}"#,
            r#"{"model":"m","max_tokens":-1}"#,
            r#"{"model":"m","max_tokens":1.5}"#,
            r#"{"model":"m","max_tokens":"64"}"#,
        ] {
            assert_eq!(max(other), None, "{other}");
        }
    }

    #[test]
    fn a_member_the_gateway_does_not_read_is_skipped_unchecked() {
        // A number outside f64's range in a member nobody here reads (found by the fuzz target):
        // accepted, as its strings are, and left to the model server to judge.
        let p = parse(br#"{ "  ":  5e821}"#, Some("2")).unwrap();
        assert_eq!((p.model.as_str(), &p.prompt), ("2", &PromptBytes::None));
        assert!(serde_json::from_slice::<serde_json::Value>(br#"{ "  ":  5e821}"#).is_err());
    }

    #[test]
    fn model_comes_from_the_body_then_the_header() {
        let body = br#"{"prompt":"x"}"#;
        assert_eq!(parse(body, Some("h")).unwrap().model, "h");
        assert_eq!(parse(body, None).unwrap_err(), ApiError::no_model());
        let both = br#"{"model":"b","prompt":"x"}"#;
        assert_eq!(parse(both, Some("h")).unwrap().model, "b");
    }

    #[test]
    fn not_json_or_not_an_object_is_400() {
        for bad in [
            &b"{"[..],
            b"[1,2]",
            b"\"s\"",
            br#"{"model": 3}"#,
            br#"{"stream":"yes","model":"m"}"#,
            // Arrays whose elements fit the fields in order (found by the fuzz target).
            br#"["m"]"#,
            br#" ["m", true, [{"role":"user","content":"hi"}]]"#,
        ] {
            let e = parse(bad, None).unwrap_err();
            assert_eq!(e.status(), hyper::StatusCode::BAD_REQUEST, "{bad:?}");
            assert_eq!(e.code(), "invalid_json");
        }
    }
}
