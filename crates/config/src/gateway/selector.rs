//! Kubernetes label selectors (`modelSelector`) and label syntax, with Kubernetes semantics:
//! every `matchLabels` pair and every `matchExpressions` requirement must hold.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// A label selector as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements.
    #[serde(default)]
    pub match_expressions: Vec<LabelRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// How the label is tested.
    pub operator: SelectorOperator,
    /// Values for `In` and `NotIn` (at least one); empty for `Exists` and `DoesNotExist`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// A `matchExpressions` operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SelectorOperator {
    /// The label is present and its value is one of `values`.
    In,
    /// The label is absent, or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

impl LabelSelector {
    /// Whether an object with these labels is selected. An empty selector selects everything
    /// (Kubernetes semantics; validation refuses an empty `modelSelector`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Whether it has no requirement at all.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Checks key and value syntax and the operator/values pairing; `field` is the selector's
    /// path. Returns the offending field's path and the reason.
    pub fn check(&self, field: &str) -> Result<(), (String, String)> {
        for (key, value) in &self.match_labels {
            let at = format!("{field}.matchLabels.{key}");
            check_label_key(key).map_err(|r| (at.clone(), r))?;
            check_label_value(value).map_err(|r| (at, r))?;
        }
        for (i, req) in self.match_expressions.iter().enumerate() {
            let at = format!("{field}.matchExpressions[{i}]");
            check_label_key(&req.key).map_err(|r| (format!("{at}.key"), r))?;
            let values_at = format!("{at}.values");
            match req.operator {
                SelectorOperator::In | SelectorOperator::NotIn if req.values.is_empty() => {
                    return Err((
                        values_at,
                        format!("{:?} needs at least one value", req.operator),
                    ));
                }
                SelectorOperator::Exists | SelectorOperator::DoesNotExist
                    if !req.values.is_empty() =>
                {
                    return Err((values_at, format!("{:?} takes no values", req.operator)));
                }
                _ => {}
            }
            for (j, v) in req.values.iter().enumerate() {
                check_label_value(v).map_err(|r| (format!("{values_at}[{j}]"), r))?;
            }
        }
        Ok(())
    }
}

impl LabelRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

impl fmt::Display for LabelSelector {
    /// kubectl's selector syntax: `app=vllm-llama,gpu in (a10g,h100),!canary`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            let values = r.values.join(",");
            parts.push(match r.operator {
                SelectorOperator::In => format!("{} in ({values})", r.key),
                SelectorOperator::NotIn => format!("{} notin ({values})", r.key),
                SelectorOperator::Exists => r.key.clone(),
                SelectorOperator::DoesNotExist => format!("!{}", r.key),
            });
        }
        if parts.is_empty() {
            f.write_str("(everything)")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters
/// of `[A-Za-z0-9-_.]` that starts and ends alphanumeric.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if !is_dns_subdomain(prefix) {
            return Err(format!(
                "label key prefix `{prefix}` is not a lowercase DNS subdomain"
            ));
        }
    }
    if name.is_empty() || !is_label_name(name) {
        return Err(format!(
            "label key `{key}` is not valid: the name part must be 1-63 characters of \
             [A-Za-z0-9-_.], starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label value: empty, or at most 63 characters of `[A-Za-z0-9-_.]` starting and ending
/// alphanumeric.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!(
            "label value `{value}` is not valid: at most 63 characters of [A-Za-z0-9-_.], \
             starting and ending with a letter or digit"
        ))
    }
}

fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// An RFC 1123 label: 1-63 characters of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// An RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selector(yaml: &str) -> LabelSelector {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn match_labels_needs_every_pair() {
        let s = selector("matchLabels: {app: vllm-llama, gpu: h100}");
        assert!(s.matches(&labels(&[
            ("app", "vllm-llama"),
            ("gpu", "h100"),
            ("x", "y")
        ])));
        assert!(!s.matches(&labels(&[("app", "vllm-llama"), ("gpu", "a10g")])));
        assert!(!s.matches(&labels(&[("app", "vllm-llama")])));
    }

    #[test]
    fn in_needs_the_label_with_a_listed_value() {
        let s = selector("matchExpressions: [{key: gpu, operator: In, values: [h100, h200]}]");
        assert!(s.matches(&labels(&[("gpu", "h200")])));
        assert!(!s.matches(&labels(&[("gpu", "a10g")])));
        assert!(!s.matches(&labels(&[])));
    }

    #[test]
    fn not_in_accepts_a_missing_label() {
        let s = selector("matchExpressions: [{key: gpu, operator: NotIn, values: [a10g]}]");
        assert!(s.matches(&labels(&[("gpu", "h100")])));
        assert!(s.matches(&labels(&[])));
        assert!(!s.matches(&labels(&[("gpu", "a10g")])));
    }

    #[test]
    fn exists_and_does_not_exist_look_only_at_the_key() {
        let exists = selector("matchExpressions: [{key: canary, operator: Exists}]");
        let absent = selector("matchExpressions: [{key: canary, operator: DoesNotExist}]");
        let with = labels(&[("canary", "")]);
        let without = labels(&[("app", "x")]);
        assert!(exists.matches(&with) && !exists.matches(&without));
        assert!(absent.matches(&without) && !absent.matches(&with));
    }

    #[test]
    fn labels_and_expressions_combine_with_and() {
        let s = selector(
            "matchLabels: {app: vllm-llama}\n\
             matchExpressions:\n\
             - {key: gpu, operator: In, values: [h100]}\n\
             - {key: draining, operator: DoesNotExist}",
        );
        assert!(s.matches(&labels(&[("app", "vllm-llama"), ("gpu", "h100")])));
        assert!(!s.matches(&labels(&[
            ("app", "vllm-llama"),
            ("gpu", "h100"),
            ("draining", "1")
        ])));
        assert!(!s.matches(&labels(&[("app", "other"), ("gpu", "h100")])));
        assert_eq!(s.to_string(), "app=vllm-llama,gpu in (h100),!draining");
    }

    #[test]
    fn an_empty_selector_selects_everything() {
        assert!(LabelSelector::default().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn operator_and_values_must_agree() {
        let s = selector("matchExpressions: [{key: gpu, operator: In, values: []}]");
        let (field, reason) = s.check("sel").unwrap_err();
        assert_eq!(field, "sel.matchExpressions[0].values");
        assert!(reason.contains("at least one"), "{reason}");
        let s = selector("matchExpressions: [{key: gpu, operator: Exists, values: [x]}]");
        assert_eq!(
            s.check("sel").unwrap_err().0,
            "sel.matchExpressions[0].values"
        );
    }

    #[test]
    fn label_syntax_follows_kubernetes() {
        assert!(check_label_key("app").is_ok());
        assert!(check_label_key("llm-d.ai/engine-type").is_ok());
        assert!(check_label_key("inference.networking.k8s.io/bbr-managed").is_ok());
        assert!(check_label_key("Bad_Prefix/x").is_err());
        assert!(check_label_key("-app").is_err());
        assert!(check_label_key("").is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("vllm-llama").is_ok());
        assert!(check_label_value("has space").is_err());
        assert!(check_label_value(&"x".repeat(64)).is_err());
    }

    #[test]
    fn an_unknown_operator_is_refused() {
        let err = serde_norway::from_str::<LabelSelector>(
            "matchExpressions: [{key: gpu, operator: Like, values: [x]}]",
        )
        .unwrap_err();
        assert!(err.to_string().contains("Like"), "{err}");
    }
}
