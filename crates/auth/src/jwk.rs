//! JWK Sets (RFC 7517) of public signing keys, and signature checks against them.
//!
//! Signatures are checked with `ring`, which the workspace already builds for rustls: one
//! audited crypto stack instead of a second one (`jsonwebtoken`'s RustCrypto backend pulls
//! `rsa`, `p256` and `ed25519-dalek`), and `ring`'s verification API takes the exact encodings
//! JOSE uses (RSA `n`/`e`, the fixed `r || s` ECDSA signature, raw Ed25519 keys). The JOSE
//! rules themselves — which key may check which algorithm — are written here, where they can be
//! read and tested one by one.

use base64::engine::general_purpose::URL_SAFE_NO_PAD_INDIFFERENT;
use base64::Engine;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde::Deserialize;

use crate::jws::{Alg, Jws};
use crate::Refusal;

/// Most keys a set may hold; real issuers publish a handful.
pub const MAX_KEYS: usize = 64;

/// Smallest RSA modulus accepted, in bits (also `ring`'s floor).
const MIN_RSA_BITS: usize = 2048;

/// A public key, decoded and checked for shape.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PublicKey {
    /// Big-endian modulus without leading zeros, and exponent.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed SEC1 point `04 || x || y`.
    P256(Vec<u8>),
    /// The 32-byte public key.
    Ed25519(Vec<u8>),
}

impl PublicKey {
    /// The algorithm this key type checks.
    fn alg(&self) -> Alg {
        match self {
            PublicKey::Rsa { .. } => Alg::Rs256,
            PublicKey::P256(_) => Alg::Es256,
            PublicKey::Ed25519(_) => Alg::EdDsa,
        }
    }

    fn verify(&self, message: &[u8], sig: &[u8]) -> bool {
        match self {
            PublicKey::Rsa { n, e } => RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, sig)
                .is_ok(),
            PublicKey::P256(point) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, sig)
                    .is_ok()
            }
            PublicKey::Ed25519(key) => UnparsedPublicKey::new(&signature::ED25519, key)
                .verify(message, sig)
                .is_ok(),
        }
    }
}

/// One usable key of a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    kid: Option<String>,
    /// The `alg` the key states; a token must then use exactly it.
    alg: Option<Alg>,
    key: PublicKey,
}

impl Jwk {
    /// The key id.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The algorithm this key checks.
    pub fn alg(&self) -> Alg {
        self.key.alg()
    }

    /// Whether a token signed with `alg` may be checked by this key: `alg` must be the one the
    /// key's type checks (an RSA key never checks an ES256 token) and the one the key states,
    /// when it states one.
    fn fits(&self, alg: Alg) -> bool {
        self.key.alg() == alg && self.alg.is_none_or(|a| a == alg)
    }
}

/// A key of the document that cannot be used, and why (for the logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its `kid`, if it has one.
    pub kid: Option<String>,
    /// Why it is not used.
    pub reason: &'static str,
}

/// A JWKS document that cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// Not JSON, or not `{"keys": [...]}`.
    #[error("not a JWK Set: {0}")]
    NotAKeySet(String),
    /// More keys than [`MAX_KEYS`].
    #[error("{0} keys, more than the {MAX_KEYS} accepted")]
    TooManyKeys(usize),
    /// No key can check any accepted algorithm.
    #[error("no usable signing key ({0} skipped)")]
    NoUsableKey(usize),
}

/// The public keys tokens are checked against.
///
/// Invariant: every key has a supported type and curve, decodes to the right sizes, is meant
/// for signatures, and states no algorithm but the one its type checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySet {
    keys: Vec<Jwk>,
    skipped: Vec<Skipped>,
}

#[derive(Deserialize)]
struct RawSet {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawKey {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    #[serde(default)]
    key_ops: Option<Vec<String>>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

impl KeySet {
    /// Parses a JWKS document. Keys that cannot verify an accepted algorithm (symmetric `oct`
    /// keys, other curves, short RSA moduli, encryption keys, …) are skipped and listed in
    /// [`KeySet::skipped`]; a set left with no key is an error.
    pub fn parse(document: &[u8]) -> Result<KeySet, JwksError> {
        let raw: RawSet =
            serde_json::from_slice(document).map_err(|e| JwksError::NotAKeySet(e.to_string()))?;
        if raw.keys.len() > MAX_KEYS {
            return Err(JwksError::TooManyKeys(raw.keys.len()));
        }
        let mut set = KeySet::default();
        for value in raw.keys {
            let kid = value
                .get("kid")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned);
            match serde_json::from_value::<RawKey>(value) {
                Ok(raw) => match key(&raw) {
                    Ok(jwk) => set.keys.push(jwk),
                    Err(reason) => set.skipped.push(Skipped { kid, reason }),
                },
                Err(_) => set.skipped.push(Skipped {
                    kid,
                    reason: "not a JWK (kty and string members)",
                }),
            }
        }
        if set.keys.is_empty() {
            return Err(JwksError::NoUsableKey(set.skipped.len()));
        }
        Ok(set)
    }

