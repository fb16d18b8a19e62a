//! Which endpoints a Pod gives a pool, by the upstream endpoint picker's rules (see
//! `docs/kubernetes.md`): pure functions of the Pod object, so the rules are tested without an
//! API server.
//!
//! - A pod counts only while `metadata.deletionTimestamp` is unset and its `Ready` condition is
//!   `True`; a terminating pod leaves on the first event that shows the timestamp.
//! - One endpoint per (pod, target port): named `<pod>-rank-<i>`, `i` the port's index in the
//!   pool's target ports (not the port), at `status.podIP:port`, carrying the pod's labels.
//! - The annotation `llm-d.ai/active-ports` (or, when absent, the older
//!   `inference.networking.k8s.io/active-ports`) narrows the ports: a comma list, spaces
//!   trimmed, ports outside the target ports ignored.

use std::collections::BTreeMap;

use infergate_control::discovery::endpoint_id;
use infergate_picker::EndpointSpec;
use k8s_openapi::api::core::v1::Pod;

/// llm-d's active-ports annotation.
pub const ACTIVE_PORTS: &str = "llm-d.ai/active-ports";
/// The Gateway API Inference Extension's older spelling, read when the new one is absent.
pub const ACTIVE_PORTS_LEGACY: &str = "inference.networking.k8s.io/active-ports";

/// Whether the pod serves: not terminating, and condition `Ready` is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod's labels (empty when it has none).
pub fn labels(pod: &Pod) -> &BTreeMap<String, String> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    pod.metadata.labels.as_ref().unwrap_or(&NONE)
}

/// The indices into `target_ports` that the pod's active-ports annotation keeps (all of them
/// without the annotation).
pub fn active_ranks(pod: &Pod, target_ports: &[u16]) -> Vec<usize> {
    let annotations = pod.metadata.annotations.as_ref();
    let listed =
        annotations.and_then(|a| a.get(ACTIVE_PORTS).or_else(|| a.get(ACTIVE_PORTS_LEGACY)));
    let Some(listed) = listed else {
        return (0..target_ports.len()).collect();
    };
    let active: Vec<u16> = listed
        .split(',')
        .filter_map(|p| p.trim().parse::<u16>().ok())
        .collect();
    target_ports
        .iter()
        .enumerate()
        .filter(|(_, port)| active.contains(port))
        .map(|(i, _)| i)
        .collect()
}

/// The endpoints a ready pod gives a pool with `target_ports`; none for a pod that is not
/// ready, has no IP yet, or whose active ports name none of the target ports.
pub fn endpoints(pod: &Pod, target_ports: &[u16]) -> Vec<EndpointSpec> {
    if !is_ready(pod) {
        return Vec::new();
    }
    let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()) else {
        return Vec::new();
    };
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    active_ranks(pod, target_ports)
        .into_iter()
        .map(|rank| {
            let address = authority(ip, target_ports[rank]);
            let mut spec = EndpointSpec::new(endpoint_id(&address).0, address)
                .with_name(format!("{name}-rank-{rank}"));
            spec.labels = labels(pod).clone();
            spec
        })
        .collect()
}

/// `ip:port`, with an IPv6 address in brackets.
fn authority(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn pod(name: &str, ip: Option<&str>, ready: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([("app".into(), "vllm-llama".into())])),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodStatus {
                pod_ip: ip.map(str::to_owned),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }

    fn annotate(mut p: Pod, key: &str, value: &str) -> Pod {
        p.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        p
    }

    #[test]
    fn a_ready_pod_gives_one_endpoint_per_target_port_named_by_rank() {
        let eps = endpoints(&pod("vllm-0", Some("10.0.0.7"), "True"), &[8000, 8001]);
        let got: Vec<(&str, &str)> = eps
            .iter()
            .map(|e| (e.name.as_str(), e.address.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("vllm-0-rank-0", "10.0.0.7:8000"),
                ("vllm-0-rank-1", "10.0.0.7:8001")
            ]
        );
        assert!(eps.iter().all(|e| e.labels["app"] == "vllm-llama"));
        assert_ne!(eps[0].id, eps[1].id);
    }

    #[test]
    fn only_ready_true_counts() {
        for status in ["False", "Unknown"] {
            assert!(endpoints(&pod("p", Some("10.0.0.7"), status), &[8000]).is_empty());
        }
        let mut no_conditions = pod("p", Some("10.0.0.7"), "True");
        if let Some(s) = no_conditions.status.as_mut() {
            s.conditions = None;
        }
        assert!(!is_ready(&no_conditions));
        assert!(endpoints(&pod("p", None, "True"), &[8000]).is_empty());
    }

    #[test]
    fn a_terminating_pod_leaves_at_once_even_while_ready() {
        let mut p = pod("p", Some("10.0.0.7"), "True");
        p.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert!(!is_ready(&p));
        assert!(endpoints(&p, &[8000]).is_empty());
    }

    #[test]
    fn active_ports_narrow_the_ranks_and_keep_their_indices() {
        let p = annotate(
            pod("p", Some("10.0.0.7"), "True"),
            ACTIVE_PORTS,
            " 8001 ,9999",
        );
        let eps = endpoints(&p, &[8000, 8001, 8002]);
        assert_eq!(eps.len(), 1);
        assert_eq!(eps[0].name, "p-rank-1");
        assert_eq!(eps[0].address, "10.0.0.7:8001");
    }

    #[test]
    fn the_new_annotation_wins_over_the_legacy_one() {
        let p = annotate(
            pod("p", Some("10.0.0.7"), "True"),
            ACTIVE_PORTS_LEGACY,
            "8000",
        );
        assert_eq!(active_ranks(&p, &[8000, 8001]), [0]);
        let p = annotate(p, ACTIVE_PORTS, "8001");
        assert_eq!(active_ranks(&p, &[8000, 8001]), [1]);
    }

    #[test]
    fn active_ports_that_match_no_target_port_give_no_endpoint() {
        let p = annotate(pod("p", Some("10.0.0.7"), "True"), ACTIVE_PORTS, "9000");
        assert!(endpoints(&p, &[8000]).is_empty());
    }

    #[test]
    fn an_ipv6_pod_gets_a_bracketed_authority() {
        let eps = endpoints(&pod("p", Some("fd00::7"), "True"), &[8000]);
        assert_eq!(eps[0].address, "[fd00::7]:8000");
    }
}
