//! The load generator: replays bench requests at their arrival times against an
//! OpenAI-compatible endpoint, streams every answer and timestamps each token as it arrives.
//!
//! Every request is a streamed `/v1/completions` call with `ignore_eos` and `max_tokens` set to
//! the request's output tokens, so the server generates exactly what the virtual runner's engine
//! generates; its prompt is text the simulator tokenizes into exactly the request's prompt tokens
//! (see [`crate::prompt`]). Bodies are built before the clock starts, requests go out on keep-alive
//! HTTP/1.1 connections (one per request in flight, as a fleet of clients would open), and time is
//! measured from just before a request is handed to the client to each token chunk's arrival.
//! What a request saw becomes the same [`Outcome`] the virtual runner records, so one report
//! computes TTFT, ITL, E2E and throughput for both.

use crate::prompt::prompt_text;
use crate::sse::{interpret, SseReader, StreamEvent};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::CONTENT_TYPE;
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use infergate_bench::runner::Outcome;
use infergate_bench::workload::BenchRequest;
use infergate_config::gateway::defaults::{CRITICALITY_HEADER, TENANT_HEADER};
use infergate_config::gateway::Band;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The path every request is sent to: plain completions, so no chat template adds tokens.
pub const COMPLETIONS_PATH: &str = "/v1/completions";

/// A request ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// When it leaves, from the start of the replay.
    pub at: Duration,
    /// Headers besides `Content-Type`: the request's priority band and tenant.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body.
    pub body: Bytes,
}

/// Builds the body of every request: `model` (or the request's adapter), the prompt text,
/// `max_tokens` = output tokens, `ignore_eos`, streamed with a final usage chunk; its band and
/// tenant go in the headers the gateway's flow control reads by default.
pub fn prepare(requests: &[BenchRequest], model: &str) -> Vec<Prepared> {
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let body = serde_json::json!({
                "model": r.adapter.as_deref().unwrap_or(model),
                "prompt": prompt_text(r, i as u64),
                "max_tokens": r.output_tokens,
                "ignore_eos": true,
                "temperature": 0,
                "stream": true,
                "stream_options": {"include_usage": true},
            });
            let mut headers = Vec::new();
            if let Some(band) = r.band {
                headers.push((CRITICALITY_HEADER, band.to_string()));
            }
            if let Some(tenant) = &r.tenant {
                headers.push((TENANT_HEADER, tenant.clone()));
            }
            Prepared {
                at: r.at,
                headers,
                body: Bytes::from(body.to_string()),
            }
        })
        .collect()
}

/// What the client saw of one request; times are from the start of the replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// When it was handed to the client.
    pub sent: Duration,
    /// The response's status, if one came.
    pub status: Option<u16>,
    /// When each chunk with generated text arrived, in order.
    pub tokens: Vec<Duration>,
    /// `usage.completion_tokens` from the stream, when the server sent it.
    pub usage: Option<u32>,
    /// When `[DONE]` arrived; `None` if the stream did not end properly.
    pub finished: Option<Duration>,
    /// Why the request failed: a connection error, a status other than 200, an error in the
    /// stream, a stream cut short, or the drain deadline.
    pub error: Option<String>,
}

impl Record {
    /// The virtual runner's view of this request of priority `band`: first token, finish,
    /// tokens generated (the server's usage count when it sent one, else the token chunks
    /// counted). With `flow_control` in front, a 429 (shed) or 503 (queue TTL) is a refusal, as
    /// the virtual runner records it, not an error.
    pub fn outcome(&self, band: Option<Band>, flow_control: bool) -> Outcome {
        let refused = self
            .status
            .filter(|s| flow_control && matches!(s, 429 | 503));
        let failed = self.error.is_some() && refused.is_none();
        Outcome {
            sent: self.sent,
            first_token: self.tokens.first().copied(),
            finished: if failed { None } else { self.finished },
            output_tokens: self
                .usage
                .unwrap_or(u32::try_from(self.tokens.len()).unwrap_or(u32::MAX)),
            error: failed,
            refused,
            band,
        }
    }
}

impl Record {
    /// The gaps between successive token chunks as the client received them, in milliseconds:
    /// the live run's ITL. Events that arrived in one read share its timestamp, so their gap is
    /// zero — what a streaming client sees.
    pub fn token_gaps_ms(&self) -> Vec<f32> {
        self.tokens
            .windows(2)
            .map(|w| (w[1].saturating_sub(w[0]).as_secs_f64() * 1e3) as f32)
            .collect()
    }
}

/// Where requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The router's (or a replica's) listener.
    pub addr: SocketAddr,
}

