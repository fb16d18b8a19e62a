//! The split: weights, stickiness, exact matching, the rewrite header, the body's new model.

use super::*;
use hyper::header::HeaderValue;
use infergate_config::gateway::Setting;

fn resolved(
    models: &[&str],
    targets: &[(&str, u32)],
    sticky: Option<SessionKey>,
) -> ResolvedRewrite {
    ResolvedRewrite {
        name: Some("canary".into()),
        models: models.iter().map(|m| (*m).to_owned()).collect(),
        targets: targets
            .iter()
            .map(|(t, w)| ((*t).to_owned(), Setting::set(*w)))
            .collect(),
        stickiness: sticky,
    }
}

fn rule(targets: &[(&str, u32)], sticky: Option<SessionKey>) -> Rule {
    Rule::new(&resolved(&["llama"], targets, sticky)).unwrap()
}

fn header_key() -> Option<SessionKey> {
    Some(SessionKey::Header("x-session-id".into()))
}

/// The share of each target over `n` random draws from seed 7.
fn shares(r: &Rule, n: usize) -> HashMap<String, f64> {
    let mut rng = SplitMix64::new(7);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for _ in 0..n {
        *counts
            .entry(r.choose(None, &mut rng).target.to_owned())
            .or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(t, c)| (t, c as f64 / n as f64))
        .collect()
}

#[test]
fn random_draws_split_by_weight() {
    let r = rule(&[("stable", 90), ("canary", 10)], None);
    let s = shares(&r, 100_000);
    assert!((s["canary"] - 0.10).abs() < 0.005, "{s:?}");
    assert!((s["stable"] - 0.90).abs() < 0.005, "{s:?}");

    let r = rule(&[("a", 1), ("b", 1), ("c", 2)], None);
    let s = shares(&r, 100_000);
    for (t, want) in [("a", 0.25), ("b", 0.25), ("c", 0.5)] {
        assert!((s[t] - want).abs() < 0.005, "{t}: {s:?}");
    }

    let only = rule(&[("only", 3)], None);
    assert_eq!(shares(&only, 1000)["only"], 1.0);
    assert_eq!(
        only.targets().collect::<Vec<_>>(),
        vec![("only", 3)],
        "weights read back"
    );
    assert_eq!(
        r.targets().collect::<Vec<_>>(),
        vec![("a", 1), ("b", 1), ("c", 2)]
    );
}

