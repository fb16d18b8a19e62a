//! The global tier's defaults, in one place; each says why it is what it is.

use std::time::Duration;

/// Data-plane listener.
pub const LISTEN: &str = "0.0.0.0:8080";
/// Admin listener.
pub const ADMIN_LISTEN: &str = "0.0.0.0:9090";
/// The header that names the caller's region.
pub const REGION_HEADER: &str = "x-infergate-region";
/// A status pull per member per second: three missed pulls then leave a dead member out within
/// about 3 s, inside the 5 s failover goal with room for the pull's own timeout.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(1);
/// Half the interval: a member that cannot answer its status in 500 ms on a healthy link is
/// not one to send new work to, and a pull never overlaps the next.
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(500);
/// Three misses make a member stale (the figure): one lost pull is noise.
pub const MISSES_BEFORE_STALE: u32 = 3;
/// Two good pulls in a row before a stale member is a candidate again, so one lucky answer
/// from a flapping member does not bring it back.
pub const PULLS_BEFORE_RETURN: u32 = 2;
/// AWS publishes no default weights; free KV cache and the queue say most about where a request
/// starts soonest, proximity saves a round trip, errors are rare and also eject.
pub const WEIGHT_KV_HEADROOM: f64 = 0.35;
/// See [`WEIGHT_KV_HEADROOM`].
pub const WEIGHT_QUEUE_DEPTH: f64 = 0.35;
/// See [`WEIGHT_KV_HEADROOM`].
pub const WEIGHT_REGION_PROXIMITY: f64 = 0.2;
/// See [`WEIGHT_KV_HEADROOM`].
pub const WEIGHT_ERROR_RATE: f64 = 0.1;
/// A cheaper member takes work until its pool saturation reaches 0.8 of Standard's ceiling: the
/// last fifth is where its own flow control starts to queue, and the point is to spill before
/// anyone queues.
pub const SPILL_AT: f64 = 0.8;
/// The first member and two more: a region's two other members, or another region.
pub const MAX_ATTEMPTS: u32 = 3;
/// A connect on a healthy link takes one round trip (under 300 ms across continents); a second
/// without one is a black hole, and failover must fit in 5 s.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A long prompt queued on a loaded member may wait minutes for its first token; the member's
/// own timeouts decide sooner.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(300);
/// Envoy's `consecutive_5xx` default.
pub const OUTLIER_CONSECUTIVE_FAILURES: u32 = 5;
/// Envoy's `base_ejection_time` default.
pub const OUTLIER_BASE_EJECTION: Duration = Duration::from_secs(30);
/// Envoy's `max_ejection_time` default.
pub const OUTLIER_MAX_EJECTION: Duration = Duration::from_secs(300);
/// A returning member reaches its whole share in 30 s: a cold member's caches fill in about
/// that, and a member that fails again does so on a small share.
pub const SLOW_START_WINDOW: Duration = Duration::from_secs(30);
/// Envoy's default: linear.
pub const SLOW_START_AGGRESSION: f64 = 1.0;
/// Envoy's `min_weight_percent` default.
pub const SLOW_START_MIN_WEIGHT_PERCENT: u32 = 10;
