//! JWTs for tests: signing keys generated in the test (ES256, EdDSA), their JWKs, and tokens
//! signed with them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use serde_json::{json, Value};

/// The gateway loads keys again on an unknown `kid` at most this often (its default).
pub const MIN_GAP: Duration = Duration::from_secs(5);

/// Unpadded base64url.
pub fn b64(b: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(b)
}

/// A signing key made for the test.
pub enum Key {
    /// A P-256 key, signing ES256.
    Es256(EcdsaKeyPair),
    /// An Ed25519 key, signing EdDSA.
    EdDsa(Ed25519KeyPair),
}

impl Key {
    /// A new P-256 key (ES256).
    pub fn p256() -> Key {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        Key::Es256(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
    }

    /// A new Ed25519 key (EdDSA).
    pub fn ed25519() -> Key {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        Key::EdDsa(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
    }

    /// Its public half as a JWK under `kid`.
    pub fn jwk(&self, kid: &str) -> Value {
        match self {
            Key::Es256(k) => {
                let p = k.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                       "x": b64(&p[1..33]), "y": b64(&p[33..65])})
            }
            Key::EdDsa(k) => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(k.public_key())})
            }
        }
    }

    /// A token signed by it, naming `kid`, carrying `claims`.
    pub fn token(&self, kid: &str, claims: &Value) -> String {
        let alg = match self {
            Key::Es256(_) => "ES256",
            Key::EdDsa(_) => "EdDSA",
        };
        let input = format!(
            "{}.{}",
            b64(json!({"alg": alg, "kid": kid, "typ": "JWT"}).to_string()),
            b64(claims.to_string())
        );
        let sig = match self {
            Key::Es256(k) => k
                .sign(&SystemRandom::new(), input.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec(),
            Key::EdDsa(k) => k.sign(input.as_bytes()).as_ref().to_vec(),
        };
        format!("{input}.{}", b64(sig))
    }
}

/// Claims from `https://idp.test` for audience `infergate`: tenant `team-a`, tier `Critical`,
/// `groups`, expiring `exp_in` seconds from now (negative: already expired).
pub fn claims(groups: &[&str], exp_in: i64) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    json!({"iss": "https://idp.test", "aud": ["infergate"], "sub": "alice", "org": "team-a",
           "tier": "Critical", "groups": groups, "iat": now, "exp": now + exp_in})
}

/// `spec.auth` and `spec.tenancy` (indented 2, for under `spec:`) for tokens of [`claims`]:
/// provider `test-idp` trusting the keys at `jwks` (a `localJWKS` or `remoteJWKS` entry),
/// membership of group `ml` required, tenant and criticality from `org` and `tier`.
pub fn auth_spec(jwks: &str) -> String {
    format!(
        "  auth:
    jwt:
      provider:
        name: test-idp
        issuer: https://idp.test
        {jwks}
        audiences: [infergate]
        requiredClaims:
          - {{name: groups, valueType: StringArray, values: [ml]}}
  tenancy:
    tenant: {{claim: org}}
    criticality: {{claim: tier}}
"
    )
}