    /// The usable keys.
    pub fn keys(&self) -> &[Jwk] {
        &self.keys
    }

    /// The keys that were left out, and why.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Checks `jws`'s signature.
    ///
    /// With a `kid`, the key with that id decides (ids should be unique: trying the rest would
    /// let any key of the set sign for any id); a `kid` the set lacks is
    /// [`Refusal::UnknownKid`], one naming a skipped key is [`Refusal::KeyMismatch`]. Without a
    /// `kid`, every key that fits the algorithm is tried.
    pub fn verify(&self, jws: &Jws<'_>) -> Result<(), Refusal> {
        let key = match jws.kid.as_deref() {
            Some(kid) => {
                let mut named = self.keys.iter().filter(|k| k.kid() == Some(kid)).peekable();
                if named.peek().is_none() {
                    return Err(
                        if self.skipped.iter().any(|s| s.kid.as_deref() == Some(kid)) {
                            Refusal::KeyMismatch
                        } else {
                            Refusal::UnknownKid
                        },
                    );
                }
                named
                    .find(|k| k.fits(jws.alg))
                    .ok_or(Refusal::KeyMismatch)?
            }
            None => {
                let mut fitting = self.keys.iter().filter(|k| k.fits(jws.alg)).peekable();
                if fitting.peek().is_none() {
                    return Err(Refusal::NoKey);
                }
                return if fitting.any(|k| k.key.verify(jws.signing_input, &jws.signature)) {
                    Ok(())
                } else {
                    Err(Refusal::BadSignature)
                };
            }
        };
        if key.key.verify(jws.signing_input, &jws.signature) {
            Ok(())
        } else {
            Err(Refusal::BadSignature)
        }
    }
}

/// Builds a usable key, or says why not.
fn key(raw: &RawKey) -> Result<Jwk, &'static str> {
    if raw.use_.as_deref().is_some_and(|u| u != "sig") {
        return Err("use is not sig");
    }
    if raw
        .key_ops
        .as_ref()
        .is_some_and(|ops| !ops.iter().any(|o| o == "verify"))
    {
        return Err("key_ops lacks verify");
    }
    let key = match (raw.kty.as_str(), raw.crv.as_deref()) {
        ("RSA", _) => {
            let n = member(&raw.n, "RSA key without n")?;
            let e = member(&raw.e, "RSA key without e")?;
            let first = n.iter().position(|&b| b != 0).unwrap_or(n.len());
            let n = n[first..].to_vec();
            if n.len() * 8 < MIN_RSA_BITS {
                return Err("RSA modulus shorter than 2048 bits");
            }
            if e.is_empty() {
                return Err("RSA key with an empty e");
            }
            PublicKey::Rsa { n, e }
        }
        ("EC", Some("P-256")) => {
            let x = member(&raw.x, "EC key without x")?;
            let y = member(&raw.y, "EC key without y")?;
            if x.len() != 32 || y.len() != 32 {
                return Err("P-256 coordinates are not 32 bytes");
            }
            let mut point = Vec::with_capacity(65);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            PublicKey::P256(point)
        }
        ("OKP", Some("Ed25519")) => {
            let x = member(&raw.x, "OKP key without x")?;
            if x.len() != 32 {
                return Err("Ed25519 key is not 32 bytes");
            }
            PublicKey::Ed25519(x)
        }
        ("EC", _) => return Err("EC curve is not P-256"),
        ("OKP", _) => return Err("OKP curve is not Ed25519"),
        ("oct", _) => return Err("symmetric (oct) keys are never used"),
        _ => return Err("kty is not RSA, EC or OKP"),
    };
    let alg = match raw.alg.as_deref() {
        None => None,
        Some(a) => match Alg::parse(a) {
            Ok(alg) if alg == key.alg() => Some(alg),
            Ok(_) => return Err("alg does not fit the key type"),
            Err(_) => return Err("alg is not RS256, ES256 or EdDSA"),
        },
    };
    Ok(Jwk {
        kid: raw.kid.clone(),
        alg,
        key,
    })
}

/// A base64url member (padding tolerated: a key set is trusted configuration, and some
/// publishers pad).
fn member(v: &Option<String>, missing: &'static str) -> Result<Vec<u8>, &'static str> {
    let v = v.as_deref().ok_or(missing)?;
    URL_SAFE_NO_PAD_INDIFFERENT
        .decode(v)
        .map_err(|_| "a member is not base64url")
}