#[test]
fn the_same_seed_replays_the_same_choices() {
    let r = rule(&[("stable", 50), ("canary", 50)], None);
    let run = |seed| {
        let mut rng = SplitMix64::new(seed);
        (0..64)
            .map(|_| r.choose(None, &mut rng).target.to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn the_ends_of_the_weight_space_land_on_the_first_and_last_targets() {
    let r = rule(&[("a", 1), ("b", 1000), ("c", 1)], None);
    assert_eq!(r.at(0), "a");
    assert_eq!(r.at(u64::MAX), "c");
    assert_eq!(r.at(u64::MAX / 2), "b");
}

#[test]
fn a_session_always_gets_the_same_target_and_sessions_split_by_weight() {
    let r = rule(&[("stable", 90), ("canary", 10)], header_key());
    let mut canary = 0;
    let n = 20_000;
    for i in 0..n {
        let id = format!("session-{i}");
        let first = r.choose(Some(&id), &mut SplitMix64::new(1));
        assert!(first.sticky);
        for seed in 2..5 {
            assert_eq!(
                r.choose(Some(&id), &mut SplitMix64::new(seed)),
                first,
                "{id}"
            );
        }
        canary += usize::from(first.target == "canary");
    }
    let share = canary as f64 / n as f64;
    assert!((share - 0.10).abs() < 0.01, "{share}");

    // Without a session id, a sticky rule splits at random; a rule that is not sticky
    // ignores the id.
    let mut rng = SplitMix64::new(3);
    assert!(!r.choose(None, &mut rng).sticky);
    let plain = rule(&[("stable", 90), ("canary", 10)], None);
    assert!(!plain.choose(Some("session-1"), &mut rng).sticky);
}

#[test]
fn growing_the_canary_moves_sessions_onto_it_and_never_off_it() {
    let before = rule(&[("stable", 90), ("canary", 10)], header_key());
    let after = rule(&[("stable", 80), ("canary", 20)], header_key());
    let mut rng = SplitMix64::new(0);
    let (mut moved_on, mut stayed) = (0, 0);
    for i in 0..10_000 {
        let id = format!("user-{i}");
        let was = before.choose(Some(&id), &mut rng).target;
        let is = after.choose(Some(&id), &mut rng).target;
        if was == "canary" {
            assert_eq!(is, "canary", "{id} left the canary");
            stayed += 1;
        } else if is == "canary" {
            moved_on += 1;
        }
    }
    assert!(stayed > 800 && moved_on > 800, "{stayed} {moved_on}");
}

#[test]
fn session_points_are_xxh64_with_seed_zero() {
    // Reference outputs of XXH64 with seed 0, so every replica and version agrees.
    assert_eq!(session_point(""), 0xEF46_DB37_51D8_E999);
    assert_eq!(session_point("a"), 0xD24E_C4F1_A98C_6E5B);
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_static(v));
    }
    h
}

#[test]
fn only_an_exact_match_is_rewritten() {
    let table = Rewrites::new(&[resolved(&["llama", "llama-chat"], &[("llama-v2", 1)], None)]);
    assert!(!table.is_empty());
    let h = HeaderMap::new();
    for model in ["llama", "llama-chat"] {
        let d = table.decide(model, &h, b"{}").unwrap();
        assert_eq!(d.requested, model);
        assert_eq!(d.target, "llama-v2");
        assert_eq!(d.cause, Cause::Rule { sticky: false });
    }
    for other in ["Llama", "llama ", "llam", "llama-chat-2", ""] {
        assert_eq!(table.decide(other, &h, b"{}"), None, "{other:?}");
    }
    assert!(Rewrites::new(&[]).is_empty());
    assert_eq!(table.rule("llama").and_then(Rule::name), Some("canary"));
}

#[test]
fn the_rewrite_header_names_the_target_even_over_a_rule() {
    let table = Rewrites::new(&[resolved(&["llama"], &[("llama-v2", 1)], None)]);
    let h = headers(&[("x-gateway-model-name-rewrite", "llama-v3")]);
    for model in ["llama", "qwen"] {
        let d = table.decide(model, &h, b"{}").unwrap();
        assert_eq!((d.target.as_str(), d.cause), ("llama-v3", Cause::Header));
        assert_eq!(d.requested, model);
    }
    // An empty header is no header.
    let empty = headers(&[("x-gateway-model-name-rewrite", " ")]);
    assert_eq!(
        table.decide("llama", &empty, b"{}").unwrap().target,
        "llama-v2"
    );
    assert_eq!(table.decide("qwen", &empty, b"{}"), None);
}

#[test]
fn a_sticky_rule_reads_the_session_from_its_header_or_body_field() {
    let by_header = Rewrites::new(&[resolved(&["llama"], &[("a", 1), ("b", 1)], header_key())]);
    let h = headers(&[("x-session-id", "s-42")]);
    let d = by_header.decide("llama", &h, b"{}").unwrap();
    assert_eq!(d.cause, Cause::Rule { sticky: true });
    let expected = by_header
        .rule("llama")
        .unwrap()
        .choose(Some("s-42"), &mut SplitMix64::new(0))
        .target;
    for _ in 0..20 {
        assert_eq!(
            by_header.decide("llama", &h, b"{}").unwrap().target,
            expected
        );
    }
    let none = by_header.decide("llama", &HeaderMap::new(), b"{}").unwrap();
    assert_eq!(none.cause, Cause::Rule { sticky: false });

    let key = SessionKey::Field("user".into());
    let h = HeaderMap::new();
    let id = |body: &str| session_id(&key, &h, body.as_bytes());
    assert_eq!(
        id(r#"{"model":"m","user":"alice"}"#).as_deref(),
        Some("alice")
    );
    assert_eq!(id(r#"{"user":"al\u0069ce"}"#).as_deref(), Some("alice"));
    assert_eq!(id(r#"{"user":1234}"#).as_deref(), Some("1234"));
    assert_eq!(id(r#"{"user":""}"#), None);
    assert_eq!(id(r#"{"user":null}"#), None);
    assert_eq!(id(r#"{"meta":{"user":"nested"}}"#), None);
    assert_eq!(id(r#"{"model":"m"}"#), None);
    let hk = SessionKey::Header("x-session-id".into());
    assert_eq!(
        session_id(&hk, &headers(&[("x-session-id", "")]), b"{}"),
        None
    );
}
