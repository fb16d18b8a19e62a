//! Rules of `spec.schedulers[]`.

use std::collections::{BTreeMap, BTreeSet};

use super::{check_port, Findings, Result};
use crate::gateway::defaults::limits;
use crate::gateway::deploy::EnvVar;
use crate::gateway::error::invalid;
use crate::gateway::lora::check_name;
use crate::gateway::scheduler::{SchedulerKind, SchedulerSpec};
use crate::gateway::selector::is_dns_label;
use crate::gateway::types::GatewaySpec;

/// Checks each scheduler and the rules across them. `statik`: endpoints come from
/// `spec.endpoints`, so nothing can be read from a ConfigMap.
pub(super) fn check_all(spec: &GatewaySpec, statik: bool) -> Result {
    let n = spec.schedulers.len();
    if n == 0 || n > limits::SCHEDULERS {
        return Err(invalid(
            "spec.schedulers",
            format!("needs 1..{} schedulers, got {n}", limits::SCHEDULERS),
        ));
    }
    let mut found = Findings::default();
    if let Some(pod) = &spec.pod_defaults {
        found.note(check_env(&pod.env, "spec.podDefaults.env"));
    }
    let mut names = BTreeMap::new();
    let mut models = BTreeMap::new();
    for (i, s) in spec.schedulers.iter().enumerate() {
        let at = |f: &str| format!("spec.schedulers[{i}].{f}");
        found.note(check_one(s, statik, &at));
        if let Some(o) = &s.outlier_detection {
            found.note(crate::gateway::outlier::check(o, &at));
        }
        if let Some(first) = names.insert(s.name.as_str(), i) {
            found.note::<()>(Err(invalid(
                at("name"),
                format!(
                    "`{}` is already the name of spec.schedulers[{first}]; names are unique",
                    s.name
                ),
            )));
        }
        if let Some(first) = models.insert(s.model_name.as_str(), i) {
            found.note::<()>(Err(invalid(
                at("modelName"),
                format!(
                    "`{}` is already served by spec.schedulers[{first}]; modelName is unique \
                     across schedulers",
                    s.model_name
                ),
            )));
        }
    }
    found.finish()
}

fn check_one(s: &SchedulerSpec, statik: bool, at: &dyn Fn(&str) -> String) -> Result {
    if s.name.chars().count() > limits::SCHEDULER_NAME_LEN {
        return Err(invalid(
            at("name"),
            format!(
                "`{}` is longer than {} characters",
                s.name,
                limits::SCHEDULER_NAME_LEN
            ),
        ));
    }
    if !is_dns_label(&s.name) {
        return Err(invalid(
            at("name"),
            format!(
                "`{}` must be a lowercase RFC 1123 label ([a-z0-9-], starting and ending with a \
                 letter or digit): it names Kubernetes objects",
                s.name
            ),
        ));
    }
    check_name(&s.model_name, limits::MODEL_NAME_LEN).map_err(|r| invalid(at("modelName"), r))?;
    if s.model_selector.is_empty() {
        return Err(invalid(
            at("modelSelector"),
            "must name at least one label (matchLabels or matchExpressions); an empty selector \
             would select every endpoint",
        ));
    }
    s.model_selector
        .check(&at("modelSelector"))
        .map_err(|(field, reason)| invalid(field, reason))?;
    check_port(s.target_port, &at("targetPort"))?;
    check_picker_source(s, statik, at)?;
    check_adapters(s, at)?;
    if s.replicas == Some(0) {
        return Err(invalid(at("replicas"), "must be at least 1"));
    }
    if let Some(level) = s.log_level.filter(|l| *l > limits::LOG_LEVEL) {
        return Err(invalid(
            at("logLevel"),
            format!("must be 0..{}, got {level}", limits::LOG_LEVEL),
        ));
    }
    check_env(&s.env, &at("env"))?;
    if let Some(pod) = &s.pod_defaults {
        check_env(&pod.env, &at("podDefaults.env"))?;
    }
    Ok(())
}

