//! Replicas on loopback ports and the small HTTP/1.1 client that timestamps what it receives
//! (both from the test-support crate), and the request bodies and metric readings of these
//! tests.

use serde_json::Value;
use std::time::Duration;

#[allow(unused_imports)] // shared by two test binaries, each using some
pub use infergate_test_support::{
    client::{send, stream, Stream},
    replicas::{fast_spec, Replica},
};

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
pub async fn eventually<F, Fut>(limit: Duration, check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    infergate_test_support::wait::eventually(limit, Duration::from_millis(10), check).await
}
