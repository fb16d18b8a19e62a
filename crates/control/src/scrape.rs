//! The control plane's metrics scraper: one task per endpoint reads its `/metrics` (default
//! every 50 ms, jittered so a fleet is not polled in lockstep, with a hard timeout), and one
//! publisher per pool applies each round of scrapes to a copy of the pool snapshot and swaps it
//! in. The request path only ever loads the current snapshot.
//!
//! Each round a publisher handles advances [`ScrapeContext::refreshes`], the member status
//! document's `sequence` (`crates/control/src/member_status.rs`): the count of times the plane
//! refreshed its view of the pools.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, StatusCode, Uri};
use infergate_picker::metrics::{read_metrics, Engine};
use infergate_picker::{EndpointId, ScrapedMetrics, SplitMix64};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use infergate_telemetry::metrics::{EndpointLabels, Metrics, PoolLabels, RetryLabels};

use crate::clock::Clock;
use crate::pool::PoolRuntime;

/// The scrape client: a pooled client of its own, so a hung scrape never holds a request's
/// connection.
pub type ScrapeClient = Client<HttpConnector, Full<Bytes>>;

/// A scrape that has not connected within this long fails (the endpoint counts as down).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Idle scrape connections are closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A new scrape client with an empty pool.
pub fn client() -> ScrapeClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    c.set_connect_timeout(Some(CONNECT_TIMEOUT));
    c.set_keepalive(Some(Duration::from_secs(30)));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_timer(TokioTimer::new())
        .build(c)
}

/// How endpoints are scraped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrapeSettings {
    /// Time between scrapes of one endpoint (each wait is jittered by ±20 %).
    pub interval: Duration,
    /// A scrape not answered within this is a failure; the next one starts on schedule.
    pub timeout: Duration,
    /// Largest `/metrics` body read.
    pub max_body_bytes: usize,
}

impl Default for ScrapeSettings {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(500),
            max_body_bytes: 4 << 20,
        }
    }
}

/// What a scraper hands its pool's publisher: the endpoint's scrape, or `None` when it failed
/// (nothing to install, but the round happened).
type Scraped = (EndpointId, Option<ScrapedMetrics>);

/// Room in a pool's channel of scrapes for the publisher. Tokio allocates a bounded channel's
/// blocks as they fill, so a generous bound costs nothing until a publisher falls behind, and
/// it does not have to follow the pool's size as members come and go.
const PUBLISH_BOUND: usize = 16_384;

/// The running scrapers of the pools of one routing table, kept in step with each pool's
/// members by [`Scrapers::sync`]; dropping it stops them.
#[derive(Debug, Default)]
pub struct Scrapers {
    pools: HashMap<String, PoolScrapers>,
}

/// The publisher of one pool and a scraper per member.
#[derive(Debug)]
struct PoolScrapers {
    /// The runtime they feed: a reload builds a new one, and its scrapers start afresh.
    runtime: Arc<PoolRuntime>,
    publisher: AbortHandle,
    tx: mpsc::Sender<Scraped>,
    endpoints: HashMap<EndpointId, AbortHandle>,
}

impl Drop for PoolScrapers {
    fn drop(&mut self) {
        self.publisher.abort();
        for t in self.endpoints.values() {
            t.abort();
        }
    }
}

impl Scrapers {
    /// Starts what `pools` need and stops the rest: a publisher per pool (a new one for a pool
    /// runtime it has not seen), a scraper per member that has none, none for members that
    /// left. Pools not listed lose their scrapers. Must run inside a tokio runtime.
    pub fn sync<'a>(
        &mut self,
        pools: impl IntoIterator<Item = &'a Arc<PoolRuntime>>,
        ctx: &ScrapeContext,
    ) {
        let mut seen = HashSet::new();
        for pool in pools {
            seen.insert(pool.name.clone());
            self.sync_pool(pool, ctx);
        }
        self.pools.retain(|name, _| seen.contains(name));
    }

    /// [`Scrapers::sync`] for one pool, leaving the others alone: what a membership change
    /// needs.
    pub fn sync_pool(&mut self, pool: &Arc<PoolRuntime>, ctx: &ScrapeContext) {
        let fresh = self
            .pools
            .get(&pool.name)
            .is_none_or(|p| !Arc::ptr_eq(&p.runtime, pool));
        if fresh {
            pool.admission().attach_metrics(&ctx.metrics);
            let (tx, rx) = mpsc::channel(PUBLISH_BOUND);
            let publisher = tokio::spawn(publish(Arc::clone(pool), rx, ctx.clone())).abort_handle();
            // Replacing the entry drops (and so stops) the old runtime's scrapers.
            self.pools.insert(
                pool.name.clone(),
                PoolScrapers {
                    runtime: Arc::clone(pool),
                    publisher,
                    tx,
                    endpoints: HashMap::new(),
                },
            );
        }
        let Some(running) = self.pools.get_mut(&pool.name) else {
            return;
        };
        // A pool's first scrapers spread their first scrapes over one interval, so a fleet is
        // not polled in lockstep; an endpoint that joins a running pool is scraped at once,
        // since the picker sends it little until it knows its load.
        let joining = !fresh;
        let specs = pool.snapshot().pool.specs().to_vec();
        let new: Vec<_> = specs
            .iter()
            .filter(|s| !running.endpoints.contains_key(&s.id))
            .cloned()
            .collect();
        declare_series(pool, &new, &ctx.metrics);
        let members: HashSet<EndpointId> = specs.iter().map(|s| s.id).collect();
        running.endpoints.retain(|id, task| {
            let stays = members.contains(id);
            if !stays {
                task.abort();
            }
            stays
        });
        for spec in new {
            let endpoint = Endpoint {
                id: spec.id,
                address: spec.address,
                pool: pool.name.clone(),
                engine: pool.engine,
            };
            let task = tokio::spawn(scrape_loop(
                endpoint,
                running.tx.clone(),
                ctx.clone(),
                joining,
            ));
            running.endpoints.insert(spec.id, task.abort_handle());
        }
    }
}

