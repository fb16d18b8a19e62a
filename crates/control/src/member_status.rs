//! The member status document, `GET /status/member` on the admin listener: a compact summary
//! of every pool that a global tier pulls from each member gateway every second, to choose
//! where a request goes and to notice a member whose control plane froze.
//!
//! Its shape is a contract with the global tier (`crates/global-picker/src/status.rs` reads
//! it): camelCase keys, the units in their names, and these meanings.
//!
//! - `sequence` advances each time the control plane handles a round of scrapes
//!   ([`crate::scrape::ScrapeContext::refreshes`]), never per read: a member whose scraping
//!   stopped while its admin listener still answers shows the same number on every read. It
//!   starts at 0 with the process (a restarted member starts again lower).
//! - `clockUnixMs`: the member's wall clock when the document was built, informative only (the
//!   tier judges age by its own receipt time).
//! - per pool, in config order, one per scheduler (a `bbr.defaultBackend` host is no pool):
//!   `models` and `adapters`, the names that route there ([`crate::routes::PoolNames`]);
//!   `endpoints`, its members now; `readyEndpoints`, those a pick may choose now: scraped within
//!   the policy's stale-metrics age and not ejected by outlier detection (an endpoint in slow
//!   start counts; one the saturation filter would skip counts too, since saturation is what
//!   the other fields say); `kvHeadroom`, 1 − the mean KV-cache use over ready endpoints that
//!   report it (0 when none does); `queueDepth`, requests waiting in the model servers (summed
//!   over ready endpoints, as last scraped) plus those waiting in this gateway's flow-control
//!   queue for the pool; `errorRate` and `ttftP99Seconds`, over the last 10 s
//!   ([`infergate_telemetry::recent`]): the share of the pool's requests that ended in a 5xx
//!   (the gateway's own for an endpoint it could not reach or a timeout included; 0 without
//!   requests) and the P99 time from arrival to the first token of successful answers (a
//!   buffered answer's first byte is its last, so its whole duration; `null` without one);
//!   `saturation`, the flow-control detector's mean pool saturation as of the last round of
//!   scrapes (1: at a threshold).
//!
//! Cheap to build: per pool one snapshot load, one walk of its endpoints' last scrapes and
//! health (atomics), one atomic for the queue and one short lock to merge the recent window.
//! It never takes a picker's or flow control's lock, so a pull cannot hold a request back.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use infergate_telemetry::recent::RecentSummary;

use crate::pool::PoolRuntime;
use crate::routes::PoolNames;
use crate::shared::Shared;

pub use infergate_global_picker::status::{
    MemberStatus, PoolStatus, Readiness, MEMBER_STATUS_API_VERSION as API_VERSION,
    MEMBER_STATUS_KIND as KIND, MEMBER_STATUS_PATH as PATH,
};

/// A pool's entry from what was read of it: its names, its endpoints, the requests in its own
/// queue, its recent requests and its saturation.
pub fn pool_status(
    name: &str,
    names: &PoolNames,
    readiness: Readiness,
    queued: u64,
    recent: &RecentSummary,
    saturation: f64,
) -> PoolStatus {
    PoolStatus {
        models: names.models.clone(),
        adapters: names.adapters.clone(),
        error_rate: recent.error_rate(),
        ttft_p99_seconds: recent.ttft_p99.map(|t| t.as_secs_f64()),
        // The routing line is filled by the caller, which has the pool's resolved config.
        ..PoolStatus::from_readiness(name, readiness, queued, saturation)
    }
}

fn pool_status_of(pool: &PoolRuntime, names: &PoolNames, now: Duration) -> PoolStatus {
    let snap = pool.snapshot();
    let readiness = Readiness::of(&snap.pool, now, pool.policy().max_metrics_age());
    pool_status(
        &pool.name,
        names,
        readiness,
        pool.admission().queued_requests(),
        &pool.recent().summary(),
        snap.state.saturation,
    )
}

/// The document as the plane stands now.
pub(crate) fn member_status_now(shared: &Shared) -> MemberStatus {
    let routes = shared.routes.load();
    let now = shared.clock.now();
    let pools = routes
        .pools
        .iter()
        .zip(&routes.names)
        .zip(&routes.routing)
        .map(|((pool, names), routing)| PoolStatus {
            routing: Some(routing.clone()),
            ..pool_status_of(pool, names, now)
        })
        .collect();
    MemberStatus {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        sequence: shared.refreshes.load(Ordering::Relaxed),
        clock_unix_ms: unix_ms(SystemTime::now()),
        pools,
    }
}

