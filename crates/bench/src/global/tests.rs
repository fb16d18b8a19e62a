use super::*;
use crate::report::Slo;

fn one_run(id: &str, policy: GlobalPolicy, load: f64, seconds: u64, seed: u64) -> GlobalResult {
    let scenario = scenario::by_id(id).expect("scenario");
    let capacity = capacity(&scenario).expect("capacity");
    let duration = Duration::from_secs(seconds);
    let arrivals = arrivals(&scenario, &capacity, load, duration, seed).expect("arrivals");
    let options = RunOptions {
        duration,
        seed,
        ..RunOptions::default()
    };
    run(
        &scenario,
        policy,
        &arrivals,
        &capacity,
        &options,
        &Slo::default(),
    )
    .expect("run")
}

#[test]
fn every_scenario_writes_a_tier_config_the_config_crate_accepts() {
    for s in scenario::all() {
        let with_cost = s.tier_config(true).expect("valid with prices");
        assert_eq!(with_cost.members.len(), s.clusters.len(), "{}", s.id);
        assert!(with_cost.members.iter().all(|m| m.cost.is_some()));
        let without = s.tier_config(false).expect("valid without prices");
        assert!(without.members.iter().all(|m| m.cost.is_none()));
        assert!(
            with_cost.region_latencies.farthest().is_some(),
            "{}: round trips configured",
            s.id
        );
        if let Some(f) = s.fault {
            assert!(
                s.cluster_index(f.cluster).is_some(),
                "{}: faulty cluster",
                s.id
            );
            assert!(0.0 < f.from && f.from < f.until && f.until < 1.0);
        }
    }
}

#[test]
fn a_run_replays_exactly_from_its_seed() {
    let a = one_run("east-heavy-8b", GlobalPolicy::Global, 0.6, 20, 3);
    let b = one_run("east-heavy-8b", GlobalPolicy::Global, 0.6, 20, 3);
    assert_eq!(a, b);
    let c = one_run("east-heavy-8b", GlobalPolicy::Global, 0.6, 20, 4);
    assert_ne!(
        a.figures.ttft_ms, c.figures.ttft_ms,
        "another seed, other arrivals"
    );
}

#[test]
fn a_cut_off_cluster_gets_no_new_attempt_within_five_seconds_and_only_its_own_requests_fail() {
    for policy in GlobalPolicy::ALL {
        let r = one_run("three-regions-8b", policy, 0.6, 60, 1);
        let last = r
            .last_attempt_at_faulty_s
            .expect("the scenario has a fault");
        // Three missed pulls of 1 s (each timing out after 0.5 s), at most one more interval
        // for the pull to come due, and an attempt already waiting its 1 s connect timeout.
        assert!(
            last <= 5.0,
            "{}: last attempt {last:.2} s after the cut",
            policy.name()
        );
        // Requests that reached no member all found another: none failed unstarted.
        assert_eq!(r.failed_unstarted, 0, "{}", policy.name());
        // Those held by the cluster when it was cut fail (their callers see an error event);
        // nothing else does.
        assert!(
            r.failed_in_flight > 0,
            "{}: the cut lost what it held",
            policy.name()
        );
        assert_eq!(
            r.failed,
            r.failed_in_flight + r.failed_unstarted,
            "{}",
            policy.name()
        );
    }
}

#[test]
fn the_baselines_do_what_their_names_say() {
    // Weighted round-robin: each cluster's share of requests follows its size (2, 2 and 6
    // replicas), wherever the callers are.
    let rr = one_run("east-heavy-8b", GlobalPolicy::RoundRobin, 0.4, 30, 1);
    let shares: Vec<f64> = rr.cluster_shares.iter().map(|(_, s)| *s).collect();
    for (got, want) in shares.iter().zip([0.2, 0.2, 0.6]) {
        assert!((got - want).abs() < 0.03, "{shares:?}");
    }
    // Nearest region: with every cluster up, no request leaves its caller's region.
    let near = one_run("east-heavy-8b", GlobalPolicy::NearestRegion, 0.4, 30, 1);
    assert!(
        near.cross_region_share < 0.005,
        "{}",
        near.cross_region_share
    );
    // Four in five callers are in us-east, whose cluster is a fifth of the fleet: kept there,
    // they queue, and latency shows it.
    assert!(
        near.figures.ttft_ms.p99 > 2.0 * rr.figures.ttft_ms.p99,
        "nearest {} ms against round-robin {} ms",
        near.figures.ttft_ms.p99,
        rr.figures.ttft_ms.p99
    );
}

#[test]
fn the_tier_fills_the_cheap_cluster_and_its_cost_shows_it() {
    let global = one_run("east-heavy-8b", GlobalPolicy::Global, 0.4, 30, 1);
    let no_cost = one_run("east-heavy-8b", GlobalPolicy::GlobalWithoutCost, 0.4, 30, 1);
    let cheap = |r: &GlobalResult| r.cluster_shares[2].1;
    assert!(
        cheap(&global) > cheap(&no_cost) + 0.15,
        "the cheapest cluster's share: {} with prices, {} without",
        cheap(&global),
        cheap(&no_cost)
    );
    assert!(
        global.cost_per_million_tokens < 0.9 * no_cost.cost_per_million_tokens,
        "{} against {} per million tokens",
        global.cost_per_million_tokens,
        no_cost.cost_per_million_tokens
    );
    // The same requests were answered: the saving is not from serving less.
    assert_eq!(global.failed, 0);
    assert_eq!(no_cost.failed, 0);
}

#[test]
fn past_capacity_the_tier_spreads_by_load_and_sheds_rather_than_queueing_everywhere() {
    let global = one_run("east-heavy-8b", GlobalPolicy::Global, 1.2, 30, 1);
    let rr = one_run("east-heavy-8b", GlobalPolicy::RoundRobin, 1.2, 30, 1);
    assert!(
        global.figures.ttft_ms.p99 < rr.figures.ttft_ms.p99,
        "P99 TTFT {} ms against round-robin's {} ms",
        global.figures.ttft_ms.p99,
        rr.figures.ttft_ms.p99
    );
    assert!(
        global.figures.goodput_rps >= 0.98 * rr.figures.goodput_rps,
        "goodput {} against {}",
        global.figures.goodput_rps,
        rr.figures.goodput_rps
    );
}
