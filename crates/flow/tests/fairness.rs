//! Fair sharing among the tenants of a band while the pool holds requests back: a tenant that
//! offers ten times as much gets no more than its share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{config, ms, pool_at, req};
use infergate_config::gateway::{Band, Fairness};
use infergate_flow::{Admission, FlowConfig, FlowController, Outcome};

/// Runs `ticks` of 10 ms: each tenant offers its requests, the pool stays at the Standard
/// ceiling and finishes `capacity` requests per tick, so exactly that many queued requests go.
/// Returns dispatches per tenant, counted only while every tenant still had a backlog.
fn run(
    cfg: FlowConfig,
    offered: &[(&str, u64)],
    capacity: usize,
    ticks: u64,
) -> BTreeMap<String, u64> {
    let mut f = FlowController::new(cfg);
    let mut next = 0u64;
    let mut tenant_of = BTreeMap::new();
    let mut backlog: BTreeMap<&str, i64> = offered.iter().map(|&(t, _)| (t, 0)).collect();
    let mut served: BTreeMap<String, u64> = BTreeMap::new();
    for tick in 0..ticks {
        let now = ms(10 * tick);
        f.observe(pool_at(1.0), now);
        for &(tenant, n) in offered {
            for _ in 0..n {
                let a = f
                    .enqueue(req(next, Band::Standard, tenant, 100), now)
                    .unwrap();
                assert!(matches!(a, Admission::Queued { .. }), "{a:?}");
                tenant_of.insert(next, tenant);
                *backlog.get_mut(tenant).unwrap() += 1;
                next += 1;
            }
        }
        for _ in 0..capacity {
            f.on_complete(now);
        }
        let decisions = f.poll(now);
        assert_eq!(decisions.len(), capacity);
        let all_backlogged = backlog.values().all(|&b| b > 0);
        for d in decisions {
            assert_eq!(d.outcome, Outcome::Dispatch);
            let tenant = tenant_of[&d.id];
            *backlog.get_mut(tenant).unwrap() -= 1;
            if all_backlogged {
                *served.entry(tenant.to_owned()).or_default() += 1;
            }
        }
    }
    served
}

fn roomy() -> FlowConfig {
    config(100_000, 1 << 40, Duration::from_secs(3_600))
}

#[test]
fn two_tenants_offering_ten_to_one_share_equally_while_both_are_backlogged() {
    let served = run(roomy(), &[("big", 20), ("small", 2)], 2, 200);
    assert_eq!(served["big"], 200, "{served:?}");
    assert_eq!(served["small"], 200, "{served:?}");
}

#[test]
fn weighted_fair_queueing_shares_by_weight() {
    let mut cfg = roomy();
    cfg.fairness = Fairness::WeightedFair;
    cfg.tenant_weights = BTreeMap::from([("gold".to_owned(), 3)]);
    // Both offer more than their share of 4 per tick; gold weighs 3, bronze 1.
    let served = run(cfg, &[("gold", 10), ("bronze", 10)], 4, 100);
    assert_eq!(served["gold"], 300, "{served:?}");
    assert_eq!(served["bronze"], 100, "{served:?}");
}

#[test]
fn round_robin_ignores_how_much_each_of_many_tenants_offers() {
    let offered = [("a", 1), ("b", 3), ("c", 9), ("d", 27), ("e", 81)];
    let served = run(roomy(), &offered, 5, 100);
    for (tenant, _) in offered {
        assert_eq!(served[tenant], 100, "{served:?}");
    }
}

#[test]
fn a_tenant_with_little_to_send_is_served_at_once_behind_a_flood() {
    let mut f = FlowController::new(roomy());
    f.observe(pool_at(1.0), ms(0));
    for id in 0..1_000 {
        f.enqueue(req(id, Band::Standard, "flood", 10), ms(0))
            .unwrap();
    }
    f.enqueue(req(5_000, Band::Standard, "quiet", 10), ms(1))
        .unwrap();
    f.on_complete(ms(2));
    f.on_complete(ms(2));
    let ids: Vec<u64> = f.poll(ms(2)).iter().map(|d| d.id).collect();
    assert_eq!(ids, vec![0, 5_000]);
}
