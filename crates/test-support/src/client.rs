//! A small async HTTP/1.1 client for tests: one request a fresh connection, every call given up
//! after [`CALL_LIMIT`], a streamed answer timestamped event by event.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};

/// Every call gives up after this long, so a broken server fails a test instead of hanging it.
pub const CALL_LIMIT: Duration = Duration::from_secs(20);

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
    /// The response's status.
    pub status: StatusCode,
    /// Its `content-type`, empty if none.
    pub content_type: String,
    /// When the request was sent.
    pub sent_at: Instant,
    /// Each event's payload (`data: ` taken off) and when the frame that ended it arrived.
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

/// A streaming `POST path` of JSON `body` on a fresh connection: the status, the content type
/// and each SSE event with when its frame arrived; `Err` if the connection fails or is reset.
pub async fn stream(addr: SocketAddr, path: &str, body: &Value) -> Result<Stream, String> {
    stream_interrupted(addr, path, body, usize::MAX, |_| async {}).await
}

/// [`stream`], running `act` once `after` events have arrived, with the answer's
/// `x-gateway-destination-endpoint` (the endpoint that answered; empty when none is named),
/// then reading on: how a test breaks the endpoint under a stream at a moment of its choosing.
pub async fn stream_interrupted<F, Fut>(
    addr: SocketAddr,
    path: &str,
    body: &Value,
    after: usize,
    act: F,
) -> Result<Stream, String>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
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
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap_or_default().to_owned())
                .unwrap_or_default()
        };
        let content_type = header("content-type");
        let endpoint = header("x-gateway-destination-endpoint");
        let mut act = Some(act);
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
            if events.len() >= after {
                if let Some(act) = act.take() {
                    act(endpoint.clone()).await;
                }
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
