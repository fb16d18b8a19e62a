//! Critical's TTFT under overload against what the servers' step budget and batch cap, and the
//! flow controller's saturation signals, do to it: `priority-overload-8b-vllm-priority` on the
//! same arrivals (the offered rate is measured once, with the profile's defaults), one row per
//! variant and policy, median over seeds (the running column: mean running requests per
//! server over the scrapes).
//!
//! ```sh
//! cargo run --release -p infergate-bench --example priority_overload -- \
//!     --load 1.3,0.5 --budgets none,4096,2048 --policies infergate,round-robin,clairvoyant
//! cargo run --release -p infergate-bench --example priority_overload -- \
//!     --load 1.3,0.5 --running 120,150 --standard-ttl-ms 1500
//! ```
//!
//! Every list is comma-separated; `none` keeps the default. Variants are every combination of
//! `--budgets` (`max_num_batched_tokens`), `--max-num-seqs`, `--prefill` (pending prefill
//! tokens read as a full queue), `--running` (running requests at saturation 1 for the bands
//! below Critical), `--standard-ttl-ms` (Standard's queue TTL) and `--sheddable-ceiling`
//! (the Sheddable band's saturation ceiling, in hundredths: `75` is the default 0.75).
//!
//! `--without-sheddable` drops the Sheddable requests from the arrivals, keeping every Critical
//! and Standard one where it was: the servers then carry exactly the load a gateway that serves
//! all Critical and Standard traffic (and no Sheddable) must put on them, which shows what the
//! fleet itself allows Critical at that load, whatever the gateway does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use infergate_bench::report::{median_over_seeds, summarize, PolicyResult};
use infergate_bench::runner::{run_tuned, RunOptions, Tuning};
use infergate_bench::scenario;
use infergate_bench::suite::offered;
use infergate_config::gateway::Band;
use infergate_picker::Policy;
use std::time::Duration;

fn list(args: &[String], flag: &str, default: &str) -> Vec<String> {
    let value = args
        .iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map_or(default, String::as_str);
    value.split(',').map(str::to_owned).collect()
}

fn optional(v: &str) -> Option<u64> {
    (v != "none").then(|| v.parse().expect("a number or `none`"))
}

/// A command-line flag, its label in the table, and what it sets.
type Knob = (&'static str, &'static str, fn(&mut Tuning, u64));

/// Every combination of the lists' values, as tunings with their labels.
fn variants(args: &[String]) -> Vec<(String, Tuning)> {
    let mut out = vec![(String::new(), Tuning::default())];
    let knobs: [Knob; 6] = [
        ("--budgets", "budget", |t, v| {
            t.max_num_batched_tokens = Some(v as u32)
        }),
        ("--max-num-seqs", "seqs", |t, v| {
            t.max_num_seqs = Some(v as u32)
        }),
        ("--prefill", "prefill", |t, v| {
            t.prefill_tokens_threshold = Some(v)
        }),
        ("--running", "running", |t, v| {
            t.running_threshold = Some(v as u32)
        }),
        ("--standard-ttl-ms", "Standard TTL ms", |t, v| {
            t.standard_queue_ttl = Some(Duration::from_millis(v))
        }),
        ("--sheddable-ceiling", "Sheddable ceiling /100", |t, v| {
            t.sheddable_ceiling = Some(v as f64 / 100.0)
        }),
    ];
    for (flag, name, set) in knobs {
        let values = list(args, flag, "none");
        out = out
            .iter()
            .flat_map(|(label, tuning)| {
                values.iter().map(move |v| {
                    let mut t = *tuning;
                    let mut label = label.clone();
                    if let Some(n) = optional(v) {
                        set(&mut t, n);
                        label.push_str(&format!(
                            "{}{name} {n}",
                            if label.is_empty() { "" } else { ", " }
                        ));
                    }
                    (label, t)
                })
            })
            .collect();
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let loads: Vec<f64> = list(&args, "--load", "1.3")
        .iter()
        .map(|l| l.parse().expect("a load"))
        .collect();
    let policies = list(&args, "--policies", "infergate");
    let seeds: u64 = list(&args, "--seeds", "5")[0]
        .parse()
        .expect("a seed count");
    let duration = Duration::from_secs(list(&args, "--duration", "120")[0].parse().unwrap());
    let without_sheddable = args.iter().any(|a| a == "--without-sheddable");

    let mut scenario = scenario::by_id("priority-overload-8b-vllm-priority").unwrap();
    let base = offered(&scenario).unwrap();
    println!(
        "| load | variant | policy | Critical p50 | Critical p99 | Critical refused or failed | Standard p99 | Standard refused or failed | Sheddable shed | ITL p50 | running | goodput req/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for &load in &loads {
        scenario.load = load;
        let rate = base.capacity_rps * load;
        let arrivals: Vec<_> = (1..=seeds)
            .map(|seed| {
                let mut requests = scenario
                    .requests(rate, duration, base.max_model_len, seed)
                    .unwrap();
                if without_sheddable {
                    requests.retain(|r| r.band != Some(Band::Sheddable));
                }
                requests
            })
            .collect();
        for (label, tuning) in variants(&args) {
            for policy in &policies {
                let named = (policy != "clairvoyant").then(|| Policy::named(policy).unwrap());
                let mut results: Vec<PolicyResult> = Vec::new();
                let mut running: Vec<f64> = Vec::new();
                for (i, requests) in arrivals.iter().enumerate() {
                    let options = RunOptions {
                        duration,
                        seed: i as u64 + 1,
                        ..RunOptions::default()
                    };
                    let run =
                        run_tuned(&scenario, named.clone(), requests, &options, &tuning).unwrap();
                    let samples = run.queue_samples.len().max(1) as f64;
                    running.push(
                        run.queue_samples
                            .iter()
                            .map(|q| f64::from(q.running))
                            .sum::<f64>()
                            / samples,
                    );
                    results.push(summarize(policy, &run));
                }
                running.sort_by(f64::total_cmp);
                let r = median_over_seeds(&results).unwrap();
                let band = |name: &str| r.bands.iter().find(|b| b.band == name);
                let (c, s) = (band("Critical").unwrap(), band("Standard").unwrap());
                // Absent with --without-sheddable.
                let (shed, sheddable) = band("Sheddable").map_or((0, 0), |b| (b.shed, b.requests));
                println!(
                    "| {load} | {} | {policy} | {:.0} ms | {:.0} ms | {} | {:.0} ms | {} of {} | {} of {} | {:.1} ms | {:.0} | {:.2} |",
                    if label.is_empty() { "defaults" } else { &label },
                    c.ttft_ms.p50,
                    c.ttft_ms.p99,
                    c.errors + c.shed,
                    s.ttft_ms.p99,
                    s.errors + s.shed,
                    s.requests,
                    shed,
                    sheddable,
                    r.itl_ms.p50,
                    running[running.len() / 2],
                    r.goodput_rps,
                );
            }
        }
    }
}
