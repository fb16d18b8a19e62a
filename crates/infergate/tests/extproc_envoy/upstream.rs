//! Scripted model-server replicas, for tests that need exact bytes or chosen load figures:
//! `/metrics` answers vLLM metrics the test sets; an inference request is echoed back byte for
//! byte, or, with `"stream": true`, answered with a paced SSE stream naming the requested model
//! and ending in `usage` (with `"hold": true` too, its events after the first wait for
//! [`Replica::release`]; with `"hang": true`, the answer comes only after a minute). Each answer
//! names the replica (`x-replica`), and every request is recorded but the scraper's (`/metrics`,
//! `/v1/models`, which answers 404).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::{oneshot, Notify};

/// Metrics of an idle replica.
pub const IDLE: &str =
    "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:kv_cache_usage_perc 0.05\n";

/// Events of a streamed answer, paced [`SSE_GAP`] apart, then the usage event and `[DONE]`.
pub const SSE_EVENTS: usize = 20;
/// The pause before each event.
pub const SSE_GAP: Duration = Duration::from_millis(25);

/// The bytes of the streamed answer to a request for `model`, event by event.
pub fn sse_events(model: &str) -> Vec<String> {
    let mut events: Vec<String> = (0..SSE_EVENTS)
        .map(|i| {
            format!("data: {{\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}}}}]}}\n\n")
        })
        .collect();
    events.push(format!(
        "data: {{\"object\":\"chat.completion.chunk\",\"model\":\"{model}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":7,\"completion_tokens\":{SSE_EVENTS},\"total_tokens\":{}}}}}\n\n",
        7 + SSE_EVENTS
    ));
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// A request a replica received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A replica on a loopback port, serving until dropped.
pub struct Replica {
    pub addr: SocketAddr,
    pub name: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    metrics: Arc<Mutex<String>>,
    held: Arc<Notify>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Replica {
    pub fn start(name: &str) -> Replica {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let metrics = Arc::new(Mutex::new(IDLE.to_owned()));
        let held = Arc::new(Notify::new());
        let (stop, stopped) = oneshot::channel::<()>();
        let (s, m, n) = (Arc::clone(&seen), Arc::clone(&metrics), name.to_owned());
        let h = Arc::clone(&held);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(serve(std_listener, stopped, s, m, h, n));
        });
        Replica {
            addr,
            name: name.to_owned(),
            seen,
            metrics,
            held,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// What `/metrics` answers from now on.
    pub fn set_metrics(&self, text: &str) {
        *self.metrics.lock().unwrap() = text.to_owned();
    }

    /// Lets a held stream (`"hold": true`) send its events after the first; a release given
    /// before the stream waits is kept for it.
    pub fn release(&self) {
        self.held.notify_one();
    }

    /// Inference requests received so far.
    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub fn last_seen(&self) -> Seen {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

async fn serve(
    std_listener: std::net::TcpListener,
    mut stopped: oneshot::Receiver<()>,
    seen: Arc<Mutex<Vec<Seen>>>,
    metrics: Arc<Mutex<String>>,
    held: Arc<Notify>,
    name: String,
) {
    let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => continue },
        };
        let (seen, metrics, name) = (Arc::clone(&seen), Arc::clone(&metrics), name.clone());
        let held = Arc::clone(&held);
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (seen, metrics, name) = (Arc::clone(&seen), Arc::clone(&metrics), name.clone());
                let held = Arc::clone(&held);
                async move { Ok::<_, Infallible>(answer(req, &seen, &metrics, held, &name).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn answer(
    req: Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<Seen>>,
    metrics: &Mutex<String>,
    held: Arc<Notify>,
    name: &str,
) -> Response<Body> {
    if req.uri().path() == "/metrics" {
        let text = metrics.lock().unwrap().clone();
        return Response::new(Full::new(Bytes::from(text)).boxed_unsync());
    }
    if req.uri().path() == "/v1/models" {
        // The scraper's read of the context window: not an inference request, so not recorded;
        // these replicas do not say theirs (as TGI does not), so every request may go anywhere.
        let mut not_found = Response::new(Full::new(Bytes::new()).boxed_unsync());
        *not_found.status_mut() = hyper::StatusCode::NOT_FOUND;
        return not_found;
    }
    let headers = req.headers().clone();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    seen.lock().unwrap().push(Seen {
        headers,
        body: body.clone(),
    });
    let json = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default();
    if json["hang"] == serde_json::Value::Bool(true) {
        // A replica that takes far too long: the caller's timeout must end the request.
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    let streamed = json["stream"] == serde_json::Value::Bool(true);
    let mut resp = if streamed {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
        let model = json["model"].as_str().unwrap_or_default().to_owned();
        let hold = json["hold"] == serde_json::Value::Bool(true);
        tokio::spawn(async move {
            for (i, e) in sse_events(&model).into_iter().enumerate() {
                if hold && i == 1 {
                    held.notified().await;
                }
                tokio::time::sleep(SSE_GAP).await;
                if tx.send(Ok(Frame::data(Bytes::from(e)))).await.is_err() {
                    return;
                }
            }
        });
        let frames = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let mut r = Response::new(StreamBody::new(frames).boxed_unsync());
        r.headers_mut()
            .insert("content-type", "text/event-stream".parse().unwrap());
        r
    } else {
        let mut r = Response::new(Full::new(body).boxed_unsync());
        r.headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        r
    };
    resp.headers_mut()
        .insert("x-replica", name.parse().unwrap());
    resp
}
