//! Scripted upstreams, a gateway, and a small HTTP client, all on loopback and every call
//! bounded in time; simulated replicas come from the test-support crate.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::HeaderMap;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use infergate_control::{PlaneHandle, ScrapeSettings};
use infergate_gateway::{Gateway, GatewayOptions};
pub use infergate_test_support::dir::TempDir;
pub use infergate_test_support::http::metric_sum;
pub use infergate_test_support::replicas::{
    instant, instant_with_adapters, real_time, Replica, LLAMA,
};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// Every call gives up after this long, so a broken gateway fails a test instead of hanging it.
pub use infergate_test_support::client::CALL_LIMIT;

/// A scripted upstream: `/metrics` answers `metrics`, every other path answers `chunks` one by
/// one, `gap` apart, with `content_type`. With `held`, the chunks after the first wait until
/// it is notified: a test that notifies only once the first chunk has reached its client proves
/// that nothing on the way held the stream back (else it never ends), however slow the machine.
#[derive(Clone)]
pub struct Script {
    pub metrics: String,
    pub content_type: &'static str,
    pub chunks: Vec<&'static str>,
    pub gap: Duration,
    pub held: Option<Arc<tokio::sync::Notify>>,
}

impl Script {
    pub fn idle_metrics() -> String {
        "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0.1\n"
            .into()
    }
}

