//! The `Authorization` header and the token in it, through the whole verifier against a fixed
//! key set: no header and no token may panic, a refusal is always sendable as a header, and an
//! accepted token meets every check of the policy.
//!
//! The bytes are read three ways: as `Authorization` values (split at NUL into several
//! headers); as a token as it came; and, split at the first byte's length, as the header and
//! payload of a token signed by a key of the set, so that fuzzed JSON reaches every check after
//! the signature.
#![no_main]

mod keys;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use infergate_auth::{bearer, jws, Alg, Refusal, Verified};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// The wall clocks tokens are checked at: a real one and the end of time.
const NOWS: [u64; 2] = [1_750_000_000, u64::MAX];

fuzz_target!(|data: &[u8]| {
    // The header: exactly one, scheme `Bearer`, then a non-empty token taken from it.
    let values: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    for values in [&values[..], &values[..1]] {
        match bearer(values) {
            Ok(token) => {
                assert_eq!(values.len(), 1);
                assert!(!token.is_empty() && token.trim_ascii() == token);
                verify(token);
            }
            Err(Refusal::Ambiguous) => assert!(values.len() > 1),
            Err(r) => sendable(&r),
        }
    }

    if let Ok(text) = std::str::from_utf8(data) {
        // Any `alg` string is refused or accepted, whatever its characters.
        let _ = Alg::parse(text);
        verify(text);
    }

    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (header, payload) = rest.split_at(usize::from(n).min(rest.len()));
    verify(&keys::sign(header, payload));
});

/// The token through the parser and the verifier.
fn verify(token: &str) {
    match jws::parse(token) {
        Ok(parsed) => {
            // What the signature covers is the token up to its last dot.
            let dot = token.rfind('.').expect("a parsed token has dots");
            assert_eq!(parsed.signing_input, &token.as_bytes()[..dot]);
            let header = token.split('.').next().unwrap_or_default();
            let header = URL_SAFE_NO_PAD
                .decode(header)
                .expect("a parsed header decodes");
            match serde_json::from_slice::<Value>(&header) {
                Ok(header) => {
                    assert!(header.is_object(), "the header is a JSON object: {header}");
                    assert_eq!(header["alg"], parsed.alg.as_str());
                }
                // Members the parser does not read are skipped, not checked: their strings
                // may hold bytes that are not UTF-8, or a `\u` escape that is no character.
                Err(_) => assert!(
                    std::str::from_utf8(&header).is_err() || header.windows(2).any(|w| w == b"\\u"),
                    "a parsed header is not JSON"
                ),
            }
        }
        Err(r) => sendable(&r),
    }
    for now in NOWS {
        match keys::verifier().verify(token, keys::key_set(), now) {
            Ok(v) => accepted(&v, now),
            Err(r) => sendable(&r),
        }
    }
}

/// A refusal's `WWW-Authenticate` value is a legal header value, and it names no more than
/// fixed text and configured names (it is sent to the client as it is).
fn sendable(r: &Refusal) {
    let v = r.www_authenticate(keys::verifier().realm());
    assert!(v.bytes().all(|b| (b' '..=b'~').contains(&b)), "{v:?}");
    assert!(matches!(r.status(), 400 | 401 | 403));
}

/// An accepted token meets the whole policy.
fn accepted(v: &Verified, now: u64) {
    assert_eq!(v.claim("iss"), Some(&Value::from(keys::ISSUER)));
    let exp = v
        .claim("exp")
        .and_then(Value::as_f64)
        .expect("exp is a number");
    // 60 s of leeway; the comparison is loose where an f64 cannot hold the exact second.
    assert!((now as f64) < exp + 61.0, "exp {exp} passed at {now}");
    let aud = v.claim("aud").expect("aud is checked");
    assert!(aud == "gw" || aud.as_array().is_some_and(|a| a.iter().any(|s| s == "gw")));
    assert_eq!(v.claim("tier"), Some(&Value::from("gold")));
    let groups = v
        .claim("groups")
        .and_then(Value::as_array)
        .expect("groups is an array");
    assert!(groups.iter().any(|g| g == "ml"));
    // Reading identity from claims of any shape never panics.
    let _ = (
        v.tenant("sub"),
        v.band("tier"),
        v.band("priority"),
        v.tenant("exp"),
    );
}
