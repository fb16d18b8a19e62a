//! Ablations of infergate as it ships: its picker profile with one component off, or its flow
//! control off or changed, each a policy name the runner accepts (`infergate-without-<part>`),
//! so that each component's effect is measured on the same arrivals as the whole.

use crate::tuning::Tuning;
use infergate_picker::{Filter, Policy, Profile, Scorer};

/// The prefix of an ablation's name.
pub const PREFIX: &str = "infergate-without-";

/// infergate's policy without the flow control it ships with: every request dispatched at
/// once, as a scenario without priority bands runs every peer.
pub const WITHOUT_FLOW_CONTROL: &str = "infergate-without-flow-control";

/// Flow control without its overload rule: queued requests wait out their TTL.
const WITHOUT_OVERLOAD_RULE: &str = "infergate-without-overload-rule";

/// Flow control whose detector ignores KV-cache use (waiting requests alone saturate).
const WITHOUT_KV_SATURATION: &str = "infergate-without-kv-saturation";

/// Flow control whose detector ignores waiting requests (a queue-depth threshold no queue
/// reaches).
const WITHOUT_QUEUE_SATURATION: &str = "infergate-without-queue-saturation";

/// Flow control whose KV-cache signal holds requests at all times, as upstream's detector does,
/// not only while the pool is overloaded.
const WITHOUT_KV_ONLY_IN_OVERLOAD: &str = "infergate-without-kv-only-in-overload";

/// Flow control whose detector reads a LoRA server's waiting count while requests in it wait
/// for an adapter slot.
const WITHOUT_ADAPTER_AWARE_QUEUES: &str = "infergate-without-adapter-aware-queues";

/// Flow control whose detector ignores the servers' decode pace (inter-token latency).
const WITHOUT_DECODE_PACE: &str = "infergate-without-decode-pace";

/// Flow control whose overload rule refuses at its wait even while the queue drains within it.
const WITHOUT_HOLD_WHILE_DRAINING: &str = "infergate-without-hold-while-draining";

/// Flow control whose overload rule reads a queue that has not emptied for its interval as
/// overload, as before the sojourn sensor.
const WITHOUT_SOJOURN_SENSOR: &str = "infergate-without-sojourn-sensor";

/// What an ablation takes away.
#[derive(Debug, Clone, PartialEq)]
pub enum Ablation {
    /// A part of the picker's profile: this policy, behind the shipped flow control.
    Pick(Policy),
    /// The whole policy with no flow control in front of it.
    FlowControl,
    /// The whole policy behind flow control changed as this says.
    Gate(Tuning),
}

/// What the ablation `name` takes away; `None` when `name` is not one.
pub fn ablation(name: &str) -> Option<Ablation> {
    match name {
        WITHOUT_FLOW_CONTROL => Some(Ablation::FlowControl),
        WITHOUT_OVERLOAD_RULE => Some(Ablation::Gate(Tuning {
            without_overload_rule: true,
            ..Tuning::default()
        })),
        WITHOUT_QUEUE_SATURATION => Some(Ablation::Gate(Tuning {
            queue_depth_threshold: Some(u32::MAX),
            ..Tuning::default()
        })),
        WITHOUT_KV_ONLY_IN_OVERLOAD => Some(Ablation::Gate(Tuning {
            kv_cache_always: true,
            ..Tuning::default()
        })),
        WITHOUT_ADAPTER_AWARE_QUEUES => Some(Ablation::Gate(Tuning {
            counts_adapter_bound_queues: true,
            ..Tuning::default()
        })),
        WITHOUT_HOLD_WHILE_DRAINING => Some(Ablation::Gate(Tuning {
            without_hold_while_draining: true,
            ..Tuning::default()
        })),
        WITHOUT_SOJOURN_SENSOR => Some(Ablation::Gate(Tuning {
            backlog_overload_sensor: true,
            ..Tuning::default()
        })),
        WITHOUT_DECODE_PACE => Some(Ablation::Gate(Tuning {
            inter_token_latency_threshold: Some(std::time::Duration::ZERO),
            ..Tuning::default()
        })),
        // Above any KV use an engine can report.
        WITHOUT_KV_SATURATION => Some(Ablation::Gate(Tuning {
            kv_cache_threshold: Some(2.0),
            ..Tuning::default()
        })),
        _ => policy(name).map(Ablation::Pick),
    }
}

