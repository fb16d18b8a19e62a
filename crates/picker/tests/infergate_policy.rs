//! The `infergate` policy: fresh load, stale exclusion, LoRA residency, learned latency and prefix
//! affinity that yields to load.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::*;
use infergate_picker::{Dispatch, Picker, Policy, Pool, RequestFeatures};

/// Sends `n` requests between two scrapes (no scrape lands during the burst), keeping every
/// request in flight; returns how many each endpoint got.
fn burst(policy: &str, p: &Pool, n: u64, prompt: impl Fn(u64) -> String) -> Vec<usize> {
    let mut picker = Picker::new(Policy::named(policy).unwrap(), 7);
    let mut counts = vec![0; p.len()];
    let mut in_flight: Vec<Dispatch> = Vec::new();
    for i in 0..n {
        let now = ms(1) + Duration::from_micros(400 * i);
        let req = request(&prompt(i));
        let pick = picker.pick(p, &req, now).unwrap();
        counts[pick.primary.0 as usize] += 1;
        in_flight.push(picker.on_dispatch(p, pick.primary, &req, now).unwrap());
    }
    counts
}

fn four_nearly_equal_endpoints() -> Pool {
    let mut p = pool(4);
    // Equal queues; KV use differs in the second decimal, as it does on any real fleet.
    for (i, kv) in [0.10, 0.11, 0.12, 0.13].into_iter().enumerate() {
        scrape(&mut p, i as u64, ms(0), 0, kv);
    }
    p
}

#[test]
fn a_burst_between_two_scrapes_spreads_within_20_percent() {
    let p = four_nearly_equal_endpoints();
    let counts = burst("infergate", &p, 100, |i| unique_prompt(i, 2000));
    for c in &counts {
        assert!((20..=30).contains(c), "{counts:?}");
    }
    // …while upstream's policy, reading the same 50 ms-old numbers for every request, herds.
    let counts = burst("gie-default", &p, 100, |i| unique_prompt(i, 2000));
    assert!(counts.iter().any(|&c| c >= 90), "{counts:?}");
}

#[test]
fn a_burst_sharing_a_system_prompt_spreads_instead_of_piling_on_the_first_holder() {
    let p = four_nearly_equal_endpoints();
    let system = unique_prompt(999, 4000);
    let prompt = |i| format!("{system}{}", unique_prompt(i, 1000));
    let counts = burst("infergate", &p, 100, prompt);
    for c in &counts {
        assert!((20..=30).contains(c), "{counts:?}");
    }
    let counts = burst("gie-default", &p, 100, prompt);
    assert!(counts.iter().any(|&c| c >= 90), "{counts:?}");
}

#[test]
fn stale_endpoints_are_excluded_and_come_back_when_metrics_resume() {
    let mut p = pool(3);
    scrape(&mut p, 0, ms(0), 0, 0.0); // the best pod, but its metrics stop at t = 0
    scrape(&mut p, 1, ms(1_900), 3, 0.5);
    scrape(&mut p, 2, ms(1_900), 3, 0.5);
    let mut picker = Picker::new(Policy::infergate(), 1);
    let req = request("hello");
    for _ in 0..10 {
        let pick = picker.pick(&p, &req, ms(2_000)).unwrap();
        assert_ne!(pick.primary, id(0));
        assert!(!pick.fallbacks.contains(&id(0)));
        assert!(!pick.metrics_fail_open);
    }
    // Metrics resume: the pod is back at once, and, being idle, preferred.
    scrape(&mut p, 0, ms(2_050), 0, 0.0);
    assert_eq!(picker.pick(&p, &req, ms(2_060)).unwrap().primary, id(0));
}

#[test]
fn when_every_endpoint_is_stale_the_pick_fails_open_without_reading_old_numbers() {
    let mut p = pool(3);
    scrape(&mut p, 0, ms(0), 50, 0.99);
    scrape(&mut p, 1, ms(0), 0, 0.0);
    scrape(&mut p, 2, ms(0), 0, 0.0);
    let mut picker = Picker::new(Policy::infergate(), 1);
    let req = request("hello");
    let mut seen = Vec::new();
    for _ in 0..3 {
        let pick = picker.pick(&p, &req, ms(60_000)).unwrap();
        assert!(pick.metrics_fail_open);
        seen.push(pick.primary);
    }
    // Old numbers are withheld (never read as 0 or as truth): all tie and rotate, the pod that
    // looked overloaded a minute ago included.
    seen.sort();
    assert_eq!(seen, vec![id(0), id(1), id(2)]);
}

