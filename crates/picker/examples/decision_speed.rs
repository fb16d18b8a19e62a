//! Measures the picker's full decision (hashing a 4,000-token prompt, filters, every scorer of the
//! `infergate` policy, selection) at 100 and 5,000 endpoints, the way
//! `infergate bench --picker --endpoints 100,5000` does.
//!
//! ```text
//! cargo run --release -p infergate-picker --example decision_speed [-- --json] [--endpoints 100,5000] [--requests N] [--rounds R]
//! ```
//!
//! Prints one line per fleet size, the median of `R` rounds of `N` requests (3 × 20,000 by default);
//! with `--json`, `{"endpoints": N, "p50_us": …, "p99_us": …, "rounds": R, "requests_per_round": N}`.

use std::process::ExitCode;
use std::time::Instant;

use infergate_picker::speed::{measure_rounds, DEFAULT_REQUESTS, DEFAULT_ROUNDS};

// An example is a program, so it is the edge the crate's purity rules leave I/O to: it
// reads its command line and the clock, and passes the time into the crate.
#[allow(clippy::disallowed_methods)]
fn main() -> ExitCode {
    let mut json = false;
    let mut sizes = vec![100usize, 5_000];
    let mut requests = DEFAULT_REQUESTS;
    let mut rounds = DEFAULT_ROUNDS;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let parsed = match arg.as_str() {
            "--json" => {
                json = true;
                Ok(())
            }
            "--endpoints" => args
                .next()
                .ok_or("--endpoints needs a list such as 100,5000".to_owned())
                .and_then(|v| {
                    v.split(',')
                        .map(|s| s.trim().parse::<usize>().map_err(|e| format!("{s:?}: {e}")))
                        .collect::<Result<Vec<_>, _>>()
                })
                .map(|v| sizes = v),
            "--requests" => args
                .next()
                .ok_or("--requests needs a number".to_owned())
                .and_then(|v| v.parse().map_err(|e| format!("{v:?}: {e}")))
                .map(|n| requests = n),
            "--rounds" => args
                .next()
                .ok_or("--rounds needs a number".to_owned())
                .and_then(|v| v.parse().map_err(|e| format!("{v:?}: {e}")))
                .map(|n| rounds = n),
            other => Err(format!("unknown argument {other:?}")),
        };
        if let Err(e) = parsed {
            eprintln!("decision_speed: {e}");
            return ExitCode::FAILURE;
        }
    }
    let start = Instant::now();
    let mut clock = || start.elapsed();
    for (i, &n) in sizes.iter().enumerate() {
        match measure_rounds(n, requests, rounds, 42 + i as u64, &mut clock) {
            Ok(t) if json => println!("{}", t.to_json()),
            Ok(t) => println!("{t}"),
            Err(e) => {
                eprintln!("decision_speed: {n} endpoints: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
