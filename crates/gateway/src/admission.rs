//! Admission: shed with 429 + Retry-After when the pool is saturated, before the picker runs.
//!
//! The detector is upstream's (`shared/reference/model-servers.md`, "Saturation"): an endpoint's
//! saturation is `max(waiting / queueDepthThreshold, kv / kvCacheThreshold)`. The summary is
//! computed by the control plane each time a round of scrapes lands, never per request, so a
//! request reads one small value whatever the fleet's size.
//!
//! - Critical requests are never shed here.
//! - Standard requests are shed when every endpoint with fresh metrics is saturated.
//! - Sheddable requests (priority < 0) are shed when the pool's mean saturation reaches 1.
//!
//! Endpoints with stale metrics are left out (the picker excludes them too); with no fresh
//! endpoint at all the detector knows nothing and admits. Retry-After is the waiting backlog
//! divided by the rate at which the pool has been finishing requests.

use std::time::Duration;

use infergate_picker::Pool;

/// The detector's thresholds, from `spec.flowControl`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Shedding on at all.
    pub enabled: bool,
    /// Waiting requests at saturation.
    pub queue_depth: f64,
    /// KV-cache use at saturation.
    pub kv_cache: f64,
    /// Metrics older than this are left out.
    pub staleness: Duration,
}

/// A pool's load as of its last round of scrapes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PoolLoad {
    /// When it was computed; `None` before the first scrape.
    pub computed_at: Option<Duration>,
    /// Endpoints with fresh metrics.
    pub fresh: usize,
    /// Every fresh endpoint is saturated (and there is one).
    pub all_saturated: bool,
    /// Mean saturation over fresh endpoints.
    pub mean_saturation: f64,
    /// Largest minus smallest waiting queue over fresh endpoints.
    pub queue_spread: f64,
    /// Seconds a shed client should wait.
    pub retry_after_secs: u64,
}

/// Longest Retry-After the gateway suggests.
const MAX_RETRY_AFTER_SECS: u64 = 60;

/// Computes the summary of `pool` at `now`, given the pool's recent completion rate.
pub fn summarize(pool: &Pool, t: &Thresholds, now: Duration, drain_per_sec: f64) -> PoolLoad {
    let (mut fresh, mut saturated, mut sum) = (0usize, 0usize, 0.0);
    let (mut min_q, mut max_q, mut backlog) = (f64::INFINITY, 0.0f64, 0.0);
    for spec in pool.specs() {
        let Some(m) = pool.metrics(spec.id) else {
            continue;
        };
        if m.age(now) > t.staleness {
            continue;
        }
        let q = m.waiting.map(|w| w as f64);
        let parts = [
            q.map(|q| q / t.queue_depth.max(f64::MIN_POSITIVE)),
            m.kv_usage.map(|k| k / t.kv_cache.max(f64::MIN_POSITIVE)),
        ];
        let Some(score) = parts.into_iter().flatten().reduce(f64::max) else {
            continue;
        };
        fresh += 1;
        sum += score;
        if score >= 1.0 {
            saturated += 1;
        }
        if let Some(q) = q {
            min_q = min_q.min(q);
            max_q = max_q.max(q);
            backlog += q;
        }
    }
    let retry_after_secs = if drain_per_sec > 0.0 {
        ((backlog / drain_per_sec).ceil() as u64).clamp(1, MAX_RETRY_AFTER_SECS)
    } else {
        1
    };
    PoolLoad {
        computed_at: Some(now),
        fresh,
        all_saturated: fresh > 0 && saturated == fresh,
        mean_saturation: if fresh > 0 { sum / fresh as f64 } else { 0.0 },
        queue_spread: if min_q.is_finite() {
            max_q - min_q
        } else {
            0.0
        },
        retry_after_secs,
    }
}

/// Whether a request of `priority` may go on; `Err(retry_after_secs)` when it is shed.
pub fn admit(load: &PoolLoad, t: &Thresholds, priority: i32, now: Duration) -> Result<(), u64> {
    if !t.enabled || priority > 0 {
        return Ok(());
    }
    // A summary that stopped updating (every scrape failing) says nothing about now.
    let current = load
        .computed_at
        .is_some_and(|at| now.saturating_sub(at) <= t.staleness.max(Duration::from_secs(1)));
    if !current {
        return Ok(());
    }
    let shed = if priority < 0 {
        load.fresh > 0 && load.mean_saturation >= 1.0
    } else {
        load.all_saturated
    };
    if shed {
        Err(load.retry_after_secs)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_picker::{EndpointId, EndpointSpec, ScrapedMetrics};

    const T: Thresholds = Thresholds {
        enabled: true,
        queue_depth: 5.0,
        kv_cache: 0.8,
        staleness: Duration::from_millis(200),
    };

    fn pool(loads: &[(u64, f64)], at: Duration) -> Pool {
        let mut pool = Pool::new(
            (0..loads.len() as u64)
                .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:8000")))
                .collect(),
        )
        .unwrap();
        for (i, &(waiting, kv)) in loads.iter().enumerate() {
            let m = ScrapedMetrics {
                waiting: Some(waiting),
                kv_usage: Some(kv),
                ..ScrapedMetrics::empty(at)
            };
            pool.update_metrics(EndpointId(i as u64), m).unwrap();
        }
        pool
    }

    #[test]
    fn standard_is_shed_only_when_every_endpoint_is_saturated() {
        let now = Duration::from_secs(10);
        let busy = summarize(&pool(&[(6, 0.1), (9, 0.9)], now), &T, now, 5.0);
        assert!(busy.all_saturated);
        assert_eq!(busy.retry_after_secs, 3);
        assert_eq!(admit(&busy, &T, 0, now), Err(3));
        assert_eq!(admit(&busy, &T, 1, now), Ok(()));
        let one_free = summarize(&pool(&[(6, 0.1), (0, 0.1)], now), &T, now, 5.0);
        assert_eq!(admit(&one_free, &T, 0, now), Ok(()));
        // Mean saturation (6/5 + 0.125) / 2 < 1: sheddable still admitted.
        assert_eq!(admit(&one_free, &T, -1, now), Ok(()));
        let mostly = summarize(&pool(&[(15, 0.1), (0, 0.1)], now), &T, now, 0.0);
        assert_eq!(admit(&mostly, &T, -1, now), Err(1));
    }

    #[test]
    fn stale_metrics_and_an_old_summary_fail_open() {
        let now = Duration::from_secs(10);
        let stale = summarize(&pool(&[(50, 1.0)], Duration::from_secs(1)), &T, now, 1.0);
        assert_eq!(stale.fresh, 0);
        assert_eq!(admit(&stale, &T, 0, now), Ok(()));
        let busy = summarize(&pool(&[(50, 1.0)], now), &T, now, 1.0);
        assert!(admit(&busy, &T, 0, now).is_err());
        assert_eq!(admit(&busy, &T, 0, now + Duration::from_secs(5)), Ok(()));
    }
}