#[test]
fn an_endpoint_never_scraped_is_not_picked() {
    let mut p = pool(2);
    scrape(&mut p, 1, ms(0), 40, 0.9);
    let mut picker = Picker::new(Policy::infergate(), 1);
    for _ in 0..5 {
        assert_eq!(
            picker.pick(&p, &request("x"), ms(10)).unwrap().primary,
            id(1)
        );
    }
}

#[test]
fn lora_requests_go_where_the_adapter_is_loaded_then_where_a_slot_is_free() {
    let mut p = pool(3);
    p.update_metrics(
        id(0),
        with_lora(metrics(ms(0), 0, 2, 0.3), 2, &["b", "c"], &[]),
    )
    .unwrap();
    p.update_metrics(id(1), with_lora(metrics(ms(0), 0, 2, 0.3), 2, &["a"], &[]))
        .unwrap();
    p.update_metrics(id(2), with_lora(metrics(ms(0), 0, 2, 0.3), 4, &["b"], &[]))
        .unwrap();
    let mut picker = Picker::new(Policy::infergate(), 1);
    let mut req = request("hi");
    req.target_adapter = Some("a".into());
    assert_eq!(picker.pick(&p, &req, ms(1)).unwrap().primary, id(1));
    req.target_adapter = Some("z".into());
    // Nowhere loaded: the pod with a free slot, not the full one.
    assert_eq!(picker.pick(&p, &req, ms(1)).unwrap().primary, id(2));
}

#[test]
fn a_slower_gpu_is_recognised_from_observed_ttfts_without_labels() {
    for slow in [0u64, 1] {
        let fast = 1 - slow;
        let mut p = pool(2);
        scrape(&mut p, 0, ms(0), 1, 0.3);
        scrape(&mut p, 1, ms(0), 1, 0.3);
        let mut picker = Picker::new(Policy::infergate(), 3);
        for i in 0..40 {
            // Prompt lengths vary, so base cost and prefill rate can be told apart.
            let req = request(&unique_prompt(i, 1000 + 1000 * (i as usize % 8)));
            for (e, secs_per_1k) in [(slow, 0.4), (fast, 0.05)] {
                let d = picker.on_dispatch(&p, id(e), &req, ms(1)).unwrap();
                let t = 0.02 + d.ticket.features.uncached_tokens / 1000.0 * secs_per_1k;
                picker.observe_ttft(&d.ticket, Duration::from_secs_f64(t));
            }
        }
        let slow_rate = picker
            .latency_estimate(id(slow))
            .unwrap()
            .prefill_tokens_per_s;
        let fast_rate = picker
            .latency_estimate(id(fast))
            .unwrap()
            .prefill_tokens_per_s;
        // True rates: 20,000 and 2,500 tokens/s.
        assert!((15_000.0..25_000.0).contains(&fast_rate), "{fast_rate}");
        assert!((2_250.0..2_750.0).contains(&slow_rate), "{slow_rate}");
        let pick = picker
            .pick(&p, &request(&unique_prompt(99, 4000)), ms(2))
            .unwrap();
        assert_eq!(pick.primary, id(fast));
    }
}

#[test]
fn prefix_affinity_holds_under_light_load_and_yields_under_heavy_load() {
    let prompt = unique_prompt(5, 6000);
    let req = request(&prompt);
    for (holder_queue, expect_holder) in [(1, true), (20, false)] {
        let mut p = pool(3);
        scrape(&mut p, 0, ms(0), holder_queue, 0.3);
        scrape(&mut p, 1, ms(0), 0, 0.3);
        scrape(&mut p, 2, ms(0), 0, 0.3);
        for policy in ["infergate", "gie-default"] {
            let mut picker = Picker::new(Policy::named(policy).unwrap(), 1);
            drop(picker.on_dispatch(&p, id(0), &req, ms(1)).unwrap());
            let got = picker.pick(&p, &req, ms(2)).unwrap().primary == id(0);
            if policy == "infergate" {
                assert_eq!(got, expect_holder, "queue {holder_queue}");
            } else {
                // Upstream keeps piling onto the holder however long its queue.
                assert!(got, "gie-default, queue {holder_queue}");
            }
        }
    }
}

