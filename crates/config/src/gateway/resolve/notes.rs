//! What resolution reports beside the pools: deployment-only knobs that were set, and
//! warnings about configs that load but deserve attention.

use super::{DeploymentKnob, Identity, PickerSource, ResolvedDiscovery, ResolvedGateway, TlsMode};
use crate::gateway::deploy::PodDefaults;
use crate::gateway::traffic::RateLimitStore;
use crate::gateway::types::InferenceGatewayConfig;

/// Every knob that only the Kubernetes deployment honours and that `config` sets.
pub(super) fn deployment_knobs(config: &InferenceGatewayConfig) -> Vec<DeploymentKnob> {
    let spec = &config.spec;
    let mut knobs = Vec::new();
    let mut add = |field: String, value: String| knobs.push(DeploymentKnob { field, value });
    if let Some(r) = spec.bbr.replicas {
        add("spec.bbr.replicas".into(), r.to_string());
    }
    if let Some(arn) = spec
        .tls
        .as_ref()
        .and_then(|t| t.acm_arn.as_deref())
        .filter(|a| !a.is_empty())
    {
        add("spec.tls.acmArn".into(), arn.to_owned());
    }
    if let Some(p) = &spec.pod_defaults {
        add("spec.podDefaults".into(), pod_summary(p));
    }
    for (i, s) in spec.schedulers.iter().enumerate() {
        let at = |f: &str| format!("spec.schedulers[{i}].{f}");
        if let Some(r) = s.replicas {
            add(at("replicas"), r.to_string());
        }
        if !s.env.is_empty() {
            let names: Vec<&str> = s.env.iter().map(|e| e.name.as_str()).collect();
            add(at("env"), names.join(", "));
        }
        if !s.env_from.is_empty() {
            add(at("envFrom"), format!("{} source(s)", s.env_from.len()));
        }
        if let Some(p) = &s.pod_defaults {
            add(at("podDefaults"), pod_summary(p));
        }
        if let Some(l) = s.log_level {
            add(at("logLevel"), l.to_string());
        }
    }
    knobs
}

fn pod_summary(p: &PodDefaults) -> String {
    let parts = [
        ("resources", p.resources.is_some()),
        ("nodeSelector", !p.node_selector.is_empty()),
        ("tolerations", !p.tolerations.is_empty()),
        ("affinity", p.affinity.is_some()),
        ("labels", !p.labels.is_empty()),
        ("annotations", !p.annotations.is_empty()),
        ("env", !p.env.is_empty()),
        ("envFrom", !p.env_from.is_empty()),
    ];
    let set: Vec<&str> = parts.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect();
    if set.is_empty() {
        "{}".to_owned()
    } else {
        set.join(", ")
    }
}

impl ResolvedGateway {
    /// Warnings that need the whole resolution.
    pub(super) fn warn(&mut self, static_endpoints: usize) {
        if self.tls == TlsMode::Plain {
            self.warnings
                .push("no spec.tls: the listener serves plain HTTP".to_owned());
        }
        if let TlsMode::Acm { arn } = &self.tls {
            self.warnings.push(format!(
                "spec.tls.acmArn {arn} is terminated by the Kubernetes load balancer; a \
                 standalone gateway serves a self-signed certificate instead"
            ));
        }
        match &self.auth {
            None => self
                .warnings
                .push("no spec.auth: every inference route is open".to_owned()),
            Some(_) => {
                if let Identity::Header(h) = &self.tenancy.tenant.value {
                    self.warnings.push(format!(
                        "auth is on but the tenant comes from header {h}, which clients set \
                         themselves; set spec.tenancy.tenant.claim to take it from the token"
                    ));
                }
            }
        }
        if let Some(limits) = &self.rate_limits {
            if limits.store.value == RateLimitStore::Local {
                self.warnings
                    .push("rate limits are counted per gateway process (store: local)".to_owned());
            }
        }
        for p in &self.pools {
            if let PickerSource::Weights(w) = &p.picker {
                if w.all_off() {
                    self.warnings.push(format!(
                        "pool `{}`: every scorer weight is 0, so picks fall to the tie-break",
                        p.name
                    ));
                }
            }
            if self.discovery == ResolvedDiscovery::Static && p.endpoints.is_empty() {
                self.warnings.push(format!(
                    "pool `{}`: its modelSelector ({}) matches no endpoint of spec.endpoints, so \
                     its requests get 503",
                    p.name, p.selector
                ));
            }
        }
        if self.discovery == ResolvedDiscovery::Static {
            let mut selected = vec![false; static_endpoints];
            for e in self.pools.iter().flat_map(|p| &p.endpoints) {
                if let Some(s) = selected.get_mut(e.index) {
                    *s = true;
                }
            }
            for (i, s) in selected.iter().enumerate() {
                if !s {
                    self.warnings.push(format!(
                        "spec.endpoints[{i}] is selected by no scheduler's modelSelector"
                    ));
                }
            }
        }
    }
}
