//! JWS compact serialization (RFC 7515 §7.1): `header.payload.signature`, each base64url
//! without padding. Parsing checks the shape and the header; the signature is checked by
//! [`crate::KeySet`] and the payload by [`crate::Verifier`].

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;

use crate::Refusal;

/// Longest token accepted, checked before anything is decoded. Real access tokens are a few
/// KiB; this bounds the work an attacker can make a request cost.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The signature algorithms accepted: all asymmetric, so the key set can be public.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256, keys of 2048 to 8192 bits.
    Rs256,
    /// ECDSA over P-256 with SHA-256, the signature as the fixed 64-byte `r || s`.
    Es256,
    /// Ed25519.
    EdDsa,
}

impl Alg {
    /// The `alg` value as written in JOSE.
    pub fn as_str(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
            Alg::EdDsa => "EdDSA",
        }
    }

    /// Parses a header's `alg`, naming why a refused one is refused. `alg` is case-sensitive,
    /// but `none` and HMAC are refused in every spelling so that no variant slips through as
    /// merely "unsupported" in one place and accepted in another.
    pub fn parse(alg: &str) -> Result<Alg, Refusal> {
        match alg {
            "RS256" => Ok(Alg::Rs256),
            "ES256" => Ok(Alg::Es256),
            "EdDSA" => Ok(Alg::EdDsa),
            a if a.eq_ignore_ascii_case("none") => Err(Refusal::AlgNone),
            // Bytes, not `&a[..2]`: the header is the client's, and slicing a `str` at an index
            // inside a character of several bytes panics.
            a if a
                .as_bytes()
                .get(..2)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"hs")) =>
            {
                Err(Refusal::Hmac)
            }
            _ => Err(Refusal::UnsupportedAlg),
        }
    }
}

/// The protected header's members that matter here. Unknown members (`cty`, `x5t`, …) are
/// ignored; a key offered in the header (`jwk`, `jku`, `x5u`, `x5c`) is never used — keys
/// come only from the configured set.
#[derive(Debug, Deserialize)]
struct RawHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    typ: Option<String>,
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

/// A parsed token whose signature is not checked yet.
#[derive(Debug)]
pub struct Jws<'a> {
    /// The header's algorithm.
    pub alg: Alg,
    /// The header's key id.
    pub kid: Option<String>,
    /// `header.payload`, the bytes the signature covers.
    pub signing_input: &'a [u8],
    /// The decoded payload (not yet known to be JSON).
    pub payload: Vec<u8>,
    /// The decoded signature.
    pub signature: Vec<u8>,
}

/// Parses a compact JWS: three segments, strict base64url, a JSON-object header with an
/// accepted `alg` and no `crit`.
pub fn parse(token: &str) -> Result<Jws<'_>, Refusal> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(Refusal::TooLarge(MAX_TOKEN_BYTES));
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed("not three dot-separated segments"));
    };
    let header = decode(h, "header is not base64url")?;
    let not_an_object = Refusal::Malformed("header is not a JSON object with a string alg");
    // serde reads a struct from a JSON array too (`["EdDSA"]`), and RFC 7515 §4 makes the
    // header an object: what the issuer signed must read one way only.
    if header.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(not_an_object);
    }
    // Duplicate members are an error here (serde refuses a repeated field), so two `alg`s
    // cannot be read one way by this parser and another way by the issuer's.
    let header: RawHeader = serde_json::from_slice(&header).map_err(|_| not_an_object)?;
    let alg = Alg::parse(&header.alg)?;
    if header.crit.is_some() {
        return Err(Refusal::Critical);
    }
    if header
        .typ
        .as_deref()
        .is_some_and(|t| !is_access_token_type(t))
    {
        return Err(Refusal::WrongType);
    }
    let payload = decode(p, "payload is not base64url")?;
    let signature = decode(s, "signature is not base64url")?;
    if signature.is_empty() {
        return Err(Refusal::Malformed("empty signature"));
    }
    Ok(Jws {
        alg,
        kid: header.kid,
        signing_input: &token.as_bytes()[..h.len() + 1 + p.len()],
        payload,
        signature,
    })
}

/// Whether a `typ` header names a token meant as a bearer token: `JWT` (RFC 7519, section
/// 5.1) or an OAuth access token `at+jwt` (RFC 9068), each with or without `application/`, in
/// any case (media types are case-insensitive). Any other type — a DPoP proof
/// (`dpop+jwt`), a logout token, an ID token an issuer types as its own — was signed by the
/// same keys for another purpose and must not open the gateway.
fn is_access_token_type(typ: &str) -> bool {
    const MEDIA: &str = "application/";
    let t = match typ.get(..MEDIA.len()) {
        Some(prefix) if prefix.eq_ignore_ascii_case(MEDIA) => &typ[MEDIA.len()..],
        _ => typ,
    };
    t.eq_ignore_ascii_case("jwt") || t.eq_ignore_ascii_case("at+jwt")
}

