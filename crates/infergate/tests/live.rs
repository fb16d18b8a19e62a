//! The live runner agrees with the virtual one: the same small scenario, run once in virtual
//! time and once for real (`infergate sim` replicas behind `infergate serve`, requests streamed
//! over loopback at their real arrival times), gives the same TTFT p50 within 15 %, and the same
//! ITL p50 (the median gap between tokens) within 15 %.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use infergate_bench::report::{summarize, PolicyResult};
use infergate_bench::runner::{run, RunOptions, RunOutcome};
use infergate_bench::scenario::{Lengths, ReplicaKind, Scenario};
use infergate_bench::trace::{read_azure_csv, traces_dir};
use infergate_bench::workload::{Arrivals, BenchRequest, Shape};
use infergate_live::{LiveOptions, LiveRunner, Router};
use infergate_rng::SplitMix64;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const SEED: u64 = 3;

/// Two A10G replicas of Llama-3.1-8B: slow enough prefill (about 3,600 tokens/s) that a
/// millisecond of real-world overhead is noise against a TTFT of a few hundred milliseconds.
fn scenario() -> Scenario {
    Scenario {
        id: "live-agreement",
        fleet: vec![ReplicaKind::new("llama-3.1-8b", "a10g", 1, 2)],
        arrivals: Arrivals::Poisson,
        lengths: Lengths::AzureConversation,
        load: 0.4,
        seed_row: None,
        adapters: None,
        bands: None,
    }
}

/// 20 s of Poisson arrivals at 2.5 req/s (about 50 requests), prompts from the Azure trace
/// (capped at 3,000 tokens), answers capped at 48 tokens so the run drains in seconds: about
/// 40 % of the two replicas' prefill capacity, enough for some queueing, far from overload.
fn requests() -> Vec<BenchRequest> {
    let trace = read_azure_csv(&traces_dir().join("azure-llm-2023-conv.csv")).unwrap();
    let shape = Shape::Sampled(
        trace
            .iter()
            .map(|r| (r.input_tokens.min(3_000), r.output_tokens.min(48)))
            .collect(),
    );
    let mut rng = SplitMix64::new(SEED);
    let times = Arrivals::Poisson.times(2.5, Duration::from_secs(20), &mut rng);
    shape.requests(&times, 8_192, &mut rng)
}

fn row(r: &PolicyResult, mode: &str) -> String {
    format!(
        "{mode:8} TTFT p50 {:6.1} ms p95 {:6.1} ms | ITL p50 {:5.1} ms p99 {:5.1} ms | TPOT p50 {:5.1} ms | E2E p50 {:6.1} ms | errors {}",
        r.ttft_ms.p50,
        r.ttft_ms.p95,
        r.itl_ms.p50,
        r.itl_ms.p99,
        r.tpot_ms.p50,
        r.e2e_ms.p50,
        r.errors
    )
}

/// `policy`'s figures on `requests` in virtual time, over the live runs' 20 s.
fn virtual_run(scenario: &Scenario, policy: &str, requests: &[BenchRequest]) -> PolicyResult {
    let options = RunOptions {
        duration: Duration::from_secs(20),
        seed: SEED,
        ..RunOptions::default()
    };
    summarize(policy, &run(scenario, policy, requests, &options).unwrap())
}

/// `requests` through `router` (a policy of `infergate serve`, or a peer) in real time.
fn live_run(scenario: &Scenario, router: &str, requests: &[BenchRequest]) -> RunOutcome {
    let mut options = LiveOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_infergate")));
    options.drain = Duration::from_secs(30);
    let runner = LiveRunner::new(options).unwrap();
    let router = Router::parse(router).unwrap();
    runner.run(scenario, &router, requests, SEED).unwrap()
}

#[test]
fn a_small_scenario_run_live_agrees_with_its_virtual_run() {
    let started = Instant::now();
    let scenario = scenario();
    let requests = requests();
    assert!(requests.len() >= 40, "{} requests", requests.len());
    let policy = "infergate";

    let virt = virtual_run(&scenario, policy, &requests);
    let live = live_run(&scenario, policy, &requests);
    // The fleet was watched while it worked: both replicas' queues, with requests running.
    for replica in 0..2 {
        let seen: Vec<_> = live
            .queue_samples
            .iter()
            .filter(|q| q.replica == replica)
            .collect();
        assert!(
            seen.len() >= 40,
            "replica {replica}: {} samples",
            seen.len()
        );
        assert!(
            seen.iter().any(|q| q.running > 0),
            "replica {replica} never busy"
        );
    }
    let live = summarize(policy, &live);

    eprintln!("{}\n{}", row(&virt, "virtual"), row(&live, "live"));
    assert_eq!(live.errors, 0, "every live request finished");
    assert_eq!(virt.errors, 0);
    let off = (live.ttft_ms.p50 - virt.ttft_ms.p50) / virt.ttft_ms.p50;
    assert!(
        off.abs() <= 0.15,
        "TTFT p50 live {:.1} ms vs virtual {:.1} ms ({:+.1} %)",
        live.ttft_ms.p50,
        virt.ttft_ms.p50,
        off * 100.0
    );
    // ITL on both sides is the gaps between tokens: engine step ends in virtual time, chunk
    // arrivals at the client live. The median gap is one decode step either way.
    let itl_off = (live.itl_ms.p50 - virt.itl_ms.p50) / virt.itl_ms.p50;
    assert!(
        itl_off.abs() <= 0.15,
        "ITL p50 live {:.2} ms vs virtual {:.2} ms ({:+.1} %)",
        live.itl_ms.p50,
        virt.itl_ms.p50,
        itl_off * 100.0
    );
    eprintln!(
        "TTFT p50 {:+.1} %, ITL p50 {:+.1} %, in {:.1} s",
        off * 100.0,
        itl_off * 100.0,
        started.elapsed().as_secs_f64()
    );
}

/// The upstream endpoint picker (GIE's EPP, the one the llm-d router builds on) as a live peer:
/// started on its own default config against pods of a real API server, behind a real Envoy,
/// it answers every request and sends work to both replicas. Printed beside the virtual
/// `gie-default` of the same arrivals, the model of it the virtual runner uses.
/// The EPP is built on first use (`tests/peers/gie-epp/build`, minutes; `.ci/run` builds it
/// before the tests).
#[test]
fn the_upstream_epp_behind_envoy_answers_every_request_on_pods_it_discovers() {
    an_epp_answers_every_request_on_pods_it_discovers("gie-epp");
}

/// The llm-d router's EPP likewise, on the config GIE's chart ships (which llm-d's guides
/// deploy it with).
/// The EPP is built on first use (`tests/peers/llm-d-epp/build`, minutes; `.ci/run` builds it
/// before the tests).
#[test]
fn the_llm_d_epp_behind_envoy_answers_every_request_on_pods_it_discovers() {
    an_epp_answers_every_request_on_pods_it_discovers("llm-d-epp");
}

fn an_epp_answers_every_request_on_pods_it_discovers(peer: &str) {
    let scenario = scenario();
    let requests = requests();
    let virt = virtual_run(&scenario, "gie-default", &requests);
    let live = live_run(&scenario, peer, &requests);
    for replica in 0..2 {
        assert!(
            live.queue_samples
                .iter()
                .any(|q| q.replica == replica && q.running > 0),
            "replica {replica} never got a request from {peer}"
        );
    }
    let live = summarize(peer, &live);
    eprintln!(
        "{}\n{}",
        row(&virt, "virtual gie-default"),
        row(&live, &format!("live {peer}"))
    );
    assert_eq!(
        live.errors, 0,
        "every request through Envoy and {peer} finished"
    );
}
