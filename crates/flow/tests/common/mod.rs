//! Settings and pool states the flow tests share.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use infergate_config::gateway::{Band, Fairness};
use infergate_flow::{BandLimits, FlowConfig, FlowRequest, PoolState};

/// Milliseconds since the origin.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Every band with `requests`/`bytes` caps and `ttl`; global caps ten times as large.
pub fn config(requests: u32, bytes: u64, ttl: Duration) -> FlowConfig {
    let band = BandLimits {
        max_queue_requests: requests,
        max_queue_bytes: bytes,
        queue_ttl: ttl,
    };
    FlowConfig {
        enabled: true,
        bands: [band; 3],
        max_queue_requests: requests * 10,
        max_queue_bytes: bytes * 10,
        fairness: Fairness::RoundRobin,
        tenant_weights: BTreeMap::new(),
        state_max_age: Duration::from_secs(1),
        overload: None,
    }
}

/// Generous caps and a 10 s TTL.
pub fn roomy() -> FlowConfig {
    config(1_000, 1 << 30, Duration::from_secs(10))
}

/// One fresh endpoint at `saturation`, with a queue-depth threshold of 5 and the default
/// ceilings: the Standard ceiling leaves `5 × (1 − saturation)` requests of headroom, the
/// Critical one `5 × (2 − saturation)`, the Sheddable one `5 × (0.75 − saturation)`.
pub fn pool_at(saturation: f64) -> PoolState {
    PoolState {
        fresh: 1,
        saturated: usize::from(saturation >= 1.0),
        saturation,
        lower_saturation: saturation,
        queue_saturation: saturation,
        waiting: 5.0 * saturation,
        queue_spread: 0.0,
        queue_depth: 5.0,
        ceilings: Band::ALL.map(infergate_flow::ceiling),
    }
}

/// A request.
pub fn req(id: u64, band: Band, tenant: &str, bytes: u64) -> FlowRequest {
    FlowRequest {
        id,
        band,
        tenant: Some(tenant.to_owned()),
        bytes,
    }
}
