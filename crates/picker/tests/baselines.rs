//! The fixed baseline policies behave as `shared/reference/benchmarks.md` defines them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod common;

use std::collections::HashSet;

use common::*;
use infergate_picker::{Dispatch, Picker, Policy, RequestFeatures};

#[test]
fn round_robin_cycles_and_offers_the_next_ones_as_fallbacks() {
    let p = pool(3);
    let mut picker = Picker::new(Policy::RoundRobin, 1);
    let req = request("x");
    let picks: Vec<_> = (0..6)
        .map(|_| picker.pick(&p, &req, ms(0)).unwrap())
        .collect();
    let primaries: Vec<_> = picks.iter().map(|p| p.primary.0).collect();
    assert_eq!(primaries, vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(picks[1].fallbacks, vec![id(2), id(0)]);
}

#[test]
fn random_reaches_every_endpoint() {
    let p = pool(4);
    let mut picker = Picker::new(Policy::Random, 1);
    let seen: HashSet<_> = (0..100)
        .map(|_| picker.pick(&p, &request("x"), ms(0)).unwrap().primary)
        .collect();
    assert_eq!(seen.len(), 4);
}

#[test]
fn least_request_never_picks_the_busiest_of_two_choices() {
    let p = pool(3);
    let mut picker = Picker::new(Policy::LeastRequest, 1);
    let busy = RequestFeatures::new("m", 10);
    let _held: Vec<Dispatch> = (0..5)
        .map(|_| picker.on_dispatch(&p, id(0), &busy, ms(0)).unwrap())
        .collect();
    let mut counts = [0; 3];
    for _ in 0..200 {
        counts[picker.pick(&p, &request("x"), ms(0)).unwrap().primary.0 as usize] += 1;
    }
    assert_eq!(counts[0], 0, "{counts:?}");
    assert!(counts[1] > 50 && counts[2] > 50, "{counts:?}");
}

#[test]
fn sglang_cache_aware_follows_the_prefix_until_load_is_imbalanced() {
    let p = pool(3);
    let mut picker = Picker::new(Policy::named("sglang-cache-aware").unwrap(), 1);
    let prompt = unique_prompt(1, 64 * 10);
    let req = request(&prompt);
    drop(picker.on_dispatch(&p, id(2), &req, ms(0)).unwrap());
    // A request sharing 4 of 10 blocks (ratio 0.4 > 0.3) goes to the holder.
    let partial = request(&(prompt[..64 * 4].to_owned() + &unique_prompt(2, 64 * 6)));
    assert_eq!(picker.pick(&p, &partial, ms(1)).unwrap().primary, id(2));
    // 2 of 10 (0.2): the smallest tree, the first of the empty ones.
    let weak = request(&(prompt[..64 * 2].to_owned() + &unique_prompt(3, 64 * 8)));
    assert_eq!(picker.pick(&p, &weak, ms(1)).unwrap().primary, id(0));
    // Imbalanced: 70 in flight on the holder (max − min = 70 > 64, 70 > 1.5 × 0).
    let _held: Vec<Dispatch> = (0..70)
        .map(|_| {
            picker
                .on_dispatch(&p, id(2), &RequestFeatures::new("m", 1), ms(1))
                .unwrap()
        })
        .collect();
    assert_eq!(picker.pick(&p, &req, ms(2)).unwrap().primary, id(0));
}

#[test]
fn sglang_cache_aware_below_its_threshold_picks_the_smallest_tree_not_the_least_loaded() {
    let p = pool(2);
    let mut picker = Picker::new(Policy::named("sglang-cache-aware").unwrap(), 1);
    // e0 holds a long prefix; e1 holds nothing but has requests in flight (balanced: 3 < 64).
    drop(
        picker
            .on_dispatch(&p, id(0), &request(&unique_prompt(1, 64 * 40)), ms(0))
            .unwrap(),
    );
    let _held: Vec<Dispatch> = (0..3)
        .map(|_| {
            picker
                .on_dispatch(&p, id(1), &RequestFeatures::new("m", 1), ms(0))
                .unwrap()
        })
        .collect();
    let cold = request(&unique_prompt(9, 64 * 10));
    assert_eq!(picker.pick(&p, &cold, ms(1)).unwrap().primary, id(1));
}

#[test]
fn sglang_cache_aware_matches_the_whole_prompt() {
    // 300 shared blocks, then 300 that differ: beyond the first 256 blocks GIE's index would
    // not look. The holder of all 600 must win over the holder of the first 300.
    let p = pool(3);
    let mut picker = Picker::new(Policy::named("sglang-cache-aware").unwrap(), 1);
    let params = picker.policy().prefix_params();
    assert!(params.max_prefix_blocks >= 600);
    let hashed = |prompt: &str| RequestFeatures {
        prompt_block_hashes: infergate_picker::prefix::hash_prompt(
            "m",
            None,
            prompt.as_bytes(),
            &params,
        ),
        ..RequestFeatures::new("m", (prompt.len() / 4) as u64)
    };
    let shared = unique_prompt(1, 64 * 300);
    let long = hashed(&(shared.clone() + &unique_prompt(2, 64 * 300)));
    let other = hashed(&(shared + &unique_prompt(3, 64 * 300)));
    assert_eq!(long.prompt_block_hashes.len(), 600);
    drop(picker.on_dispatch(&p, id(1), &other, ms(0)).unwrap());
    drop(picker.on_dispatch(&p, id(2), &long, ms(0)).unwrap());
    assert_eq!(picker.pick(&p, &long, ms(1)).unwrap().primary, id(2));
}

#[test]
fn k8s_service_pins_each_connection_to_one_pod_and_reopens_when_it_leaves() {
    let p = pool(8);
    let mut picker = Picker::new(Policy::K8sService { connections: 3 }, 7);
    let req = request("x");
    let picks: Vec<u64> = (0..30)
        .map(|_| picker.pick(&p, &req, ms(0)).unwrap().primary.0)
        .collect();
    // Requests take the connections in turn, and a connection keeps its pod.
    for (i, &e) in picks.iter().enumerate().skip(3) {
        assert_eq!(e, picks[i % 3], "{picks:?}");
    }
    let pods: HashSet<u64> = picks.iter().copied().collect();
    assert!(
        pods.len() <= 3,
        "three connections reach at most three pods"
    );
    // The first connection's pod leaves: that connection lands on a member again.
    let gone = picks[0];
    let staying: Vec<_> = (0..8)
        .filter(|&i| i != gone)
        .map(|i| infergate_picker::EndpointSpec::new(i, format!("10.0.0.{i}:8000")))
        .collect();
    let p = infergate_picker::Pool::new(staying).unwrap();
    let after: Vec<u64> = (0..30)
        .map(|_| picker.pick(&p, &req, ms(0)).unwrap().primary.0)
        .collect();
    assert!(!after.contains(&gone));
    for (i, &e) in after.iter().enumerate().skip(3) {
        assert_eq!(e, after[i % 3], "{after:?}");
    }
}

#[test]
fn requests_go_only_to_endpoints_whose_context_holds_them() {
    let mut p = pool(3);
    for (i, len) in [(0, 4_096), (1, 131_072), (2, 8_192)] {
        let mut m = metrics(ms(0), 0, 0, 0.1);
        m.max_model_len = Some(len);
        p.update_metrics(id(i), m).unwrap();
    }
    for policy in ["round-robin", "random", "sglang-cache-aware", "infergate"] {
        let mut picker = Picker::new(Policy::named(policy).unwrap(), 3);
        let mut req = RequestFeatures::new("m", 6_000);
        req.context_tokens = 7_000;
        for _ in 0..20 {
            let e = picker.pick(&p, &req, ms(1)).unwrap().primary;
            assert!(e == id(1) || e == id(2), "{policy}: {e:?}");
        }
        // With what it may generate it fits only the largest.
        req.context_tokens = 9_000;
        assert_eq!(
            picker.pick(&p, &req, ms(1)).unwrap().primary,
            id(1),
            "{policy}"
        );
        // Fitting none, it goes to the largest, whose server gives the verdict.
        req.context_tokens = 200_000;
        assert_eq!(
            picker.pick(&p, &req, ms(1)).unwrap().primary,
            id(1),
            "{policy}"
        );
    }
}

#[test]
fn dynamo_kv_minimises_new_prefill_plus_active_blocks() {
    let p = pool(2);
    let mut picker = Picker::new(Policy::DynamoKv, 1);
    // 64 blocks of 16 tokens.
    let req = request(&unique_prompt(1, 64 * 64));
    drop(picker.on_dispatch(&p, id(1), &req, ms(0)).unwrap());
    // e0: 64 new + 0 active; e1: 0 new + 0 active → e1.
    assert_eq!(picker.pick(&p, &req, ms(1)).unwrap().primary, id(1));
    // 1,040 tokens in flight on e1 = 65 active blocks: cost 65 > 64 → e0.
    let _held = picker
        .on_dispatch(&p, id(1), &RequestFeatures::new("m", 1040), ms(1))
        .unwrap();
    assert_eq!(picker.pick(&p, &req, ms(2)).unwrap().primary, id(0));
}

#[test]
fn a_request_subset_limits_the_candidates() {
    let mut p = pool(4);
    for i in 0..4 {
        scrape(&mut p, i, ms(0), i * 3, 0.2);
    }
    let mut picker = Picker::new(Policy::infergate(), 1);
    let mut req = request("x");
    req.endpoint_subset = Some(vec!["10.0.0.3:8000".into(), "10.0.0.2:8000".into()]);
    let pick = picker.pick(&p, &req, ms(1)).unwrap();
    assert_eq!(pick.primary, id(2));
    assert_eq!(pick.fallbacks, vec![id(3)]);
    req.endpoint_subset = Some(vec!["10.9.9.9:8000".into()]);
    assert!(picker.pick(&p, &req, ms(1)).is_err());
}
