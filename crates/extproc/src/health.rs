//! gRPC health (`grpc.health.v1.Health`) as the endpoint-picker protocol defines it: `liveness`
//! (the process answers), `readiness` (every endpoint scraped at least once) and the ext_proc
//! service name (the same as readiness); `""` is the server as a whole (serving while it runs).
//! All but liveness turn to NOT_SERVING when the drain begins, so health-checking proxies stop
//! sending new streams while the process is still alive and finishing the old ones.

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
    reporter
        .set_service_status(LIVENESS, ServingStatus::Serving)
        .await;
    let mut last = None;
    loop {
        let ready = handle.is_ready();
        if last != Some(ready) {
            for name in [READINESS, EXT_PROC_SERVICE] {
                reporter.set_service_status(name, status(ready)).await;
            }
            last = Some(ready);
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// Every service but liveness NOT_SERVING: the drain has begun.
pub async fn draining(reporter: &HealthReporter) {
    for name in ["", READINESS, EXT_PROC_SERVICE] {
        reporter
            .set_service_status(name, ServingStatus::NotServing)
            .await;
    }
}
