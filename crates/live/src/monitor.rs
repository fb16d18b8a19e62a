//! Watching the fleet during a live run: every replica's queue, read from its `/metrics` at a
//! fixed interval, for the per-pod queue plots the virtual runner draws from its scrapes; and
//! counter families summed from a Prometheus text page.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use infergate_bench::runner::QueueSample;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How often each replica's queue is read: often enough to show a queue building, rarely
/// enough that the readings cost the replicas nothing next to the router's own 50 ms scrapes.
pub const QUEUE_EVERY: Duration = Duration::from_millis(250);

/// Reads every replica's waiting and running requests every `every`, timed from `start`, until
/// `done` turns true; a replica that does not answer in time is skipped for that round.
pub async fn sample_queues(
    replicas: &[SocketAddr],
    start: Instant,
    every: Duration,
    mut done: watch::Receiver<bool>,
) -> Vec<QueueSample> {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let uris: Vec<(usize, Uri)> = replicas
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, format!("http://{r}/metrics").parse().ok()?)))
        .collect();
    let mut samples = Vec::new();
    let mut next = start;
    loop {
        tokio::select! {
            changed = done.wait_for(|d| *d) => {
                // Done, or the sender is gone: either way nothing more is coming.
                let _ = changed;
                return samples;
            }
            () = tokio::time::sleep_until(next) => {}
        }
        let at = start.elapsed();
        // One round reads every replica at once, so a slow one does not delay the others.
        let mut round = JoinSet::new();
        for (replica, uri) in &uris {
            let (client, uri, replica) = (client.clone(), uri.clone(), *replica);
            round.spawn(async move { (replica, read_queue(&client, uri, every).await) });
        }
        while let Some(Ok((replica, read))) = round.join_next().await {
            if let Some((waiting, running)) = read {
                samples.push(QueueSample {
                    at,
                    replica: u32::try_from(replica).unwrap_or(u32::MAX),
                    waiting,
                    running,
                });
            }
        }
        next += every;
    }
}

/// One replica's waiting and running requests, or `None` if it did not answer within `timeout`.
async fn read_queue(
    client: &Client<HttpConnector, Empty<Bytes>>,
    uri: Uri,
    timeout: Duration,
) -> Option<(u32, u32)> {
    let page = tokio::time::timeout(timeout, async {
        let response = client.get(uri).await.ok()?;
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some(String::from_utf8_lossy(&body).into_owned())
    })
    .await
    .ok()??;
    let gauge = |name| family_sum(&page, name) as u32;
    Some((
        gauge("vllm:num_requests_waiting"),
        gauge("vllm:num_requests_running"),
    ))
}

/// The sum of every sample of the Prometheus family `name` in `text`.
pub fn family_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            // `name{labels} value` or `name value`; not a longer name that starts alike.
            let value = match rest.chars().next()? {
                '{' => rest.rsplit_once('}')?.1,
                ' ' => rest,
                _ => return None,
            };
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_sum_every_sample_of_exactly_that_name() {
        let text = "# HELP vllm:prefix_cache_hits_total x\n\
                    vllm:prefix_cache_hits_total{model_name=\"a\",engine=\"0\"} 12\n\
                    vllm:prefix_cache_hits_total{model_name=\"b\"} 3.0\n\
                    vllm:prefix_cache_hits_total_other 100\n\
                    vllm:num_preemptions_total 2\n";
        assert_eq!(family_sum(text, "vllm:prefix_cache_hits_total"), 15.0);
        assert_eq!(family_sum(text, "vllm:num_preemptions_total"), 2.0);
        assert_eq!(family_sum(text, "vllm:prefix_cache_queries_total"), 0.0);
    }
}
