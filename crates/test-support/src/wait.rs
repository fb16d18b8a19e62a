//! Waiting for a condition with a deadline, so that a broken set-up fails a test instead of
//! hanging it.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `ok` every 50 ms for up to 30 s; panics naming `what` if it never holds.
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// Polls `check` every `every` until it holds (`true`) or `limit` passes (`false`), on tokio's
/// clock.
pub async fn eventually<F, Fut>(limit: Duration, every: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(every).await;
    }
    false
}