/// `weights`, `configMapRef` and `pickerConfigFile` are three ways to say one thing.
fn check_picker_source(s: &SchedulerSpec, statik: bool, at: &dyn Fn(&str) -> String) -> Result {
    if s.weights.is_some() && s.config_map_ref.is_some() {
        return Err(invalid(
            at("configMapRef"),
            "weights and configMapRef are mutually exclusive",
        ));
    }
    if let Some(other) = [
        s.weights.is_some().then_some("weights"),
        s.config_map_ref.is_some().then_some("configMapRef"),
    ]
    .into_iter()
    .flatten()
    .next()
    {
        if s.picker_config_file.is_some() {
            return Err(invalid(
                at("pickerConfigFile"),
                format!("{other} and pickerConfigFile are mutually exclusive"),
            ));
        }
    }
    if let Some(other) = [
        s.weights.is_some().then_some("weights"),
        s.config_map_ref.is_some().then_some("configMapRef"),
        s.picker_config_file.is_some().then_some("pickerConfigFile"),
    ]
    .into_iter()
    .flatten()
    .next()
    {
        if s.policy.is_some() {
            return Err(invalid(
                at("policy"),
                format!("{other} and policy are mutually exclusive"),
            ));
        }
    }
    if s.policy.as_deref() == Some("") {
        return Err(invalid(at("policy"), "must name a policy"));
    }
    if let Some(w) = &s.weights {
        let kind = s.scheduler.unwrap_or(crate::gateway::defaults::SCHEDULER);
        if w.lru.is_some_and(|l| l > 0) && kind != SchedulerKind::LlmD {
            return Err(invalid(
                at("weights.lru"),
                format!(
                    "the lru scorer exists only with scheduler: llm-d (this one is {})",
                    kind.as_str()
                ),
            ));
        }
    }
    if let Some(r) = &s.config_map_ref {
        if r.name.is_empty() {
            return Err(invalid(at("configMapRef.name"), "must not be empty"));
        }
        if r.key.as_deref() == Some("") {
            return Err(invalid(at("configMapRef.key"), "must not be empty"));
        }
        if statik {
            return Err(invalid(
                at("configMapRef"),
                "a ConfigMap can only be read with kubernetes discovery; a standalone gateway \
                 takes the same EndpointPickerConfig from pickerConfigFile",
            ));
        }
    }
    if s.picker_config_file.as_deref() == Some("") {
        return Err(invalid(at("pickerConfigFile"), "must be a path"));
    }
    Ok(())
}

fn check_adapters(s: &SchedulerSpec, at: &dyn Fn(&str) -> String) -> Result {
    if s.lora_adapters.len() > limits::LORA_ADAPTERS {
        return Err(invalid(
            at("loraAdapters"),
            format!(
                "at most {} adapters per scheduler, got {}",
                limits::LORA_ADAPTERS,
                s.lora_adapters.len()
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    for (j, a) in s.lora_adapters.iter().enumerate() {
        let field = at(&format!("loraAdapters[{j}]"));
        check_name(a, limits::ADAPTER_NAME_LEN).map_err(|r| invalid(&field, r))?;
        if !seen.insert(a) {
            return Err(invalid(field, format!("`{a}` is listed twice")));
        }
    }
    Ok(())
}

fn check_env(env: &[EnvVar], field: &str) -> Result {
    let mut seen = BTreeSet::new();
    for (i, var) in env.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if var.name.is_empty() {
            return Err(invalid(format!("{at}.name"), "must not be empty"));
        }
        if !seen.insert(&var.name) {
            return Err(invalid(
                format!("{at}.name"),
                format!("`{}` is set twice", var.name),
            ));
        }
        if var.value.is_some() && var.value_from.is_some() {
            return Err(invalid(
                format!("{at}.valueFrom"),
                "value and valueFrom are mutually exclusive",
            ));
        }
    }
    Ok(())
}
