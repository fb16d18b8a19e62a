//! The request body, as both fronts parse it: any bytes, with or without a model header, give
//! a request whose fields are what the JSON says, or a 400 — never a panic.
//!
//! Input: one byte, the header's length plus one (0: no header), the header value, the body.
#![no_main]

use hyper::header::HeaderValue;
use hyper::HeaderMap;
use infergate_pipeline::parse::{parse, parse_request, PromptBytes, MODEL_HEADER};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (header, body) = match usize::from(n % 32) {
        0 => (None, rest),
        n => rest
            .split_at_checked(n - 1)
            .map_or((None, rest), |(h, b)| (Some(h), b)),
    };
    let mut headers = HeaderMap::new();
    if let Some(v) = header.and_then(|h| HeaderValue::from_bytes(h).ok()) {
        headers.insert(MODEL_HEADER, v);
    }
    let header_model = headers.get(MODEL_HEADER).and_then(|v| v.to_str().ok());

    // Both entry points read a body the same way.
    let parsed = parse(body, header_model);
    assert_eq!(parse_request(&headers, Some(body)), parsed);

    // No body at all: the header alone names the model.
    match (parse_request(&headers, None), header_model) {
        (Ok(p), Some(h)) => {
            assert_eq!(p.model, h);
            assert_eq!(p.prompt, PromptBytes::None);
        }
        (Err(e), h) => {
            assert!(h.is_none_or(str::is_empty));
            assert_eq!(e.status().as_u16(), 400);
        }
        (Ok(p), None) => panic!("no body and no header gave {p:?}"),
    }

    let p = match parsed {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.status().as_u16(), 400, "{e:?}");
            return;
        }
    };
    assert!(!p.model.is_empty());
    if let PromptBytes::Body(r) = &p.prompt {
        // `get` would hide a range outside the body as an empty prompt.
        assert!(
            r.start <= r.end && r.end <= body.len(),
            "{r:?} of {}",
            body.len()
        );
    }

    // What was read is what the JSON says.
    let json = match serde_json::from_slice::<Value>(body) {
        Ok(json) => json,
        Err(e) => {
            // The one leniency: what the gateway does not read is skipped, not checked, so its
            // strings may hold bytes that are not UTF-8 or a `\u` escape that is no character,
            // and its numbers may lie outside f64's range; the model server judges those.
            assert!(lenient(body, &e), "accepted but not JSON: {e}");
            return;
        }
    };
    let obj = json.as_object().expect("an accepted body is a JSON object");
    let member = |name: &str| obj.get(name).filter(|v| !v.is_null());
    match member("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        Some(m) => assert_eq!(p.model, m),
        None => assert_eq!(Some(p.model.as_str()), header_model),
    }
    assert_eq!(p.stream, member("stream") == Some(&Value::Bool(true)));
    let prompt = p.prompt.get(body);
    match member("messages").or(member("prompt")).or(member("input")) {
        None => assert_eq!(p.prompt, PromptBytes::None),
        Some(Value::String(s)) if member("messages").is_none() => {
            assert_eq!(prompt, s.as_bytes())
        }
        Some(v) => {
            let again: Value = serde_json::from_slice(prompt).expect("the prompt is JSON");
            assert_eq!(&again, v);
        }
    }
    if let Some(n) = p.max_tokens {
        let whole = |name| member(name).and_then(Value::as_u64);
        assert!(whole("max_completion_tokens") == Some(n) || whole("max_tokens") == Some(n));
    }
});

/// Whether the body has contents serde skips unchecked where the gateway does not read them:
/// string bytes that are not UTF-8, `\u` escapes (a lone surrogate is no character), or a
/// number outside f64's range (`5e821`), which a full parse refuses.
fn lenient(body: &[u8], refusal: &serde_json::Error) -> bool {
    std::str::from_utf8(body).is_err()
        || body.windows(2).any(|w| w == b"\\u")
        || refusal.to_string().starts_with("number out of range")
}
