//! Why a request was refused, and what the client is told (RFC 6750 §3): a missing or invalid
//! token is 401, a valid token whose claims are not allowed is 403.
//!
//! Invariant: no message here carries any part of the token or a value read from it — only
//! fixed text and claim names from the configuration — so a refusal may be logged and sent to
//! the client as it is.

/// A refused token. Each variant is one check that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `Authorization: Bearer …` header.
    #[error("no bearer token: send `Authorization: Bearer <token>`")]
    Missing,
    /// More than one `Authorization` header: which one counts would be a guess.
    #[error("more than one Authorization header")]
    Ambiguous,
    /// The token is longer than the limit, checked before any decoding.
    #[error("the bearer token is longer than {0} bytes")]
    TooLarge(usize),
    /// Not three base64url segments of JSON, or a field of the wrong type.
    #[error("the bearer token is malformed: {0}")]
    Malformed(&'static str),
    /// `alg: none` (any case): an unsigned token is never accepted.
    #[error("the bearer token is unsigned (alg none)")]
    AlgNone,
    /// `HS256` and friends: the key set holds public keys, and a MAC keyed with a public key
    /// proves nothing.
    #[error("HMAC-signed tokens are not accepted")]
    Hmac,
    /// An algorithm other than RS256, ES256 and EdDSA.
    #[error("the token's alg is not one of RS256, ES256, EdDSA")]
    UnsupportedAlg,
    /// A `crit` header: an extension this verifier does not implement must not be ignored.
    #[error("the token names critical header extensions, which are not supported")]
    Critical,
    /// A `typ` header that names another kind of token than a bearer access token (`JWT`,
    /// `at+jwt`): a DPoP proof or a logout token signed by the same keys.
    #[error("the token's typ is not JWT or at+jwt")]
    WrongType,
    /// The token's `kid` is in no key of the set (the caller may refresh the set and retry).
    #[error("no signing key has the token's kid")]
    UnknownKid,
    /// No key of the set can check the token's algorithm (a token without `kid`).
    #[error("no signing key fits the token's alg")]
    NoKey,
    /// The key the `kid` names is of another type than the algorithm needs, or states another
    /// `alg`.
    #[error("the signing key does not fit the token's alg")]
    KeyMismatch,
    /// The signature does not verify.
    #[error("the signature does not verify")]
    BadSignature,
    /// No `exp`: every token must expire.
    #[error("the token has no exp")]
    NoExpiry,
    /// `exp` has passed (beyond the leeway).
    #[error("the token has expired")]
    Expired,
    /// `nbf` is still ahead (beyond the leeway).
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    /// `iss` is not the provider's issuer.
    #[error("the token's issuer is not accepted")]
    WrongIssuer,
    /// No `aud` value is one of the accepted audiences.
    #[error("the token's audience is not accepted")]
    WrongAudience,
    /// A required claim is absent.
    #[error("the token lacks the required claim `{0}`")]
    ClaimMissing(String),
    /// A required claim holds no accepted value (or is not of its value type).
    #[error("the token's claim `{0}` holds no accepted value")]
    ClaimNotAllowed(String),
}

impl Refusal {
    /// The HTTP status: 400 for an ambiguous request, 403 when the token is valid but its
    /// claims are not allowed, 401 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Ambiguous => 400,
            Refusal::ClaimMissing(_) | Refusal::ClaimNotAllowed(_) => 403,
            _ => 401,
        }
    }

    /// The RFC 6750 error code; none for a request that carried no token (§3.1).
    pub fn error_code(&self) -> Option<&'static str> {
        match self {
            Refusal::Missing => None,
            Refusal::Ambiguous => Some("invalid_request"),
            Refusal::ClaimMissing(_) | Refusal::ClaimNotAllowed(_) => Some("insufficient_scope"),
            _ => Some("invalid_token"),
        }
    }

    /// Whether refreshing the key set might turn this refusal into an acceptance.
    pub fn is_unknown_kid(&self) -> bool {
        matches!(self, Refusal::UnknownKid)
    }

    /// The `WWW-Authenticate` value: `Bearer realm="…"`, with `error` and `error_description`
    /// when there was a token. Characters RFC 6750 does not allow in a quoted value are dropped.
    pub fn www_authenticate(&self, realm: &str) -> String {
        let mut out = format!("Bearer realm=\"{}\"", quotable(realm));
        if let Some(code) = self.error_code() {
            out.push_str(&format!(
                ", error=\"{code}\", error_description=\"{}\"",
                quotable(&self.to_string())
            ));
        }
        out
    }
}

