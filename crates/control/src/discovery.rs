//! Discovery: which endpoints a pool has. Today the static list of `spec.endpoints` (each
//! entry routed to the schedulers whose `modelSelector` matches its labels); Kubernetes
//! discovery by label selector comes next and produces the same [`EndpointSpec`]s.
//!
//! An endpoint's id is a hash of its address, so an endpoint that stays across a reload (or a
//! membership change) keeps what the picker learned about it.

use std::collections::hash_map::DefaultHasher;
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