/// A scripted upstream on a loopback port; it also records the headers it was sent.
pub struct Scripted {
    pub addr: SocketAddr,
    pub seen: Arc<std::sync::Mutex<Vec<HeaderMap>>>,
    task: JoinHandle<()>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Scripted {
    pub async fn start(script: Script) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen2 = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let script = script.clone();
                let seen = Arc::clone(&seen2);
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let script = script.clone();
                        let seen = Arc::clone(&seen);
                        async move {
                            if req.uri().path() == "/metrics" {
                                return Ok::<_, Infallible>(Response::new(
                                    http_body_util::Either::Left(Full::new(Bytes::from(
                                        script.metrics,
                                    ))),
                                ));
                            }
                            if req.uri().path() == "/v1/models" {
                                // The scraper asking for the context window: not a request
                                // under test, and this upstream does not say (as TGI does not).
                                let mut not_found = Response::new(http_body_util::Either::Left(
                                    Full::new(Bytes::new()),
                                ));
                                *not_found.status_mut() = hyper::StatusCode::NOT_FOUND;
                                return Ok(not_found);
                            }
                            seen.lock().unwrap().push(req.headers().clone());
                            let _ = req.into_body().collect().await;
                            let (tx, rx) =
                                tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
                            tokio::spawn(async move {
                                for (i, c) in script.chunks.into_iter().enumerate() {
                                    if let (1, Some(held)) = (i, &script.held) {
                                        held.notified().await;
                                    }
                                    tokio::time::sleep(script.gap).await;
                                    if tx
                                        .send(Ok(Frame::data(Bytes::from_static(c.as_bytes()))))
                                        .await
                                        .is_err()
                                    {
                                        return;
                                    }
                                }
                            });
                            let body = StreamBody::new(tokio_stream(rx));
                            let mut resp = Response::new(http_body_util::Either::Right(body));
                            resp.headers_mut()
                                .insert("content-type", script.content_type.parse().unwrap());
                            Ok(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Scripted { addr, seen, task }
    }
}

/// An mpsc receiver as a `Stream`.
fn tokio_stream<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A pool in a test config.
pub struct PoolDef {
    pub name: &'static str,
    pub model: &'static str,
    pub adapters: Vec<&'static str>,
    pub endpoints: Vec<SocketAddr>,
    pub extra: &'static str,
}

impl PoolDef {
    pub fn new(name: &'static str, model: &'static str, endpoints: Vec<SocketAddr>) -> PoolDef {
        PoolDef {
            name,
            model,
            adapters: Vec::new(),
            endpoints,
            extra: "",
        }
    }
}

/// A gateway config over `pools`; `spec_extra` is YAML added under `spec:` (indented 2).
pub fn config_yaml(pools: &[PoolDef], spec_extra: &str) -> String {
    let mut y = String::from(
        "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nmetadata: {name: test}\nspec:\n  bbr: {enabled: true}\n",
    );
    y.push_str(spec_extra);
    y.push_str("  schedulers:\n");
    for p in pools {
        y.push_str(&format!(
            "    - name: {}\n      modelName: {}\n      modelSelector: {{matchLabels: {{pool: {}}}}}\n",
            p.name, p.model, p.name
        ));
        if !p.adapters.is_empty() {
            y.push_str(&format!(
                "      loraAdapters: [{}]\n",
                p.adapters.join(", ")
            ));
        }
        y.push_str(p.extra);
    }
    y.push_str("  endpoints:\n");
    let mut any = false;
    for p in pools {
        for e in &p.endpoints {
            any = true;
            y.push_str(&format!(
                "    - address: {e}\n      labels: {{pool: {}}}\n",
                p.name
            ));
        }
    }
    if !any {
        y.push_str("    - address: 127.0.0.1:9\n      labels: {pool: nobody}\n");
    }
    y
}

/// A gateway config of one pool, `llama`, serving [`LLAMA`] from `replica`; `spec_extra` as in
/// [`config_yaml`].
pub fn llama_yaml(replica: SocketAddr, spec_extra: &str) -> String {
    config_yaml(&[PoolDef::new("llama", LLAMA, vec![replica])], spec_extra)
}

pub fn resolve(yaml: &str) -> infergate_config::gateway::ResolvedGateway {
    infergate_config::gateway::load_from_str(yaml)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
        .resolve()
        .unwrap()
}

/// A gateway on loopback, stopped when dropped.
pub struct TestGateway {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub handle: PlaneHandle,
    pub tls: Option<infergate_control::tls::Tls>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

pub fn fast_scrapes() -> ScrapeSettings {
    ScrapeSettings {
        interval: Duration::from_millis(20),
        timeout: Duration::from_millis(200),
        ..ScrapeSettings::default()
    }
}

impl TestGateway {
    pub async fn start(yaml: &str) -> TestGateway {
        Self::start_with(yaml, GatewayOptions::default()).await
    }

    pub async fn start_with(yaml: &str, mut options: GatewayOptions) -> TestGateway {
        options.listen = Some("127.0.0.1:0".parse().unwrap());
        options.admin_listen = Some("127.0.0.1:0".parse().unwrap());
        options.scrape = fast_scrapes();
        let gw = Gateway::bind(resolve(yaml), options).await.unwrap();
        let (addr, admin, handle) = (gw.local_addr(), gw.admin_addr(), gw.handle());
        let tls = gw.tls().cloned();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(gw.run(async move {
            let _ = stopped.await;
        }));
        TestGateway {
            addr,
            admin,
            handle,
            tls,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Starts and waits until every endpoint has been scraped.
    pub async fn ready(yaml: &str) -> TestGateway {
        let gw = Self::start(yaml).await;
        gw.wait_ready().await;
        gw
    }

    pub async fn wait_ready(&self) {
        eventually("the gateway is ready", || async { self.handle.is_ready() }).await;
    }

    /// Begins the drain and returns the task that ends when it is done.
    pub fn shutdown(&mut self) -> JoinHandle<()> {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap()
    }

    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, HeaderMap, Bytes) {
        self.post_with(path, body.to_string(), &[]).await
    }

    pub async fn post_with(
        &self,
        path: &str,
        body: String,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, Bytes) {
        send_full(self.addr, Method::POST, path, Some(body), headers).await
    }

    pub async fn admin_get(&self, path: &str) -> (StatusCode, String) {
        let (s, b) = send(self.admin, Method::GET, path, None, &[]).await;
        (s, String::from_utf8(b.to_vec()).unwrap())
    }

    pub async fn metric_text(&self) -> String {
        let (s, b) = self.admin_get("/metrics").await;
        assert_eq!(s, StatusCode::OK);
        b
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

pub async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Option<String>,
    headers: &[(&str, &str)],
) -> (StatusCode, Bytes) {
    let (s, _, b) = send_full(addr, method, path, body, headers).await;
    (s, b)
}

pub async fn send_full(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Option<String>,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Bytes) {
    let mut b = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/json");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    timeout(CALL_LIMIT, async {
        let resp = client().request(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        (parts.status, parts.headers, bytes)
    })
    .await
    .expect("the call finished in time")
}

/// Chat request body.
pub fn chat(model: &str, content: &str, extra: Value) -> Value {
    let mut v = json!({"model": model, "messages": [{"role": "user", "content": content}]});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

/// Waits (bounded by [`CALL_LIMIT`]) until `check` holds.
pub async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let held =
        infergate_test_support::wait::eventually(CALL_LIMIT, Duration::from_millis(20), check);
    assert!(held.await, "timed out waiting until {what}");
}

/// The JSON error of a response.
pub fn error_of(body: &Bytes) -> Value {
    let v: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    v["error"].clone()
}

/// Counts of responses by the endpoint that served them.
pub fn by_endpoint(headers: &[HeaderMap]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for h in headers {
        let ep = h
            .get("x-gateway-destination-endpoint")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        *m.entry(ep).or_insert(0) += 1;
    }
    m
}
