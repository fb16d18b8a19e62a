//! Key loading on loopback ([`loading`]): files, plain and TLS URLs, rotation, failures kept
//! out, the unknown-`kid` rate limit; the rate limit itself.

mod loading;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::service::service_fn;
use hyper::{HeaderMap, Response, StatusCode};
use hyper_util::rt::TokioIo;
use infergate_auth::Verifier;
use tokio::net::TcpListener;

use super::store::{Demand, Gate};
use super::*;
use infergate_telemetry::metrics::JwksLabels;
use infergate_test_support::dir::TempDir;
use infergate_test_support::jwt::{idp_claims, idp_provider, jwks, Key};

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

/// A store loading from `source` with `refresh`, counted in `metrics`, once its first load
/// has succeeded (within 5 s).
async fn loaded(source: KeySource, refresh: JwksRefresh, metrics: &Arc<Metrics>) -> KeyStore {
    let store = KeyStore::start(source, refresh, Arc::clone(metrics), None).unwrap();
    assert!(store.wait_loaded(Duration::from_secs(5)).await);
    store
}

fn auth(store: KeyStore, metrics: &Arc<Metrics>) -> Auth {
    Auth::with_keys(Verifier::new(&idp_provider()), Arc::new(store), metrics)
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
