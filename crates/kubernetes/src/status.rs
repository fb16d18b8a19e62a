//! The `status` infergate writes on its `InferenceGatewayConfig`: a pure function of what the
//! gateway observed, so every condition and state is tested without an API server.
//!
//! | field | meaning |
//! |---|---|
//! | `observedGeneration` | the newest generation of the resource infergate has read (accepted or not) |
//! | condition `Accepted` | `True`: that generation is the config serving now; `False` (reason `Invalid`): it was refused, the message names the field, and the last accepted generation keeps serving |
//! | condition `Ready` | `True` when the serving config's every scheduler is `Available` |
//! | `schedulers[]` | per scheduler of the serving config: endpoints, endpoints scraped at least once, `rolloutState` |
//! | `rolloutState` | `Pending` (discovery has not listed yet), `Progressing` (an endpoint not scraped yet), `Degraded` (the API server is lost: last known endpoints serving), `Available` |
//!
//! A condition keeps its `lastTransitionTime` while its status stays the same.

use serde_json::{json, Value};

/// One scheduler of the serving config, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerObserved {
    /// The scheduler's name.
    pub name: String,
    /// The model it serves.
    pub model_name: String,
    /// Its endpoints now.
    pub endpoints: usize,
    /// Those scraped at least once.
    pub scraped: usize,
}

/// What the gateway observed, from which the status follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The resource's generation as last read.
    pub generation: i64,
    /// The generation serving now; `None` when none was ever accepted.
    pub serving_generation: Option<i64>,
    /// Why the last read generation was refused; `None` when it is the one serving.
    pub rejection: Option<String>,
    /// Discovery has listed once.
    pub discovery_synced: bool,
    /// Empty while discovery is live; otherwise what is wrong.
    pub discovery_problem: String,
    /// The serving config's schedulers.
    pub schedulers: Vec<SchedulerObserved>,
    /// The replica writing this status.
    pub writer: String,
}

/// A scheduler's `rolloutState`.
pub fn rollout_state(o: &Observed, s: &SchedulerObserved) -> &'static str {
    if !o.discovery_synced {
        "Pending"
    } else if !o.discovery_problem.is_empty() {
        "Degraded"
    } else if s.scraped < s.endpoints {
        "Progressing"
    } else {
        "Available"
    }
}

fn condition(
    kind: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: i64,
    previous: &Value,
    now: &str,
) -> Value {
    let status = if status { "True" } else { "False" };
    let before = previous
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c.get("type") == Some(&json!(kind))));
    let since = match before {
        Some(c) if c.get("status") == Some(&json!(status)) => c
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| json!(now)),
        _ => json!(now),
    };
    json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since,
    })
}

/// The status to write, given the one written before (`Value::Null` for none) and the time
/// now (RFC 3339).
pub fn status(o: &Observed, previous: &Value, now: &str) -> Value {
    let accepted = match (&o.rejection, o.serving_generation) {
        (None, _) => condition(
            "Accepted",
            true,
            "Accepted",
            format!("generation {} is serving", o.generation),
            o.generation,
            previous,
            now,
        ),
        (Some(why), Some(serving)) => condition(
            "Accepted",
            false,
            "Invalid",
            format!(
                "generation {} refused: {why}; generation {serving} keeps serving",
                o.generation
            ),
            o.generation,
            previous,
            now,
        ),
        (Some(why), None) => condition(
            "Accepted",
            false,
            "Invalid",
            format!(
                "generation {} refused: {why}; nothing is serving",
                o.generation
            ),
            o.generation,
            previous,
            now,
        ),
    };
    let schedulers: Vec<Value> = o
        .schedulers
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "modelName": s.model_name,
                "endpoints": s.endpoints,
                "readyEndpoints": s.scraped,
                "rolloutState": rollout_state(o, s),
                "currentScheduler": s.name,
            })
        })
        .collect();
    let waiting: Vec<String> = o
        .schedulers
        .iter()
        .filter(|s| rollout_state(o, s) != "Available")
        .map(|s| format!("{} is {}", s.name, rollout_state(o, s)))
        .collect();
    let ready = if o.serving_generation.is_none() {
        condition(
            "Ready",
            false,
            "NoAcceptedConfig",
            "no generation of this resource has been accepted".to_owned(),
            o.generation,
            previous,
            now,
        )
    } else if !o.discovery_synced {
        condition(
            "Ready",
            false,
            "DiscoveryPending",
            "pod discovery has not listed yet".to_owned(),
            o.generation,
            previous,
            now,
        )
    } else if waiting.is_empty() {
        condition(
            "Ready",
            true,
            "Ready",
            format!("{} scheduler(s) available", o.schedulers.len()),
            o.generation,
            previous,
            now,
        )
    } else {
        let mut message = waiting.join(", ");
        if !o.discovery_problem.is_empty() {
            message = format!("{message}: {}", o.discovery_problem);
        }
        condition(
            "Ready",
            false,
            "SchedulersNotAvailable",
            message,
            o.generation,
            previous,
            now,
        )
    };
    json!({
        "observedGeneration": o.generation,
        "conditions": [accepted, ready],
        "schedulers": schedulers,
        "schedulerCount": o.schedulers.len(),
        "endpointCount": o.schedulers.iter().map(|s| s.endpoints).sum::<usize>(),
        "leader": o.writer,
    })
}

