//! Gateway replicas that share nothing but the scrapes: one replica is the bench as it always
//! was, and several are several pickers, each learning only from the arrivals dealt to it.

#![allow(clippy::unwrap_used)]

use infergate_bench::ablation::{ablation, Ablation};
use infergate_bench::runner::{run, run_tuned, RunOptions, RunOutcome};
use infergate_bench::scenario;
use infergate_bench::tuning::Tuning;
use infergate_bench::workload::BenchRequest;
use infergate_picker::Policy;
use std::time::Duration;

/// FNV-1a over every request's fate and the fleet's totals: equal fingerprints, equal runs.
fn fingerprint(o: &RunOutcome) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |x: u64| {
        for b in x.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    let ns = |d: Option<Duration>| d.map_or(u64::MAX, |d| d.as_nanos() as u64);
    for r in &o.requests {
        eat(ns(Some(r.sent)));
        eat(ns(r.first_token));
        eat(ns(r.finished));
        eat(u64::from(r.output_tokens));
        eat(u64::from(r.error));
        eat(r.refused.map_or(0, u64::from));
    }
    eat(o.prefix_hit_ratio.to_bits());
    eat(o.preemptions);
    h
}

/// The scenario at its own load for `secs` seconds of arrivals, from `seed`.
fn traffic(id: &str, secs: u64, seed: u64) -> (scenario::Scenario, Vec<BenchRequest>) {
    let s = scenario::by_id(id).unwrap();
    let load = infergate_bench::suite::offered(&s).unwrap();
    let requests = s
        .requests(
            load.rate_rps,
            Duration::from_secs(secs),
            load.max_model_len,
            seed,
        )
        .unwrap();
    (s, requests)
}

fn options(secs: u64, seed: u64, gateway_replicas: u32) -> RunOptions {
    RunOptions {
        duration: Duration::from_secs(secs),
        seed,
        gateway_replicas,
        ..RunOptions::default()
    }
}