/// RFC 6750 §3: quoted values are `%x20-21 / %x23-5B / %x5D-7E`.
fn quotable(s: &str) -> String {
    s.chars()
        .filter(|&c| matches!(c, ' '..='~') && c != '"' && c != '\\')
        .collect()
}

/// The token of the request's `Authorization` headers (every value, in order): exactly one
/// header, scheme `Bearer` in any case, then the token.
pub fn bearer<'a>(values: &[&'a [u8]]) -> Result<&'a str, Refusal> {
    let value = match values {
        [] => return Err(Refusal::Missing),
        [one] => *one,
        _ => return Err(Refusal::Ambiguous),
    };
    let Some((scheme, rest)) = split_scheme(value) else {
        return Err(Refusal::Missing);
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        // Basic and other schemes carry no bearer token: the client is told how to send one.
        return Err(Refusal::Missing);
    }
    let token = rest.trim_ascii();
    if token.is_empty() {
        return Err(Refusal::Malformed("empty bearer token"));
    }
    std::str::from_utf8(token).map_err(|_| Refusal::Malformed("not ASCII"))
}

fn split_scheme(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let value = value.trim_ascii_start();
    let at = value.iter().position(|&b| b == b' ' || b == b'\t');
    match at {
        Some(i) => Some((&value[..i], &value[i..])),
        None if value.is_empty() => None,
        None => Some((value, &[])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_token_is_taken_from_one_header_in_any_case() {
        assert_eq!(bearer(&[b"Bearer abc.def.ghi"]), Ok("abc.def.ghi"));
        assert_eq!(bearer(&[b"bearer   abc.def.ghi "]), Ok("abc.def.ghi"));
        assert_eq!(bearer(&[]), Err(Refusal::Missing));
        assert_eq!(bearer(&[b"Basic dXNlcjpwdw=="]), Err(Refusal::Missing));
        assert_eq!(
            bearer(&[b"Bearer"]),
            Err(Refusal::Malformed("empty bearer token"))
        );
        assert_eq!(bearer(&[b"Bearer a", b"Bearer b"]), Err(Refusal::Ambiguous));
        assert_eq!(bearer(&[b""]), Err(Refusal::Missing));
    }

    #[test]
    fn statuses_and_codes_follow_rfc_6750() {
        assert_eq!(Refusal::Missing.status(), 401);
        assert_eq!(
            Refusal::Missing.www_authenticate("gw"),
            "Bearer realm=\"gw\""
        );
        assert_eq!(Refusal::Expired.status(), 401);
        assert_eq!(
            Refusal::Expired.www_authenticate("gw"),
            "Bearer realm=\"gw\", error=\"invalid_token\", error_description=\"the token has expired\""
        );
        let scope = Refusal::ClaimNotAllowed("group".into());
        assert_eq!(scope.status(), 403);
        assert_eq!(scope.error_code(), Some("insufficient_scope"));
        assert_eq!(Refusal::Ambiguous.status(), 400);
        assert_eq!(Refusal::Ambiguous.error_code(), Some("invalid_request"));
    }

    #[test]
    fn quoted_values_drop_what_rfc_6750_forbids() {
        let r = Refusal::ClaimMissing("a\"b\\c\u{e9}\n".into());
        let v = r.www_authenticate("re\"alm");
        assert_eq!(
            v,
            "Bearer realm=\"realm\", error=\"insufficient_scope\", error_description=\"the token lacks the required claim `abc`\""
        );
    }
}