/// The replay was stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Sends `requests` to `target` at their times from `start` and streams every answer; a request
/// still open `drain` after the last arrival is given up (recorded as unfinished). Resolves
/// early with [`Interrupted`] when `stop` does, dropping every request in flight.
pub async fn replay(
    target: &Target,
    requests: &[Prepared],
    start: Instant,
    drain: Duration,
    stop: impl Future<Output = ()>,
) -> Result<Vec<Record>, Interrupted> {
    let mut connector = HttpConnector::new();
    // Token chunks are small writes; Nagle's algorithm would hold them back.
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(connector);
    let uri: Uri = match format!("http://{}{COMPLETIONS_PATH}", target.addr).parse() {
        Ok(u) => u,
        // A socket address always makes a valid URI; answer as the requests would fail.
        Err(e) => return Ok(vec![failed(format!("uri: {e}")); requests.len()]),
    };
    let last = requests.iter().map(|p| p.at).max().unwrap_or_default();
    let deadline = start + last + drain;
    let mut tasks = JoinSet::new();
    for (i, p) in requests.iter().enumerate() {
        let (client, uri, p) = (client.clone(), uri.clone(), p.clone());
        tasks.spawn(async move { (i, one(client, uri, p, start, deadline).await) });
    }
    let collect = async {
        let mut records = vec![failed("never sent".to_owned()); requests.len()];
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((i, record)) => records[i] = record,
                // A request task that panicked is a bug; its slot stays a failure (never sent).
                Err(e) => eprintln!("live: a request task failed: {e}"),
            }
        }
        records
    };
    tokio::select! {
        records = collect => Ok(records),
        () = stop => Err(Interrupted),
    }
}

fn failed(reason: String) -> Record {
    Record {
        error: Some(reason),
        ..Record::default()
    }
}

async fn one(
    client: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    p: Prepared,
    start: Instant,
    deadline: Instant,
) -> Record {
    tokio::time::sleep_until(start + p.at).await;
    let mut record = Record {
        sent: start.elapsed(),
        ..Record::default()
    };
    let exchange = async {
        let mut request = Request::post(uri).header(CONTENT_TYPE, "application/json");
        for (name, value) in &p.headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(p.body))
            .map_err(|e| format!("request: {e}"))?;
        let response = client
            .request(request)
            .await
            .map_err(|e| format!("connect/send: {e}"))?;
        let status = response.status();
        record.status = Some(status.as_u16());
        let mut body = response.into_body();
        if status != StatusCode::OK {
            let text = body
                .collect()
                .await
                .map(|b| {
                    String::from_utf8_lossy(&b.to_bytes())
                        .chars()
                        .take(200)
                        .collect::<String>()
                })
                .unwrap_or_default();
            return Err(format!("status {}: {text}", status.as_u16()));
        }
        let mut reader = SseReader::default();
        let mut events = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("stream: {e}"))?;
            let Some(data) = frame.data_ref() else {
                continue;
            };
            let now = start.elapsed();
            events.clear();
            reader.push(data, &mut events);
            for event in &events {
                match interpret(event) {
                    StreamEvent::Token { usage } => {
                        record.tokens.push(now);
                        record.usage = usage.or(record.usage);
                    }
                    StreamEvent::Empty { usage } => record.usage = usage.or(record.usage),
                    StreamEvent::Done => record.finished = Some(now),
                    StreamEvent::Error(e) => return Err(format!("in the stream: {e}")),
                }
            }
        }
        if record.finished.is_none() {
            return Err("the stream ended before [DONE]".to_owned());
        }
        Ok(())
    };
    match tokio::time::timeout_at(deadline, exchange).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => record.error = Some(e),
        Err(_) => record.error = Some("still open at the drain deadline".to_owned()),
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_becomes_the_virtual_runners_outcome() {
        let ms = Duration::from_millis;
        let ok = Record {
            sent: ms(10),
            status: Some(200),
            tokens: vec![ms(60), ms(80), ms(100)],
            usage: Some(3),
            finished: Some(ms(101)),
            error: None,
        };
        assert_eq!(
            ok.outcome(Some(Band::Critical), false),
            Outcome {
                sent: ms(10),
                first_token: Some(ms(60)),
                finished: Some(ms(101)),
                output_tokens: 3,
                error: false,
                refused: None,
                band: Some(Band::Critical),
            }
        );
        assert_eq!(ok.token_gaps_ms(), vec![20.0, 20.0]);
        let counted = Record {
            usage: None,
            ..ok.clone()
        };
        assert_eq!(counted.outcome(None, false).output_tokens, 3);
        let cut = Record {
            error: Some("stream: reset".into()),
            ..ok
        };
        let o = cut.outcome(None, true);
        assert!(o.error && o.finished.is_none() && o.refused.is_none());
        let shed = Record {
            status: Some(429),
            error: Some("status 429: shed".into()),
            ..Record::default()
        };
        let o = shed.outcome(Some(Band::Sheddable), true);
        assert_eq!(
            (o.refused, o.error),
            (Some(429), false),
            "flow control refused it"
        );
        let o = shed.outcome(Some(Band::Sheddable), false);
        assert_eq!(
            (o.refused, o.error),
            (None, true),
            "without flow control: an error"
        );
    }

    #[test]
    fn bodies_ask_for_exactly_the_output_tokens_streamed() {
        let req = BenchRequest {
            at: Duration::from_millis(5),
            prompt_tokens: 40,
            output_tokens: 7,
            block_hashes: vec![1, 2],
            adapter: None,
            band: Some(Band::Sheddable),
            tenant: Some("t1".into()),
        };
        let p = &prepare(&[req], "m")[0];
        assert_eq!(
            p.headers,
            vec![
                (CRITICALITY_HEADER, "Sheddable".to_owned()),
                (TENANT_HEADER, "t1".to_owned())
            ]
        );
        let v: serde_json::Value = serde_json::from_slice(&p.body).unwrap();
        assert_eq!(v["model"], "m");
        assert_eq!(v["max_tokens"], 7);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream"], true);
        assert_eq!(v["prompt"].as_str().unwrap().len(), 160);
        assert_eq!(p.at, Duration::from_millis(5));
    }
}