/// A fingerprint per policy.
type Fingerprints = [(&'static str, u64); 4];

#[test]
fn one_gateway_replica_is_the_bench_as_it_was_before_replicas() {
    // Fingerprints of these runs taken with the runner as it was before gateway replicas
    // existed (commit 58246e4): the prefix-heavy scenarios, and one with flow control, whose
    // gate became per-gateway. trace-mooncake's were taken again when capacity came to be
    // measured on the replay's own lengths (no 32k cap), which changed its offered rate.
    let golden: [(&str, u64, u64, Fingerprints); 3] = [
        (
            "shared-prefix-8b",
            40,
            3,
            [
                ("round-robin", 0xe31c_7738_6496_3096),
                ("gie-default", 0xb95e_33d1_6511_6cf7),
                ("infergate", 0xb49b_9c99_d418_bcb6),
                ("clairvoyant", 0xa505_ffe6_0dbf_5e2c),
            ],
        ),
        (
            "priority-overload-8b",
            8,
            2,
            [
                ("round-robin", 0xb86b_1d5c_fcb9_28cc),
                ("gie-default", 0xf14f_d2eb_7499_f34a),
                ("infergate", 0xdb17_50ea_7df1_73c6),
                ("clairvoyant", 0xd5b6_b8d2_4886_a393),
            ],
        ),
        (
            "trace-mooncake",
            20,
            5,
            [
                ("round-robin", 0x8c6e_d967_c72c_b74f),
                ("gie-default", 0x14ba_e1b8_3f16_2729),
                ("infergate", 0xd85d_0cee_8f3a_8550),
                ("clairvoyant", 0x6859_822b_6c48_f73f),
            ],
        ),
    ];
    // priority-overload-8b's were taken again on 2026-12-05, when the step-time model began to
    // price decode FLOPs (its 8B H100 replicas decode past the compute crossover); with that
    // term off, every fingerprint here was still the one before it.
    // The fingerprints predate the overload rule, the decode-pace signal and infergate's own
    // flow control in scenarios without bands: the runs are made as the bench made them then
    // (the policy alone where the scenario has no bands, the flow control without the rule or
    // the pace where it has), so that what is checked is the runner. They also predate the
    // latency scorer's tolerance: infergate runs with the plain ratio it had then.
    let as_then = Tuning {
        without_overload_rule: true,
        inter_token_latency_threshold: Some(std::time::Duration::ZERO),
        ..Tuning::default()
    };
    let policy_value = |name: &str| match name {
        "clairvoyant" => None,
        "infergate" => match ablation("infergate-without-latency-tolerance") {
            Some(Ablation::Pick(p)) => Some(p),
            other => panic!("{other:?}"),
        },
        _ => Some(Policy::named(name).unwrap()),
    };
    for (id, secs, seed, policies) in golden {
        let (s, requests) = traffic(id, secs, seed);
        for (policy, want) in policies {
            let run_on = |replicas| {
                let o = options(secs, seed, replicas);
                run_tuned(&s, policy_value(policy), &requests, &o, &as_then).unwrap()
            };
            let one = run_on(1);
            assert_eq!(fingerprint(&one), want, "{id} {policy}");
            assert_eq!(one.gateways.len(), 1);
            assert_eq!(one.gateways[0].arrivals, requests.len() as u64);
            // 0 counts as one gateway, and the default is one.
            assert_eq!(run_on(0), one, "{id} {policy}");
        }
    }
    assert_eq!(RunOptions::default().gateway_replicas, 1);
}

#[test]
fn each_gateway_replica_learns_only_the_prefixes_of_its_own_arrivals() {
    let (s, requests) = traffic("shared-prefix-8b", 120, 1);
    for policy in ["infergate", "gie-default"] {
        let one = run(&s, policy, &requests, &options(120, 1, 1)).unwrap();
        let four = run(&s, policy, &requests, &options(120, 1, 4)).unwrap();
        assert_eq!(four.gateways.len(), 4, "four pickers, not one");
        let dealt: u64 = four.gateways.iter().map(|g| g.arrivals).sum();
        assert_eq!(dealt, requests.len() as u64);
        let single = one.gateways[0].prefix_index_hashes;
        let mut sum = 0;
        for g in &four.gateways {
            // Every gateway got a share, and its index holds less than the one index that saw
            // every arrival...
            assert!(
                g.arrivals > requests.len() as u64 / 8,
                "{policy} {:?}",
                four.gateways
            );
            assert!(g.prefix_index_hashes > 0);
            assert!(
                g.prefix_index_hashes < single,
                "{policy} {:?} vs {single}",
                four.gateways
            );
            sum += g.prefix_index_hashes;
        }
        // ...while together they hold more: a system prompt seen at two gateways is learned
        // twice, by two indexes that know nothing of each other.
        assert!(sum > single, "{policy}: {sum} vs {single}");
        // And the fleet's prefix cache is hit less often: a gateway sends a group's prompt
        // where it last sent it, not where another gateway did.
        assert!(
            four.prefix_hit_ratio < one.prefix_hit_ratio,
            "{policy}: {} with four gateways vs {} with one",
            four.prefix_hit_ratio,
            one.prefix_hit_ratio
        );
        assert!(four.requests.iter().all(|r| r.finished.is_some()));
    }
}

#[test]
fn clairvoyant_has_no_picker_state_to_split() {
    // It reads the engines' true state, so dealing its arrivals to four gateways changes
    // nothing: what the replicas split is the pickers' state, and only that.
    let (s, requests) = traffic("shared-prefix-8b", 40, 3);
    let one = run(&s, "clairvoyant", &requests, &options(40, 3, 1)).unwrap();
    let four = run(&s, "clairvoyant", &requests, &options(40, 3, 4)).unwrap();
    assert_eq!(fingerprint(&four), fingerprint(&one));
    assert!(four.gateways.iter().all(|g| g.prefix_index_hashes == 0));
}

#[test]
fn with_flow_control_each_gateway_replica_admits_on_its_own_and_every_request_is_settled() {
    let (s, requests) = traffic("priority-overload-8b", 8, 2);
    let one = run(&s, "infergate", &requests, &options(8, 2, 1)).unwrap();
    let two = run(&s, "infergate", &requests, &options(8, 2, 2)).unwrap();
    assert_eq!(two.gateways.len(), 2);
    assert_ne!(fingerprint(&two), fingerprint(&one));
    for r in &two.requests {
        assert!(
            r.refused.is_some() || (r.finished.is_some() && !r.error),
            "{r:?}"
        );
    }
    assert!(
        two.requests.iter().any(|r| r.refused.is_some()),
        "130 % still sheds"
    );
}
