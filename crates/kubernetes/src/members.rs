//! Pod discovery: every Pod of one namespace watched into a cache (kube's reflector), each
//! pool's members computed from it by the pool's `modelSelector` and target port (the rules
//! are in [`crate::pods`]), and the plane told after each change.
//!
//! Like the upstream endpoint picker, the watch is of the whole namespace and the selector is
//! applied here: a pod relabelled out of a pool is still seen, and leaves it. The request path
//! never waits on any of this: the plane asks [`PodDiscovery::members`] only when it builds or
//! refreshes a pool, and requests read the snapshot that results.

use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::{LabelSelector, Pool as PoolConfig};
use infergate_control::discovery::{MemberSource, SourceHealth};
use infergate_control::PlaneHandle;
use infergate_picker::EndpointSpec;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::pods;
use crate::watch::Watched;

/// The pods of one namespace, watched.
#[derive(Debug)]
pub struct PodDiscovery {
    namespace: String,
    pods: Watched<Pod>,
    changed: Arc<Notify>,
}

impl PodDiscovery {
    /// Starts watching the pods of `namespace`. Must run inside a tokio runtime.
    pub fn start(client: Client, namespace: &str) -> Arc<Self> {
        let api: Api<Pod> = Api::namespaced(client, namespace);
        let changed = Arc::new(Notify::new());
        let pods = Watched::start(api, watcher::Config::default(), "pods", &changed);
        Arc::new(Self {
            namespace: namespace.to_owned(),
            pods,
            changed,
        })
    }

    /// The namespace watched.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Waits up to `within` for the first list of pods; whether it came.
    pub async fn wait_synced(&self, within: Duration) -> bool {
        self.pods.health.wait_synced(within).await
    }

    /// Tells `plane` of every change from now on: after each batch of pod events it refreshes
    /// the discovered pools' members (events that arrive while it does are coalesced into one
    /// more refresh). Runs until the returned task is aborted.
    pub fn attach(self: &Arc<Self>, plane: PlaneHandle) -> JoinHandle<()> {
        self.pods.health.attach_metrics(plane.metrics());
        let me = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                plane
                    .metrics()
                    .discovery_synced
                    .set(i64::from(me.pods.health.live()));
                // Each change is logged by the plane as it installs it.
                if let Err(e) = plane.refresh_members() {
                    tracing::error!(error = %e, "membership change refused");
                }
                me.changed.notified().await;
            }
        })
    }
}

impl PodDiscovery {
    /// The endpoints of the ready pods `selector` matches, one per target port, in name order.
    pub fn members_matching(&self, selector: &LabelSelector, ports: &[u16]) -> Vec<EndpointSpec> {
        let mut out: Vec<EndpointSpec> = self
            .pods
            .store
            .state()
            .iter()
            .filter(|p| selector.matches(pods::labels(p)))
            .flat_map(|p| pods::endpoints(p, ports))
            .collect();
        // A fixed order, so an unchanged membership compares equal and swaps nothing.
        out.sort_by(|a, b| a.name.cmp(&b.name));
        // Two pods reporting one address (an IP reused before the old pod's deletion was seen)
        // are one endpoint: the first by name stays.
        let mut seen = std::collections::HashSet::new();
        out.retain(|e| seen.insert(e.id));
        out
    }
}

impl MemberSource for PodDiscovery {
    fn members(&self, pool: &PoolConfig) -> Vec<EndpointSpec> {
        self.members_matching(&pool.selector, &[pool.target_port.value])
    }

    fn health(&self) -> SourceHealth {
        let synced = self.pods.health.synced();
        let mut problem = self.pods.health.problem();
        if problem.is_empty() && !synced {
            problem = format!("listing the pods of namespace {}", self.namespace);
        }
        SourceHealth { synced, problem }
    }
}
