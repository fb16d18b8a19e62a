//! Runs one scenario with every policy and prints the table:
//! `cargo run --release -p infergate-bench --example scenario -- mixed-gpu-8b 120 1`
#![allow(clippy::unwrap_used, clippy::expect_used)]
use infergate_bench::{report, scenario, suite};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let id = args.first().map_or("mixed-gpu-8b", String::as_str);
    let secs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(120);
    let seeds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let scn = scenario::by_id(id).expect("scenario");
    let t = std::time::Instant::now();
    let seeds: Vec<u64> = (1..=seeds).collect();
    let r = suite::run_scenario(&scn, suite::POLICIES, &seeds, Duration::from_secs(secs)).unwrap();
    println!(
        "{}: capacity {:.1} req/s, offered {:.1} req/s ({:.0} %), {} s, seeds {:?}, {:.1} s wall",
        r.scenario,
        r.capacity_rps,
        r.rate_rps,
        r.load * 100.0,
        secs,
        r.seeds,
        t.elapsed().as_secs_f64()
    );
    print!("{}", report::markdown_table(&r.results, "round-robin"));
}