/// `at` in milliseconds since the Unix epoch (0 for a clock set before it).
fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_picker::Pool;
    use infergate_picker::{
        AttemptOutcome, EndpointId, EndpointSpec, OutlierPolicy, ScrapedMetrics,
    };
    use serde_json::json;

    fn names() -> PoolNames {
        PoolNames {
            models: vec![
                "meta-llama/Llama-3.1-8B-Instruct".into(),
                "chat-alias".into(),
            ],
            adapters: vec!["sql-lora".into()],
        }
    }

    #[test]
    fn the_document_has_exactly_the_contracts_keys_and_units() {
        let recent = RecentSummary {
            requests: 100,
            failed: 0,
            first_tokens: 90,
            ttft_p99: Some(Duration::from_millis(810)),
        };
        let readiness = Readiness {
            ready: 3,
            endpoints: 4,
            kv_headroom: 0.42,
            waiting: 5,
        };
        let doc = MemberStatus {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            sequence: 1234,
            clock_unix_ms: 1_767_225_600_123,
            pools: vec![pool_status(
                "llama-8b",
                &names(),
                readiness,
                2,
                &recent,
                0.35,
            )],
        };
        let got: serde_json::Value = serde_json::from_str(&doc.to_json()).expect("JSON");
        assert_eq!(
            got,
            json!({
                "apiVersion": "infergate.dev/v1alpha1",
                "kind": "MemberStatus",
                "sequence": 1234,
                "clockUnixMs": 1_767_225_600_123u64,
                "pools": [{
                    "name": "llama-8b",
                    "models": ["meta-llama/Llama-3.1-8B-Instruct", "chat-alias"],
                    "adapters": ["sql-lora"],
                    "readyEndpoints": 3,
                    "endpoints": 4,
                    "kvHeadroom": 0.42,
                    "queueDepth": 7,
                    "errorRate": 0.0,
                    "ttftP99Seconds": 0.81,
                    "saturation": 0.35,
                }],
            })
        );
        // Integers where the contract has integers.
        assert!(got["pools"][0]["queueDepth"].is_u64());
        assert!(got["pools"][0]["readyEndpoints"].is_u64());
    }

    #[test]
    fn no_recent_first_token_is_null_and_no_request_no_error() {
        let recent = RecentSummary {
            requests: 0,
            failed: 0,
            first_tokens: 0,
            ttft_p99: None,
        };
        let readiness = Readiness {
            ready: 0,
            endpoints: 2,
            kv_headroom: 0.0,
            waiting: 0,
        };
        let p = pool_status("p", &names(), readiness, 0, &recent, f64::NAN);
        let got = serde_json::to_value(&p).expect("JSON");
        assert!(got["ttftP99Seconds"].is_null(), "{got}");
        assert_eq!(got["errorRate"], json!(0.0));
        assert_eq!(got["saturation"], json!(0.0), "NaN never reaches the wire");
    }

    fn scraped(at_ms: u64, waiting: u64, kv: f64) -> ScrapedMetrics {
        ScrapedMetrics {
            waiting: Some(waiting),
            kv_usage: Some(kv),
            ..ScrapedMetrics::empty(Duration::from_millis(at_ms))
        }
    }

    #[test]
    fn ready_endpoints_are_fresh_and_not_ejected_and_only_they_count() {
        let specs = (0..4)
            .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:8000")))
            .collect();
        let mut pool = Pool::new(specs).expect("pool");
        pool.update_metrics(EndpointId(0), scraped(9_900, 3, 0.5))
            .expect("0");
        pool.update_metrics(EndpointId(1), scraped(9_800, 4, 0.7))
            .expect("1");
        // Stale: its last scrape is 1.5 s old.
        pool.update_metrics(EndpointId(2), scraped(8_500, 50, 0.99))
            .expect("2");
        // Endpoint 3 was never scraped.
        let now = Duration::from_secs(10);
        let max_age = Duration::from_secs(1);
        let r = Readiness::of(&pool, now, max_age);
        assert_eq!((r.ready, r.endpoints, r.waiting), (2, 4, 7));
        assert!((r.kv_headroom - 0.4).abs() < 1e-9, "{}", r.kv_headroom);

        // Endpoint 1 fails until outlier detection ejects it.
        let policy = OutlierPolicy {
            consecutive_failures: 2,
            base_ejection: Duration::from_secs(30),
            max_ejection: Duration::from_secs(300),
            max_ejected_share: 0.5,
            slow_start: Duration::ZERO,
            frozen_metrics_after: Duration::ZERO,
        };
        for _ in 0..2 {
            pool.record_outcome(EndpointId(1), AttemptOutcome::Failed, now, &policy);
        }
        let r = Readiness::of(&pool, now, max_age);
        assert_eq!((r.ready, r.waiting), (1, 3), "the ejected one left");
        assert!((r.kv_headroom - 0.5).abs() < 1e-9);

        let r = Readiness::of(&pool, Duration::from_secs(60), max_age);
        assert_eq!(
            (r.ready, r.kv_headroom, r.waiting),
            (0, 0.0, 0),
            "all stale"
        );
    }
}
