//! JWTs for tests: signing keys generated in the test (ES256, EdDSA and, with the `rsa`
//! feature, RS256), their JWKs and key sets, tokens signed with them (any header, for crafted
//! ones), and the claims and config of the two test issuers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use infergate_config::gateway::{JwtProvider, LocalJwks};
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
    /// An RSA 2048 key, signing RS256: the pair and its modulus and exponent (big-endian).
    #[cfg(feature = "rsa")]
    Rs256(signature::RsaKeyPair, Vec<u8>, Vec<u8>),
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

    /// An RSA 2048 key (RS256), made once per test binary: generating primes takes a while.
    #[cfg(feature = "rsa")]
    pub fn rsa() -> &'static Key {
        static KEY: std::sync::OnceLock<Key> = std::sync::OnceLock::new();
        KEY.get_or_init(new_rsa)
    }

    /// A second RSA 2048 key, not [`Key::rsa`], also made once per test binary.
    #[cfg(feature = "rsa")]
    pub fn other_rsa() -> &'static Key {
        static KEY: std::sync::OnceLock<Key> = std::sync::OnceLock::new();
        KEY.get_or_init(new_rsa)
    }

    /// The `alg` it signs with.
    pub fn alg(&self) -> &'static str {
        match self {
            #[cfg(feature = "rsa")]
            Key::Rs256(..) => "RS256",
            Key::Es256(_) => "ES256",
            Key::EdDsa(_) => "EdDSA",
        }
    }

    /// Its public half as a JWK under `kid`.
    pub fn jwk(&self, kid: &str) -> Value {
        match self {
            #[cfg(feature = "rsa")]
            Key::Rs256(_, n, e) => json!({"kty": "RSA", "kid": kid, "n": b64(n), "e": b64(e)}),
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

    /// Its signature of `message`, as JWS puts it (ES256: the fixed-size `r || s`).
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match self {
            #[cfg(feature = "rsa")]
            Key::Rs256(k, ..) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .unwrap();
                sig
            }
            Key::Es256(k) => k.sign(&rng, message).unwrap().as_ref().to_vec(),
            Key::EdDsa(k) => k.sign(message).as_ref().to_vec(),
        }
    }

    /// A token signed by it, naming its `alg` and `kid`, carrying `claims`.
    pub fn token(&self, kid: &str, claims: &Value) -> String {
        self.token_with(
            &json!({"alg": self.alg(), "kid": kid, "typ": "JWT"}),
            claims,
        )
    }

    /// A token with any `header` (a crafted one, say), signed by it.
    pub fn token_with(&self, header: &Value, claims: &Value) -> String {
        let input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let sig = self.sign(input.as_bytes());
        format!("{input}.{}", b64(sig))
    }
}

#[cfg(feature = "rsa")]
fn new_rsa() -> Key {
    use rsa::pkcs8::EncodePrivateKey;
    use rsa::traits::PublicKeyParts;
    // ring verifies and signs RSA but cannot generate the key.
    let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
    let der = key.to_pkcs8_der().unwrap();
    let pair = signature::RsaKeyPair::from_pkcs8(der.as_bytes()).unwrap();
    Key::Rs256(pair, key.n().to_bytes_be(), key.e().to_bytes_be())
}

/// A JWKS document of `keys`.
pub fn jwks(keys: &[Value]) -> String {
    json!({ "keys": keys }).to_string()
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims from `https://idp.test` for audience `infergate`: tenant `team-a`, tier `Critical`,
/// `groups`, expiring `exp_in` seconds from now (negative: already expired).
pub fn claims(groups: &[&str], exp_in: i64) -> Value {
    let now = unix_now() as i64;
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

/// The smaller issuer's claims: from `https://idp` for audience `gw`, subject `alice`, expiring
/// in ten minutes; what [`idp_provider`] accepts.
pub fn idp_claims() -> Value {
    json!({"iss": "https://idp", "aud": "gw", "sub": "alice", "exp": unix_now() + 600})
}

/// The provider `idp` that accepts [`idp_claims`], no claim required, its keys in a local file
/// that the test supplies another way.
pub fn idp_provider() -> JwtProvider {
    JwtProvider {
        name: "idp".into(),
        issuer: "https://idp".into(),
        remote_jwks: None,
        local_jwks: Some(LocalJwks {
            file: "unused".into(),
        }),
        audiences: vec!["gw".into()],
        required_claims: vec![],
    }
}