/// Whether two statuses say the same, ignoring transition times (so an unchanged gateway does
/// not write every tick).
pub fn same(a: &Value, b: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(cs) = v.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in cs {
                if let Some(o) = c.as_object_mut() {
                    o.remove("lastTransitionTime");
                }
            }
        }
        v
    }
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed() -> Observed {
        Observed {
            generation: 3,
            serving_generation: Some(3),
            rejection: None,
            discovery_synced: true,
            discovery_problem: String::new(),
            schedulers: vec![SchedulerObserved {
                name: "llama-70b".into(),
                model_name: "llama-3.1-70b".into(),
                endpoints: 2,
                scraped: 2,
            }],
            writer: "gw-0".into(),
        }
    }

    fn cond<'a>(s: &'a Value, kind: &str) -> &'a Value {
        s["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
            .expect("condition present")
    }

    #[test]
    fn a_serving_config_with_every_endpoint_scraped_is_accepted_and_ready() {
        let s = status(&observed(), &Value::Null, "2026-12-02T00:00:00Z");
        assert_eq!(s["observedGeneration"], 3);
        assert_eq!(cond(&s, "Accepted")["status"], "True");
        assert_eq!(cond(&s, "Ready")["status"], "True");
        assert_eq!(s["schedulers"][0]["rolloutState"], "Available");
        assert_eq!(s["schedulers"][0]["endpoints"], 2);
        assert_eq!(s["endpointCount"], 2);
    }

    #[test]
    fn a_refused_generation_names_why_and_what_keeps_serving() {
        let mut o = observed();
        o.generation = 4;
        o.rejection = Some("spec.schedulers[0].weights.bogus: unknown field".into());
        let s = status(&o, &Value::Null, "t");
        let a = cond(&s, "Accepted");
        assert_eq!(a["status"], "False");
        assert_eq!(a["reason"], "Invalid");
        let msg = a["message"].as_str().unwrap_or_default();
        assert!(msg.contains("weights.bogus"), "{msg}");
        assert!(msg.contains("generation 3 keeps serving"), "{msg}");
        assert_eq!(s["observedGeneration"], 4);
        // The old config still serves, and is ready.
        assert_eq!(cond(&s, "Ready")["status"], "True");
    }

    #[test]
    fn rollout_states_follow_discovery_and_scrapes() {
        let mut o = observed();
        o.schedulers[0].scraped = 1;
        assert_eq!(rollout_state(&o, &o.schedulers[0]), "Progressing");
        o.discovery_problem = "pods watch failing".into();
        assert_eq!(rollout_state(&o, &o.schedulers[0]), "Degraded");
        o.discovery_synced = false;
        assert_eq!(rollout_state(&o, &o.schedulers[0]), "Pending");
        let s = status(&o, &Value::Null, "t");
        assert_eq!(cond(&s, "Ready")["status"], "False");
        assert_eq!(cond(&s, "Ready")["reason"], "DiscoveryPending");
    }

    #[test]
    fn a_scheduler_with_no_pods_is_still_available() {
        let mut o = observed();
        o.schedulers[0].endpoints = 0;
        o.schedulers[0].scraped = 0;
        let s = status(&o, &Value::Null, "t");
        assert_eq!(cond(&s, "Ready")["status"], "True");
    }

    #[test]
    fn transition_times_stay_while_the_status_does() {
        let first = status(&observed(), &Value::Null, "t1");
        let again = status(&observed(), &first, "t2");
        assert_eq!(cond(&again, "Ready")["lastTransitionTime"], "t1");
        assert!(same(&first, &again));
        let mut o = observed();
        o.schedulers[0].scraped = 0;
        let changed = status(&o, &again, "t3");
        assert_eq!(cond(&changed, "Ready")["lastTransitionTime"], "t3");
        assert_eq!(cond(&changed, "Accepted")["lastTransitionTime"], "t1");
        assert!(!same(&again, &changed));
    }
}