#[test]
fn kv_headroom_keeps_requests_off_a_pod_about_to_preempt() {
    let mut p = pool(2);
    let mut full = metrics(ms(0), 0, 30, 0.90);
    full.block_size = Some(16);
    full.num_gpu_blocks = Some(1000);
    let mut roomy = metrics(ms(0), 1, 10, 0.40);
    roomy.block_size = Some(16);
    roomy.num_gpu_blocks = Some(1000);
    p.update_metrics(id(0), full).unwrap();
    p.update_metrics(id(1), roomy).unwrap();
    let mut picker = Picker::new(Policy::infergate(), 1);
    // 8,000 bytes ≈ 2,000 tokens: 12.5 % of a 16,000-token cache.
    let req: RequestFeatures = request(&unique_prompt(1, 8000));
    assert_eq!(picker.pick(&p, &req, ms(1)).unwrap().primary, id(1));
}

#[test]
fn prefix_index_memory_is_bounded_by_each_endpoints_kv_size_and_reported() {
    let mut p = pool(2);
    let mut small = metrics(ms(0), 0, 0, 0.1);
    small.block_size = Some(16);
    small.num_gpu_blocks = Some(10); // room for 10 index blocks
    p.update_metrics(id(0), small).unwrap();
    scrape(&mut p, 1, ms(0), 0, 0.1);
    let mut picker = Picker::new(Policy::infergate(), 1);
    for i in 0..20 {
        let req = request(&unique_prompt(i, 64 * 8));
        drop(picker.on_dispatch(&p, id(0), &req, ms(1)).unwrap());
        drop(picker.on_dispatch(&p, id(1), &req, ms(1)).unwrap());
    }
    let stats = picker.prefix_index_stats(&p);
    assert_eq!(stats[0].0, id(0));
    assert_eq!((stats[0].1.entries, stats[0].1.capacity), (10, 10));
    // No cache size reported: upstream's default capacity, nothing evicted yet.
    assert_eq!((stats[1].1.entries, stats[1].1.capacity), (160, 31_250));
    assert!(stats[1].1.approx_bytes > stats[0].1.approx_bytes);
    // Round-robin never reads the index, so it does not grow one.
    let mut rr = Picker::new(Policy::RoundRobin, 1);
    drop(
        rr.on_dispatch(&p, id(0), &request(&unique_prompt(1, 640)), ms(1))
            .unwrap(),
    );
    assert_eq!(rr.prefix_index_hashes(), 0);
}

#[test]
fn a_prefix_match_stays_with_its_endpoint_through_filters_selectors_and_subsets() {
    // Six equal endpoints; endpoint 4 holds the prompt's prefix, endpoint 0 is stale (dropped by
    // the filter after the match is read, so the rows behind it move up), and only 1, 3, 4, 5
    // carry the label.
    let specs = (0..6u64)
        .map(|i| {
            let gpu = if [1, 3, 4, 5].contains(&i) {
                "h100"
            } else {
                "a10g"
            };
            infergate_picker::EndpointSpec::new(i, format!("10.0.0.{i}:8000"))
                .with_label("gpu", gpu)
        })
        .collect();
    let mut p = Pool::new(specs).unwrap();
    let prompt = unique_prompt(5, 4_000);
    let req = request(&prompt);
    let with_selector = {
        let mut profile = infergate_picker::Profile::infergate();
        profile
            .filters
            .push(infergate_picker::Filter::LabelSelector {
                match_labels: [("gpu".to_owned(), "h100".to_owned())].into(),
            });
        Policy::Weighted(profile)
    };
    for policy in [Policy::infergate(), with_selector] {
        let mut picker = Picker::new(policy, 3);
        // The earlier request's guard is dropped and a scrape lands after it: no load credit
        // anywhere, so only the prefix (and the latency it saves) tells the endpoints apart.
        drop(picker.on_dispatch(&p, id(4), &req, ms(1_400)).unwrap());
        scrape(&mut p, 0, ms(0), 0, 0.2);
        for i in 1..6 {
            scrape(&mut p, i, ms(1_500), 0, 0.2);
        }
        assert_eq!(
            picker.predicted_prefix_blocks(id(4), &req),
            req.prompt_block_hashes.len()
        );
        assert_eq!(picker.predicted_prefix_blocks(id(5), &req), 0);
        assert_eq!(picker.pick(&p, &req, ms(1_600)).unwrap().primary, id(4));
        let mut subset = req.clone();
        subset.endpoint_subset = Some(vec![
            "10.0.0.5:8000".into(),
            "10.0.0.4:8000".into(),
            "10.0.0.0:8000".into(),
        ]);
        assert_eq!(picker.pick(&p, &subset, ms(1_600)).unwrap().primary, id(4));
        // Membership changes and every endpoint changes position: what was learned follows the
        // endpoint's id.
        let mut reversed = p.specs().to_vec();
        reversed.reverse();
        let q = p.with_members(reversed).unwrap();
        assert_eq!(q.position(id(4)), Some(1));
        assert_eq!(picker.pick(&q, &req, ms(1_600)).unwrap().primary, id(4));
        assert_eq!(picker.pick(&q, &subset, ms(1_600)).unwrap().primary, id(4));
    }
}

