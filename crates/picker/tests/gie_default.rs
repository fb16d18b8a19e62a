//! `gie-default` picks what upstream GIE would on the same snapshot.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

mod common;

use std::collections::HashSet;

use common::*;
use infergate_picker::{Picker, Policy};

#[test]
fn picks_the_upstream_weighted_maximum_with_fallbacks_in_score_order() {
    let mut p = pool(4);
    // waiting, kv  → queue score (max 10, min 0), kv score
    scrape(&mut p, 0, ms(0), 0, 0.8); //  1.0, 0.2
    scrape(&mut p, 1, ms(0), 4, 0.1); //  0.6, 0.9  (+ prefix 1.0)
    scrape(&mut p, 2, ms(0), 2, 0.3); //  0.8, 0.7
    scrape(&mut p, 3, ms(0), 10, 0.0); // 0.0, 1.0
    let mut picker = Picker::new(Policy::named("gie-default").unwrap(), 1);
    let shared = unique_prompt(1, 640);
    let req = request(&shared);
    // Teach the index that endpoint 1 holds this prompt (learned on dispatch, as upstream does).
    drop(picker.on_dispatch(&p, id(1), &req, ms(1)).unwrap());
    // Totals: e0 2·1 + 2·0.2 = 2.4; e1 2·0.6 + 2·0.9 + 3·1 = 6.0; e2 1.6 + 1.4 = 3.0; e3 0 + 2 = 2.
    let pick = picker.pick(&p, &req, ms(2)).unwrap();
    assert_eq!(pick.primary, id(1));
    assert_eq!(pick.fallbacks, vec![id(2), id(0)]);
}

#[test]
fn partial_prefix_match_scores_its_fraction() {
    let mut p = pool(2);
    scrape(&mut p, 0, ms(0), 0, 0.5);
    scrape(&mut p, 1, ms(0), 1, 0.5);
    let mut picker = Picker::new(Policy::named("gie-default").unwrap(), 1);
    let head = unique_prompt(2, 64 * 4);
    let learned = request(&(head.clone() + &unique_prompt(3, 64 * 4)));
    drop(picker.on_dispatch(&p, id(1), &learned, ms(1)).unwrap());
    // A request sharing 4 of its 8 blocks with what endpoint 1 holds: prefix 0.5.
    // e0: 2·1 + 2·0.5 = 3.0; e1: 2·0 + 2·0.5 + 3·0.5 = 2.5 → e0.
    let half = request(&(head.clone() + &unique_prompt(4, 64 * 4)));
    assert_eq!(picker.pick(&p, &half, ms(2)).unwrap().primary, id(0));
    // Sharing 8 of 8: e1 = 1 + 3 = 4.0 > 3.0 → e1.
    assert_eq!(picker.pick(&p, &learned, ms(2)).unwrap().primary, id(1));
}

#[test]
fn ties_are_broken_at_random_like_upstream() {
    let mut p = pool(3);
    for i in 0..3 {
        scrape(&mut p, i, ms(0), 1, 0.5);
    }
    let mut picker = Picker::new(Policy::named("gie-default").unwrap(), 42);
    let req = request("short");
    let picks: Vec<_> = (0..30)
        .map(|_| picker.pick(&p, &req, ms(1)).unwrap().primary)
        .collect();
    let distinct: HashSet<_> = picks.iter().collect();
    assert_eq!(distinct.len(), 3);
    // Random, not a rotation: some endpoint is picked twice in a row somewhere.
    assert!(picks.windows(2).any(|w| w[0] == w[1]), "{picks:?}");
}

#[test]
fn stale_pods_stay_schedulable_on_their_last_metrics_like_upstream() {
    let mut p = pool(2);
    scrape(&mut p, 0, ms(0), 0, 0.0);
    scrape(&mut p, 1, ms(9_000), 5, 0.9);
    let mut picker = Picker::new(Policy::named("gie-default").unwrap(), 1);
    let pick = picker.pick(&p, &request("x"), ms(10_000)).unwrap();
    assert_eq!(pick.primary, id(0));
    assert!(!pick.metrics_fail_open);
}