/// Strict base64url: URL alphabet, no padding, no stray trailing bits.
fn decode(segment: &str, what: &'static str) -> Result<Vec<u8>, Refusal> {
    URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| Refusal::Malformed(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        URL_SAFE_NO_PAD.encode(s)
    }

    fn token(header: &str) -> String {
        format!("{}.{}.c2ln", b64(header), b64("{}"))
    }

    #[test]
    fn a_well_formed_token_parses_and_covers_header_and_payload() {
        let t = token(r#"{"alg":"ES256","kid":"k1","typ":"JWT"}"#);
        let jws = parse(&t).unwrap();
        assert_eq!(jws.alg, Alg::Es256);
        assert_eq!(jws.kid.as_deref(), Some("k1"));
        assert_eq!(jws.payload, b"{}");
        assert_eq!(jws.signature, b"sig");
        let dot = t.rfind('.').unwrap();
        assert_eq!(jws.signing_input, &t.as_bytes()[..dot]);
    }

    #[test]
    fn none_and_hmac_are_refused_in_every_spelling() {
        for alg in ["none", "None", "NONE", "nOnE"] {
            let t = token(&format!(r#"{{"alg":"{alg}"}}"#));
            assert_eq!(parse(&t).unwrap_err(), Refusal::AlgNone, "{alg}");
        }
        for alg in ["HS256", "HS384", "HS512", "hs256"] {
            let t = token(&format!(r#"{{"alg":"{alg}"}}"#));
            assert_eq!(parse(&t).unwrap_err(), Refusal::Hmac, "{alg}");
        }
        for alg in ["RS384", "PS256", "ES384", "ES256K", "rs256", "Ed25519", ""] {
            let t = token(&format!(r#"{{"alg":"{alg}"}}"#));
            assert_eq!(parse(&t).unwrap_err(), Refusal::UnsupportedAlg, "{alg}");
        }
        // A character of several bytes where the HMAC prefix is looked for is unsupported, not
        // a panic (the fuzz target found `&alg[..2]` cutting one in half).
        for alg in ["h\u{e9}", "\u{b69a}ff"] {
            let t = token(&format!(r#"{{"alg":"{alg}"}}"#));
            assert_eq!(parse(&t).unwrap_err(), Refusal::UnsupportedAlg, "{alg}");
        }
    }

    #[test]
    fn shape_and_encoding_errors_are_malformed() {
        let good = b64(r#"{"alg":"EdDSA"}"#);
        let cases = [
            String::new(),
            "a.b".to_owned(),
            format!("{good}.{}.c2ln.extra", b64("{}")),
            format!("{good}=.{}.c2ln", b64("{}")),
            format!("{good}.{}.c2ln=", b64("{}")),
            format!("{good}.{}.c2l+", b64("{}")),
            format!("{good}.{}.c2l/", b64("{}")),
            format!("{good}.{}.", b64("{}")),
            format!("{}.{}.c2ln", b64("[1]"), b64("{}")),
            // An array whose elements fit the header's fields (the bearer_token fuzz target's
            // object check).
            format!("{}.{}.c2ln", b64(r#" ["EdDSA"]"#), b64("{}")),
            format!("{}.{}.c2ln", b64(r#"{"alg":256}"#), b64("{}")),
            format!("{}.{}.c2ln", b64(r#"{"alg":"ES256","kid":7}"#), b64("{}")),
            format!(
                "{}.{}.c2ln",
                b64(r#"{"alg":"ES256","alg":"none"}"#),
                b64("{}")
            ),
            format!("{}.{}.c2ln", b64("not json"), b64("{}")),
        ];
        for t in cases {
            assert!(
                matches!(parse(&t), Err(Refusal::Malformed(_))),
                "{t:?} gave {:?}",
                parse(&t)
            );
        }
    }

    #[test]
    fn stray_trailing_bits_are_refused() {
        // "cw" is the one byte "s"; "cx" decodes to it too if its four spare bits are ignored,
        // which would make two spellings of one signature.
        let t = format!("{}.{}.cw", b64(r#"{"alg":"EdDSA"}"#), b64("{}"));
        assert_eq!(parse(&t).unwrap().signature, b"s");
        let t = format!("{}.{}.cx", b64(r#"{"alg":"EdDSA"}"#), b64("{}"));
        assert!(matches!(parse(&t), Err(Refusal::Malformed(_))));
    }

    #[test]
    fn critical_extensions_are_refused() {
        let t = token(r#"{"alg":"ES256","crit":["b64"],"b64":false}"#);
        assert_eq!(parse(&t).unwrap_err(), Refusal::Critical);
    }
    #[test]
    fn a_typ_other_than_an_access_token_is_refused() {
        for ok in [
            "JWT",
            "jwt",
            "at+jwt",
            "application/at+JWT",
            "APPLICATION/jwt",
        ] {
            let t = token(&format!(r#"{{"alg":"ES256","typ":"{ok}"}}"#));
            assert!(parse(&t).is_ok(), "{ok}");
        }
        for bad in ["dpop+jwt", "logout+jwt", "JWE", "", "application/", "jwt "] {
            let t = token(&format!(r#"{{"alg":"ES256","typ":"{bad}"}}"#));
            assert_eq!(parse(&t).unwrap_err(), Refusal::WrongType, "{bad}");
        }
        let untyped = token(r#"{"alg":"ES256"}"#);
        assert!(parse(&untyped).is_ok());
    }

    #[test]
    fn oversized_tokens_are_refused_before_decoding() {
        let t = "a".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(parse(&t).unwrap_err(), Refusal::TooLarge(MAX_TOKEN_BYTES));
    }
}
