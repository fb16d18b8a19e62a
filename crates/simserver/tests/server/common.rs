//! A replica on a loopback port and a small HTTP/1.1 client that timestamps what it receives.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use infergate_engine::{EngineConfig, Profile};
use infergate_simserver::{serve, ReplicaSpec, SimError};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant};

/// Every client call gives up after this long, so a broken server fails a test instead of
/// hanging it.
pub const CALL_LIMIT: Duration = Duration::from_secs(20);

/// Llama-3.1-8B on one H100, as vLLM would start it.
pub fn h100() -> EngineConfig {
    EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap())
}

/// An H100 replica running `scale` times faster than real time.
pub fn fast_spec(scale: f64) -> ReplicaSpec {
    let mut spec = ReplicaSpec::new(h100());
    spec.time_scale = scale;
    spec
}

/// A replica serving on a loopback port until dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), SimError>>>,
}

impl TestServer {
    pub async fn start(spec: ReplicaSpec) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(spec, listener, async move {
            let _ = stopped.await;
        }));
        TestServer {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the server and returns what `serve` returned.
    pub async fn stop(mut self) -> Result<(), SimError> {
        let _ = self.stop.take().unwrap().send(());
        timeout(CALL_LIMIT, self.task.take().unwrap())
            .await
            .expect("serve stops")
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Bytes) {
        send(self.addr, Method::GET, path, None).await.unwrap()
    }

    pub async fn post(&self, path: &str, body: &str) -> (StatusCode, Bytes) {
        send(
            self.addr,
            Method::POST,
            path,
            Some(body.as_bytes().to_vec()),
        )
        .await
        .unwrap()
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let (status, bytes) = self.post(path, &body.to_string()).await;
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{path} answered {status} with non-JSON {bytes:?}: {e}"));
        (status, value)
    }

    pub async fn metrics(&self) -> String {
        let (status, body) = self.get("/metrics").await;
        assert_eq!(status, StatusCode::OK);
        String::from_utf8(body.to_vec()).unwrap()
    }

    pub async fn stream(&self, path: &str, body: &Value) -> Stream {
        stream(self.addr, path, body).await.unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn connect(addr: SocketAddr) -> std::io::Result<http1::SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    Ok(sender)
}

fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap()
}

/// One request on a fresh connection; `Err` if the connection fails or is reset.
pub async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<(StatusCode, Bytes), String> {
    let call = async {
        let mut sender = connect(addr).await.map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request(addr, method, path, body))
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, bytes))
    };
    timeout(CALL_LIMIT, call)
        .await
        .map_err(|_| "timed out".to_owned())?
}

/// What a streaming call received: each SSE event and when its frame arrived.
pub struct Stream {
    pub status: StatusCode,
    pub content_type: String,
    pub sent_at: Instant,
    pub events: Vec<(Instant, String)>,
    /// The raw body, to check framing byte for byte.
    pub raw: String,
}

impl Stream {
    /// The JSON events (everything but `[DONE]`).
    pub fn chunks(&self) -> Vec<Value> {
        self.events
            .iter()
            .filter(|(_, e)| e != "[DONE]")
            .map(|(_, e)| {
                serde_json::from_str(e).unwrap_or_else(|err| panic!("bad chunk {e}: {err}"))
            })
            .collect()
    }

    /// When each content-carrying chunk arrived.
    pub fn content_times(&self) -> Vec<Instant> {
        self.events
            .iter()
            .filter(|(_, e)| {
                e.contains("\"content\":\"") && !e.contains("\"content\":\"\"")
                    || e.contains("\"text\":\"")
            })
            .map(|(t, _)| *t)
            .collect()
    }
}

pub async fn stream(addr: SocketAddr, path: &str, body: &Value) -> Result<Stream, String> {
    let call = async {
        let mut sender = connect(addr).await.map_err(|e| e.to_string())?;
        let sent_at = Instant::now();
        let response = sender
            .send_request(request(
                addr,
                Method::POST,
                path,
                Some(body.to_string().into_bytes()),
            ))
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        let mut body = response.into_body();
        let mut raw = String::new();
        let mut events = Vec::new();
        let mut pending = String::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| e.to_string())?;
            let at = Instant::now();
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let text = std::str::from_utf8(&data).map_err(|e| e.to_string())?;
            raw.push_str(text);
            pending.push_str(text);
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                let payload = event
                    .trim_end()
                    .strip_prefix("data: ")
                    .unwrap_or(event.trim_end());
                events.push((at, payload.to_owned()));
            }
        }
        Ok(Stream {
            status,
            content_type,
            sent_at,
            events,
            raw,
        })
    };
    timeout(CALL_LIMIT, call)
        .await
        .map_err(|_| "timed out".to_owned())?
}

/// A chat request body.
pub fn chat(content: &str, extra: Value) -> Value {
    let mut body = serde_json::json!({
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "messages": [{"role": "user", "content": content}],
    });
    if let (Some(b), Value::Object(extra)) = (body.as_object_mut(), extra) {
        b.extend(extra);
    }
    body
}

/// Reads one sample's value from a `/metrics` text: the first line starting with `series`.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Polls `check` every 10 ms until it holds or `limit` passes.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