/// Everything a scraper task needs.
#[derive(Debug, Clone)]
pub struct ScrapeContext {
    /// The scrape client.
    pub client: ScrapeClient,
    /// The gateway's clock.
    pub clock: Clock,
    /// Where scrape errors are counted.
    pub metrics: Arc<Metrics>,
    /// Intervals and limits.
    pub settings: ScrapeSettings,
    /// Rounds of scrapes the publishers have handled, over every pool and reload: a batch of
    /// scrapes installed, or of failed scrapes seen. The member status document's `sequence`.
    /// Counted here rather than per read of the document or per request because it must stop
    /// when scraping stops: a member whose control plane froze while its admin listener still
    /// answers then shows the same number on every read, and the global tier notices. Counted
    /// by the publisher, after the swap, rather than by each scraper, so it also stops when
    /// the snapshots stop being rebuilt; failed scrapes count too, so a member whose every
    /// model server is unreachable still reads as alive (with no ready endpoint), not frozen.
    pub refreshes: Arc<AtomicU64>,
}

/// Starts a scraper per endpoint and a publisher per pool. Must run inside a tokio runtime.
pub fn start<'a>(
    pools: impl IntoIterator<Item = &'a Arc<PoolRuntime>>,
    ctx: &ScrapeContext,
) -> Scrapers {
    let mut scrapers = Scrapers::default();
    scrapers.sync(pools, ctx);
    scrapers
}

/// Creates the pool's and its endpoints' error series at zero, so a dashboard sees the series
/// (and a rate of 0) before the first error rather than no data.
fn declare_series(pool: &PoolRuntime, specs: &[infergate_picker::EndpointSpec], metrics: &Metrics) {
    let _ = metrics.shed.get_or_create(&PoolLabels {
        pool: pool.name.clone(),
    });
    for s in specs {
        let labels = EndpointLabels {
            pool: pool.name.clone(),
            endpoint: s.address.clone(),
        };
        let _ = metrics.scrape_errors.get_or_create(&labels);
        for reason in ["connect", "status_503"] {
            let _ = metrics.retries.get_or_create(&RetryLabels {
                pool: pool.name.clone(),
                endpoint: s.address.clone(),
                reason: reason.to_owned(),
            });
        }
    }
}

#[derive(Debug)]
struct Endpoint {
    id: EndpointId,
    address: String,
    pool: String,
    engine: Engine,
}

async fn publish(pool: Arc<PoolRuntime>, mut rx: mpsc::Receiver<Scraped>, ctx: ScrapeContext) {
    let mut batch = Vec::new();
    while let Some((id, scrape)) = rx.recv().await {
        // Failed scrapes have nothing to install; they only count as a round.
        batch.extend(scrape.map(|m| (id, m)));
        while let Ok((id, scrape)) = rx.try_recv() {
            batch.extend(scrape.map(|m| (id, m)));
        }
        if !batch.is_empty() {
            pool.install(std::mem::take(&mut batch), ctx.clock.now(), &ctx.metrics);
        }
        ctx.refreshes.fetch_add(1, Ordering::Relaxed);
    }
}

