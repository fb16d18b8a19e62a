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
    // 2 of 10 (0.2): least loaded, the first of the idle ones.
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
