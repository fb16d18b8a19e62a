//! Key loading on loopback ([`loading`]): files, plain and TLS URLs, rotation, failures kept
//! out, the unknown-`kid` rate limit; the rate limit itself; where a request's identity comes
//! from.

mod loading;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::service::service_fn;
use hyper::{HeaderMap, Response, StatusCode};
use hyper_util::rt::TokioIo;
use infergate_auth::Verifier;
use infergate_config::gateway::{Band, JwtProvider, LocalJwks};
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::keys::{Demand, Gate};
use super::*;
use crate::metrics::JwksLabels;

fn b64(b: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(b)
}

struct Key(Ed25519KeyPair);

impl Key {
    fn new() -> Key {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        Key(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
    }

    fn jwk(&self, kid: &str) -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(self.0.public_key())})
    }

    fn token(&self, kid: &str, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(json!({"alg": "EdDSA", "kid": kid}).to_string()),
            b64(claims.to_string())
        );
        format!("{input}.{}", b64(self.0.sign(input.as_bytes())))
    }
}

fn jwks(keys: &[Value]) -> String {
    json!({ "keys": keys }).to_string()
}

fn claims() -> Value {
    json!({"iss": "https://idp", "aud": "gw", "sub": "alice", "exp": unix_now() + 600})
}

fn provider() -> JwtProvider {
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

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    h
}

fn fast(min_gap: Duration) -> JwksRefresh {
    JwksRefresh {
        remote_interval: Duration::from_secs(3600),
        file_interval: Duration::from_secs(3600),
        retry: Duration::from_secs(3600),
        min_gap,
        timeout: Duration::from_secs(2),
    }
}

fn auth(store: KeyStore, metrics: &Arc<Metrics>) -> Auth {
    Auth::with_keys(Verifier::new(&provider()), Arc::new(store), metrics)
}

fn loads(metrics: &Metrics, outcome: &str) -> u64 {
    metrics
        .jwks_loads
        .get_or_create(&JwksLabels {
            outcome: outcome.into(),
        })
        .get()
}

/// A JWKS server on loopback: answers `body` with `status`, counts requests, and waits
/// `delay` before each answer.
struct Issuer {
    addr: SocketAddr,
    body: Arc<Mutex<(StatusCode, String)>>,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Issuer {
    async fn start(body: String, delay: Duration) -> Issuer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new((StatusCode::OK, body)));
        let hits = Arc::new(AtomicUsize::new(0));
        let (s, h) = (Arc::clone(&state), Arc::clone(&hits));
        let task = tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (s, h) = (Arc::clone(&s), Arc::clone(&h));
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| {
                        let (s, h) = (Arc::clone(&s), Arc::clone(&h));
                        async move {
                            h.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(delay).await;
                            let (status, body) = s.lock().unwrap().clone();
                            let mut r = Response::new(Full::new(Bytes::from(body)));
                            *r.status_mut() = status;
                            Ok::<_, Infallible>(r)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Issuer {
            addr,
            body: state,
            hits,
            task,
        }
    }

    fn uri(&self) -> KeySource {
        KeySource::Remote(format!("http://{}/jwks.json", self.addr).parse().unwrap())
    }

    fn serve(&self, status: StatusCode, body: String) {
        *self.body.lock().unwrap() = (status, body);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[test]
fn the_gate_starts_one_load_per_gap_and_lets_others_join_a_running_one() {
    let gap = Duration::from_secs(5);
    let t0 = tokio::time::Instant::now();
    let mut g = Gate::default();
    assert_eq!(g.demand(t0, gap), Demand::Start);
    assert_eq!(g.demand(t0, gap), Demand::Join, "a load is running");
    g.end();
    assert_eq!(g.demand(t0 + Duration::from_secs(4), gap), Demand::TooSoon);
    assert_eq!(g.demand(t0 + gap, gap), Demand::Start);
    g.end();
    // A periodic load counts as the last start too.
    g.begin(t0 + Duration::from_secs(20));
    g.end();
    assert_eq!(g.demand(t0 + Duration::from_secs(21), gap), Demand::TooSoon);
}

fn tenancy(spec: &str) -> ResolvedTenancy {
    let yaml = format!(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  auth:\n    jwt:\n      provider: {{name: idp, issuer: 'https://idp', localJWKS: {{file: k.json}}, audiences: [gw]}}\n{spec}  schedulers:\n    - name: a\n      modelName: m\n      modelSelector: {{matchLabels: {{app: a}}}}\n"
    );
    infergate_config::gateway::load_from_str(&yaml)
        .unwrap()
        .resolve()
        .unwrap()
        .tenancy
}

#[test]
fn identity_comes_from_the_claims_the_tenancy_names() {
    let key = Key::new();
    let keys = infergate_auth::KeySet::parse(jwks(&[key.jwk("k")]).as_bytes()).unwrap();
    let mut c = claims();
    c["org"] = json!("team-a");
    c["tier"] = json!(-1);
    let token = Verifier::new(&provider())
        .verify(&key.token("k", &c), &keys, unix_now())
        .unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-gateway-inference-fairness-id",
        HeaderValue::from_static("spoofed"),
    );
    headers.insert(
        "x-gateway-inference-objective",
        HeaderValue::from_static("Critical"),
    );

    let by_claims =
        tenancy("  tenancy:\n    tenant: {claim: org}\n    criticality: {claim: tier}\n");
    assert_eq!(
        identity(&by_claims, Some(&token), &headers),
        Identity {
            tenant: Some("team-a".into()),
            band: Band::Sheddable
        },
        "the headers cannot override the token"
    );
    let absent = tenancy(
        "  tenancy:\n    tenant: {claim: team}\n    criticality: {claim: prio}\n    defaultCriticality: Standard\n",
    );
    assert_eq!(
        identity(&absent, Some(&token), &headers),
        Identity {
            tenant: None,
            band: Band::Standard
        }
    );
    // Without spec.tenancy the headers still name them, as with auth off.
    let by_headers = tenancy("");
    assert_eq!(
        identity(&by_headers, Some(&token), &headers),
        Identity {
            tenant: Some("spoofed".into()),
            band: Band::Critical
        }
    );
}
