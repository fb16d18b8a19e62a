//! gRPC health (`grpc.health.v1.Health`) as the upstream endpoint picker answers it with leader
//! election off (see `docs/kubernetes.md`), "synced" meaning that discovery has listed (always
//! true with static endpoints; with `--pool-name`, the InferencePool is known and its pods
//! listed):
//!
//! | service | serving when |
//! |---|---|
//! | `liveness` | synced |
//! | `readiness`, `""`, the ext_proc service name | synced, every endpoint scraped at least once, not draining |
//! | `inference-extension` (the single-replica chart's probe name) | synced, not draining |
//!
//! Any other name is NOT_FOUND (upstream answers every other name like `inference-extension`;
//! a gRPC health server of fixed names cannot). All but liveness turn to NOT_SERVING when the
//! drain begins, so health-checking proxies stop sending new streams while the process is
//! still alive and finishing the old ones.

use std::time::Duration;

use infergate_control::PlaneHandle;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

/// The ext_proc service's name, as Envoy and health checkers ask for it.
pub const EXT_PROC_SERVICE: &str = "envoy.service.ext_proc.v3.ExternalProcessor";
/// Serving while the process runs.
pub const LIVENESS: &str = "liveness";
/// Serving once every endpoint has been scraped.
pub const READINESS: &str = "readiness";
/// Serving once synced.
pub const INFERENCE_EXTENSION: &str = "inference-extension";

/// How often readiness is looked at: a round of scrapes takes about this long by default.
const EVERY: Duration = Duration::from_millis(50);

fn status(serving: bool) -> ServingStatus {
    if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

/// Sets the initial statuses, then follows readiness until the task is aborted. A status is
/// written only when it changes, so watchers are told of changes only.
pub async fn follow(reporter: HealthReporter, handle: PlaneHandle) {
    let mut last = None;
    loop {
        let now = publish_if_changed(&reporter, &handle, last).await;
        last = Some(now);
        tokio::time::sleep(EVERY).await;
    }
}

/// Sets every status from the plane as it is now.
pub async fn publish(reporter: &HealthReporter, handle: &PlaneHandle) {
    publish_if_changed(reporter, handle, None).await;
}

/// Sets every status when (synced, ready) differs from `last`; the pair now.
async fn publish_if_changed(
    reporter: &HealthReporter,
    handle: &PlaneHandle,
    last: Option<(bool, bool)>,
) -> (bool, bool) {
    let now = (handle.is_synced(), handle.is_ready());
    if last != Some(now) {
        let (synced, ready) = now;
        for name in [LIVENESS, INFERENCE_EXTENSION] {
            reporter.set_service_status(name, status(synced)).await;
        }
        for name in ["", READINESS, EXT_PROC_SERVICE] {
            reporter.set_service_status(name, status(ready)).await;
        }
    }
    now
}

/// Every service but liveness NOT_SERVING: the drain has begun.
pub async fn draining(reporter: &HealthReporter) {
    for name in ["", READINESS, EXT_PROC_SERVICE, INFERENCE_EXTENSION] {
        reporter
            .set_service_status(name, ServingStatus::NotServing)
            .await;
    }
}
