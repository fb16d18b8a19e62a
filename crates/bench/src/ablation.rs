//! Ablations of infergate's policy: the profile with one component off, each a policy name
//! the runner accepts (`infergate-without-<part>`), so that each component's effect is
//! measured on the same arrivals as the whole.

use infergate_picker::{Filter, Policy, Profile};

/// The prefix of an ablation's name.
pub const PREFIX: &str = "infergate-without-";

/// Every ablation of infergate's default profile: one per scorer and filter (by plugin type)
/// and `fresh-load` (the dispatch credit).
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
    out
}

/// The policy an ablation name stands for; `None` when `name` is not one.
pub fn policy(name: &str) -> Option<Policy> {
    let part = name.strip_prefix(PREFIX)?;
    let mut p = Profile::infergate();
    p.name = name.to_owned();
    if part == "fresh-load" {
        p.fresh_load = false;
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
            let Some(Policy::Weighted(p)) = policy(&name) else {
                panic!("{name} is not an ablation");
            };
            let left = p.scorers.len() + p.filters.len();
            if name.ends_with("fresh-load") {
                assert_eq!(left, parts);
                assert!(!p.fresh_load);
            } else {
                assert_eq!(left, parts - 1, "{name}");
            }
        }
        assert!(policy("infergate-without-nothing").is_none());
        assert!(policy("infergate").is_none());
    }
}