async fn scrape_loop(ep: Endpoint, tx: mpsc::Sender<Scraped>, ctx: ScrapeContext, at_once: bool) {
    let mut rng = SplitMix64::new(ep.id.0);
    let interval = ctx.settings.interval;
    let labels = EndpointLabels {
        pool: ep.pool.clone(),
        endpoint: ep.address.clone(),
    };
    let mut logged_missing: HashSet<&'static str> = HashSet::new();
    let mut failing = false;
    // The server's context window, from `/v1/models`: read once it answers, again after it
    // recovers from a failure (a restarted server may have new settings), and retried at most
    // once a minute while it does not say (TGI and SGLang do not: their requests go anywhere).
    let mut context: Option<u32> = None;
    let mut context_due = tokio::time::Instant::now();
    if !at_once {
        // Spread the first scrapes over one interval.
        tokio::time::sleep(interval.mul_f64(rng.next_f64())).await;
    }
    loop {
        let result =
            match tokio::time::timeout(ctx.settings.timeout, fetch(&ctx, &ep.address, "/metrics"))
                .await
            {
                Ok(Ok(body)) => {
                    read_metrics(ep.engine, &body, ctx.clock.now()).map_err(|e| e.to_string())
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(format!("no answer within {:?}", ctx.settings.timeout)),
            };
        match result {
            Ok(mut scrape) => {
                if failing {
                    tracing::info!(pool = %ep.pool, endpoint = %ep.address, "metrics scrape recovered");
                    failing = false;
                    context = None;
                    context_due = tokio::time::Instant::now();
                }
                if context.is_none() && tokio::time::Instant::now() >= context_due {
                    context_due = tokio::time::Instant::now() + CONTEXT_RETRY;
                    context = match tokio::time::timeout(
                        ctx.settings.timeout,
                        fetch(&ctx, &ep.address, "/v1/models"),
                    )
                    .await
                    {
                        Ok(Ok(body)) => max_model_len(&body),
                        _ => None,
                    };
                }
                scrape.metrics.max_model_len = context;
                for family in scrape.missing {
                    if logged_missing.insert(family) {
                        tracing::info!(pool = %ep.pool, endpoint = %ep.address, family, "metric family missing; the signal it carries is unknown for this endpoint");
                    }
                }
                // Full: the publisher is behind; this scrape is dropped and the next one is due soon.
                let _ = tx.try_send((ep.id, Some(scrape.metrics)));
            }
            Err(reason) => {
                // Nothing to install, but the publisher counts the round (`refreshes`).
                let _ = tx.try_send((ep.id, None));
                ctx.metrics.scrape_errors.get_or_create(&labels).inc();
                if !failing {
                    tracing::warn!(pool = %ep.pool, endpoint = %ep.address, %reason, "metrics scrape failed");
                    failing = true;
                }
            }
        }
        let jitter = 0.8 + 0.4 * rng.next_f64();
        tokio::time::sleep(interval.mul_f64(jitter)).await;
    }
}

/// How long an endpoint whose `/v1/models` did not say its context window waits before it is
/// asked again.
const CONTEXT_RETRY: Duration = Duration::from_secs(60);

/// The largest `max_model_len` of a `/v1/models` answer (vLLM lists it on the base model and
/// each adapter alike); `None` when no entry has one.
fn max_model_len(body: &[u8]) -> Option<u32> {
    #[derive(serde::Deserialize)]
    struct Models {
        data: Vec<Model>,
    }
    #[derive(serde::Deserialize)]
    struct Model {
        max_model_len: Option<u64>,
    }
    let models: Models = serde_json::from_slice(body).ok()?;
    models
        .data
        .iter()
        .filter_map(|m| m.max_model_len)
        .max()
        .and_then(|n| u32::try_from(n).ok())
}

async fn fetch(ctx: &ScrapeContext, address: &str, path: &str) -> Result<Bytes, String> {
    let uri: Uri = format!("http://{address}{path}")
        .parse()
        .map_err(|e| format!("bad address: {e}"))?;
    let req = Request::get(uri)
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let resp = ctx
        .client
        .request(req)
        .await
        .map_err(|e| crate::error_chain(&e))?;
    if resp.status() != StatusCode::OK {
        return Err(format!("status {}", resp.status()));
    }
    let body = Limited::new(resp.into_body(), ctx.settings.max_body_bytes)
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(body.to_bytes())
}

#[cfg(test)]
mod context_tests {
    use super::max_model_len;

    #[test]
    fn the_context_window_is_read_from_v1_models() {
        let vllm = br#"{"object":"list","data":[{"id":"m","max_model_len":8192},{"id":"a","parent":"m","max_model_len":8192}]}"#;
        assert_eq!(max_model_len(vllm), Some(8_192));
        assert_eq!(max_model_len(br#"{"data":[{"id":"m"}]}"#), None);
        assert_eq!(max_model_len(b"not json"), None);
    }
}