#[test]
fn a_long_prefill_in_flight_is_work_ahead_until_its_first_token() {
    let mut p = pool(2);
    scrape(&mut p, 0, ms(0), 0, 0.3);
    scrape(&mut p, 1, ms(0), 0, 0.3);
    let mut picker = Picker::new(Policy::infergate(), 5);
    // One request each since the scrape, so request counts are equal: a cold 7,000-token prompt
    // on endpoint 0, a 250-token one on endpoint 1.
    let mut long = picker
        .on_dispatch(&p, id(0), &request(&unique_prompt(1, 28_000)), ms(1))
        .unwrap();
    let mut short = picker
        .on_dispatch(&p, id(1), &request(&unique_prompt(2, 1_000)), ms(1))
        .unwrap();
    let next = request(&unique_prompt(3, 2_000));
    assert_eq!(picker.pick(&p, &next, ms(2)).unwrap().primary, id(1));
    // The long prompt's first token came: endpoint 0 is decoding it, with no prefill ahead,
    // while endpoint 1 still has the short one's.
    long.guard.first_token();
    assert_eq!(picker.pick(&p, &next, ms(3)).unwrap().primary, id(0));
    short.guard.first_token();
    // A buffered (non-streaming) request's prefill is not counted: nobody would release it.
    let buffered = RequestFeatures {
        buffered_response: true,
        ..request(&unique_prompt(4, 28_000))
    };
    let _d = picker.on_dispatch(&p, id(1), &buffered, ms(4)).unwrap();
    let ahead = picker
        .on_dispatch(&p, id(0), &next, ms(4))
        .unwrap()
        .ticket
        .features
        .prefill_ahead;
    assert_eq!(ahead, 0.0);
    assert_eq!(p.counters(id(1)).unwrap().prefill_pending_tokens(), 0);
}

#[test]
fn a_wait_for_a_lora_slot_does_not_teach_the_latency_model_that_the_endpoint_is_slow() {
    let mut p = pool(1);
    p.update_metrics(
        id(0),
        with_lora(metrics(ms(0), 0, 2, 0.3), 1, &["hot"], &[]),
    )
    .unwrap();
    let mut picker = Picker::new(Policy::infergate(), 9);
    let teach = |picker: &mut Picker, adapter: &str, secs: f64| {
        let req = RequestFeatures {
            target_adapter: Some(adapter.into()),
            ..request(&unique_prompt(7, 4_000))
        };
        let d = picker.on_dispatch(&p, id(0), &req, ms(1)).unwrap();
        picker.observe_ttft(&d.ticket, Duration::from_secs_f64(secs));
        d.ticket.teaches
    };
    // A request for an adapter not running there waited 30 s for the one slot: not learned.
    assert!(!teach(&mut picker, "rare", 30.0));
    let after = picker.latency_estimate(id(0)).unwrap();
    assert_eq!(after.observations, 0.0);
    assert!(after.base_s < 1.0, "{after:?}");
    // One for the resident adapter is learned.
    assert!(teach(&mut picker, "hot", 0.05));
    assert!(picker.latency_estimate(id(0)).unwrap().observations > 0.0);
}
