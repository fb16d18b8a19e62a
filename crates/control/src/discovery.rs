//! Discovery: which endpoints a pool has. Either the static list of `spec.endpoints` (each
//! entry routed to the schedulers whose `modelSelector` matches its labels), or a
//! [`MemberSource`] that something outside this crate keeps up to date (Kubernetes discovery,
//! `infergate-kubernetes`), read without waiting.
//!
//! An endpoint's id is a hash of its address, so an endpoint that stays across a reload (or a
//! membership change) keeps what the picker learned about it.

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};

use infergate_config::gateway::Pool as PoolConfig;
use infergate_picker::{EndpointId, EndpointSpec};

/// A stable id for an endpoint address, so an endpoint keeps what the picker learned about it
/// across reloads.
pub fn endpoint_id(address: &str) -> EndpointId {
    let mut h = DefaultHasher::new();
    address.hash(&mut h);
    EndpointId(h.finish())
}

/// The endpoints of a pool from its static config, with their labels. Two entries with one
/// address are one endpoint.
pub fn static_members(config: &PoolConfig) -> Vec<EndpointSpec> {
    let mut specs: Vec<EndpointSpec> = Vec::with_capacity(config.endpoints.len());
    for e in &config.endpoints {
        if specs.iter().any(|s| s.address == e.authority) {
            continue;
        }
        let mut spec = EndpointSpec::new(endpoint_id(&e.authority).0, e.authority.clone());
        spec.labels = e.labels.clone();
        specs.push(spec);
    }
    specs
}

/// The one endpoint of a host that is not scraped (`bbr.defaultBackend` naming a host).
pub fn host_member(authority: &str) -> EndpointSpec {
    EndpointSpec::new(endpoint_id(authority).0, authority)
}

/// Where the endpoints of pools come from when the config does not list them: a cache kept by
/// a watch elsewhere. The plane asks it for a pool's members when it builds the pool (start-up
/// and every reload), and is told of changes through
/// [`crate::PlaneHandle::refresh_members`].
pub trait MemberSource: Send + Sync + fmt::Debug {
    /// The members `pool` has now, from what the source has cached. Never waits and never
    /// fails: a source that lost its upstream answers with what it last knew.
    fn members(&self, pool: &PoolConfig) -> Vec<EndpointSpec>;

    /// Whether the source has synced and is live, for readiness and its detail.
    fn health(&self) -> SourceHealth;
}

/// A member source's state, as readiness reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceHealth {
    /// Every watch has listed once: the members are complete. Until then the gateway is not
    /// ready.
    pub synced: bool,
    /// Empty while live; otherwise what is wrong (the API server unreachable since when),
    /// said in `/readyz` while the last known members keep serving.
    pub problem: String,
}