/// The latency scorer kept, its tolerance taken away: the plain ratio `fastest / predicted`.
const LATENCY_TOLERANCE: &str = "latency-tolerance";

/// Every ablation of infergate's default profile: one per scorer and filter (by plugin type),
/// `fresh-load` (the dispatch credit) and `latency-tolerance`.
pub fn names() -> Vec<String> {
    let p = Profile::infergate();
    let mut out: Vec<String> = p
        .scorers
        .iter()
        .map(|s| s.scorer.plugin_type())
        .chain(p.filters.iter().map(Filter::plugin_type))
        .map(|part| format!("{PREFIX}{part}"))
        .collect();
    out.push(format!("{PREFIX}fresh-load"));
    out.push(format!("{PREFIX}{LATENCY_TOLERANCE}"));
    for gate in [
        WITHOUT_FLOW_CONTROL,
        WITHOUT_OVERLOAD_RULE,
        WITHOUT_KV_SATURATION,
        WITHOUT_QUEUE_SATURATION,
        WITHOUT_KV_ONLY_IN_OVERLOAD,
        WITHOUT_ADAPTER_AWARE_QUEUES,
        WITHOUT_DECODE_PACE,
        WITHOUT_HOLD_WHILE_DRAINING,
        WITHOUT_SOJOURN_SENSOR,
    ] {
        out.push(gate.to_owned());
    }
    out
}

/// The picker profile a profile ablation's name stands for; `None` when `name` is not one.
fn policy(name: &str) -> Option<Policy> {
    let part = name.strip_prefix(PREFIX)?;
    let mut p = Profile::infergate();
    p.name = name.to_owned();
    if part == "fresh-load" {
        p.fresh_load = false;
        return Some(Policy::Weighted(p));
    }
    if part == LATENCY_TOLERANCE {
        for s in &mut p.scorers {
            if let Scorer::PredictedLatency { tolerance_s } = &mut s.scorer {
                *tolerance_s = 0.0;
            }
        }
        return Some(Policy::Weighted(p));
    }
    let before = p.scorers.len() + p.filters.len();
    p.scorers.retain(|s| s.scorer.plugin_type() != part);
    p.filters.retain(|f| f.plugin_type() != part);
    (p.scorers.len() + p.filters.len() < before).then_some(Policy::Weighted(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ablation_removes_exactly_one_part() {
        let whole = Profile::infergate();
        let parts = whole.scorers.len() + whole.filters.len();
        for name in names() {
            let Some(ablated) = ablation(&name) else {
                panic!("{name} is not an ablation");
            };
            let Ablation::Pick(Policy::Weighted(p)) = ablated else {
                // Flow control is not a part of the profile.
                assert!(
                    name.starts_with(PREFIX) && policy(&name).is_none(),
                    "{name}"
                );
                continue;
            };
            let left = p.scorers.len() + p.filters.len();
            if name.ends_with("fresh-load") {
                assert_eq!(left, parts);
                assert!(!p.fresh_load);
            } else if name.ends_with(LATENCY_TOLERANCE) {
                // The same scorers, the latency scorer's tolerance alone set to 0.
                assert_eq!(left, parts);
                let latency = |p: &Profile| {
                    p.scorers
                        .iter()
                        .find_map(|s| match s.scorer {
                            Scorer::PredictedLatency { tolerance_s } => Some(tolerance_s),
                            _ => None,
                        })
                        .unwrap()
                };
                assert!(latency(&whole) > 0.0);
                assert_eq!(latency(&p), 0.0);
            } else {
                assert_eq!(left, parts - 1, "{name}");
            }
        }
        assert!(ablation("infergate-without-nothing").is_none());
        assert!(ablation("infergate").is_none());
    }
}
