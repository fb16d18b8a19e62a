//! Where requests go: Envoy sends each request where infergate's picker said, moves down the
//! picker's list when the primary is down, and infergate honours Envoy's subset hints.

use crate::client::{chat, post};
use crate::setup::{one_pool, sim, TempDir};
use crate::upstream::Replica;

const CHAT: &str = "/v1/chat/completions";

/// A prompt long enough to span several prefix blocks, so the prefix index can recognise it.
fn long_prompt(seed: &str) -> String {
    format!(
        "{seed}: {}",
        "tell me about prefix caches and batching. ".repeat(12)
    )
}

/// Scores only the prefix, so repeated prompts go where the first one went; with every other
/// scorer off the test does not depend on load figures.
const PREFIX_ONLY: &str = "      weights: {queue: 0, kvCache: 0, prefix: 1}\n";

#[test]
fn routing_follows_the_picker() {
    let replicas: Vec<_> = (0..3).map(|_| sim("llama")).collect();
    let addrs: Vec<_> = replicas.iter().map(|(a, _)| *a).collect();
    let (picker, envoy) = one_pool(&addrs, PREFIX_ONLY, "");
    let prompt = long_prompt("affinity");
    let mut served = Vec::new();
    for _ in 0..6 {
        let r = post(envoy.port, CHAT, &[], &chat("llama", &prompt));
        assert_eq!(r.status, 200, "{}", r.text());
        served.push(r.served());
    }
    let first = served[0].clone();
    assert!(
        served.iter().all(|s| *s == first),
        "one prompt, one replica: {served:?}"
    );
    assert!(addrs.iter().any(|a| a.to_string() == first));

    // Envoy's own counters agree: every request went to the picked replica, none elsewhere.
    let hosts = envoy.host_requests("llama");
    assert_eq!(hosts.len(), 3, "{hosts:?}");
    for (host, n) in hosts {
        let want = if host == first { 6 } else { 0 };
        assert_eq!(n, want, "{host}");
    }
    let decided =
        format!("infergate_routing_decisions_total{{pool=\"llama\",endpoint=\"{first}\"}}");
    assert_eq!(picker.metric(&decided), 6.0);
    let answered = format!(
        "infergate_requests_total{{model=\"llama\",pool=\"llama\",endpoint=\"{first}\",status=\"200\"}}"
    );
    assert_eq!(picker.metric(&answered), 6.0);
    assert_eq!(picker.metric("infergate_in_flight_responses"), 0.0);
}

/// [`PREFIX_ONLY`] as an `EndpointPickerConfig` whose stale filter keeps an endpoint for a
/// minute after its last scrape, with the default two fallbacks.
const PREFIX_ONLY_SLOW_TO_STALE: &str = "plugins:
  - {type: stale-metrics-filter, parameters: {maxAge: 60s}}
  - {type: prefix-cache-scorer}
  - {type: max-score-picker, parameters: {maxNumOfEndpoints: 3}}
";

#[test]
fn a_dead_primary_falls_back_down_the_pickers_list() {
    let mut replicas: Vec<_> = (0..3).map(|_| sim("llama")).collect();
    let addrs: Vec<_> = replicas.iter().map(|(a, _)| *a).collect();
    // The dead primary must still be picked when the request after its death arrives, however
    // long a loaded machine takes to send it: its metrics stay fresh for a minute, not the
    // default second.
    let dir = TempDir::new("epp");
    let epp = dir.path().join("picker.yaml");
    std::fs::write(&epp, PREFIX_ONLY_SLOW_TO_STALE).unwrap();
    let scheduler = format!("      pickerConfigFile: {:?}\n", epp.display().to_string());
    let (picker, envoy) = one_pool(&addrs, &scheduler, "");
    let prompt = long_prompt("fallback");
    let first = post(envoy.port, CHAT, &[], &chat("llama", &prompt));
    assert_eq!(first.status, 200, "{}", first.text());
    let primary = first.served();
    assert_eq!(
        post(envoy.port, CHAT, &[], &chat("llama", &prompt)).served(),
        primary
    );

    // The primary dies. Its last metrics stay fresh, so the picker still puts it first; Envoy
    // finds it down and takes the next address of the list.
    let dead = replicas
        .iter()
        .position(|(a, _)| a.to_string() == primary)
        .unwrap();
    drop(replicas.remove(dead));
    let r = post(envoy.port, CHAT, &[], &chat("llama", &prompt));
    assert_eq!(r.status, 200, "{}", r.text());
    let fallback = r.served();
    assert_ne!(fallback, primary);
    assert!(addrs.iter().any(|a| a.to_string() == fallback));
    assert!(envoy.stat("cluster.llama.upstream_rq_retry") >= 1);
    // infergate decided the dead primary three times and learned that the fallback served.
    let decisions = |e: &str| {
        picker.metric(&format!(
            "infergate_routing_decisions_total{{pool=\"llama\",endpoint=\"{e}\"}}"
        ))
    };
    assert_eq!(decisions(&primary), 3.0);
    assert_eq!(decisions(&fallback), 1.0);
    let answered = format!(
        "infergate_requests_total{{model=\"llama\",pool=\"llama\",endpoint=\"{fallback}\",status=\"200\"}}"
    );
    assert_eq!(picker.metric(&answered), 1.0);
    assert_eq!(picker.metric("infergate_in_flight_responses"), 0.0);
}

#[test]
fn subset_hints_in_both_encodings_and_an_empty_one_is_503() {
    let replicas: Vec<Replica> = ["a", "b", "c"].iter().map(|n| Replica::start(n)).collect();
    let addrs: Vec<_> = replicas.iter().map(|r| r.addr).collect();
    let (_picker, envoy) = one_pool(&addrs, "", "");
    let body = chat("llama", "hello");
    let (b, c) = (addrs[1].to_string(), addrs[2].to_string());
    for (header, value, want) in [
        ("x-test-subset-list", b.as_str(), "b"),
        ("x-test-subset", c.as_str(), "c"),
    ] {
        for _ in 0..4 {
            let r = post(envoy.port, CHAT, &[(header, value)], &body);
            assert_eq!(r.status, 200, "{header}: {}", r.text());
            assert_eq!(r.header("x-replica"), Some(want), "{header}");
            assert_eq!(r.served(), value);
        }
    }
    // Two entries as a list, and a bare IP (every port on it) as a string.
    let two = format!("{},{}", addrs[0], addrs[1]);
    for _ in 0..4 {
        let r = post(envoy.port, CHAT, &[("x-test-subset-list", &two)], &body);
        assert!(matches!(r.header("x-replica"), Some("a" | "b")), "{r:?}");
    }
    let r = post(envoy.port, CHAT, &[("x-test-subset", "127.0.0.1")], &body);
    assert_eq!(r.status, 200, "{}", r.text());

    // Empty, or naming nothing in the pool: 503, and no replica sees the request.
    let before: usize = replicas.iter().map(Replica::requests).sum();
    for nothing in ["", "10.1.2.3:8000", "10.1.2.3"] {
        let r = post(envoy.port, CHAT, &[("x-test-subset", nothing)], &body);
        assert_eq!(r.status, 503, "{nothing:?}: {}", r.text());
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"]["code"], "no_endpoint", "{v}");
    }
    let r = post(
        envoy.port,
        CHAT,
        &[("x-test-subset-list", "10.1.2.3:8000")],
        &body,
    );
    assert_eq!(r.status, 503, "{}", r.text());
    let after: usize = replicas.iter().map(Replica::requests).sum();
    assert_eq!(after, before);
}
