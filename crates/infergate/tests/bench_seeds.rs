//! `infergate bench --first-seed`: the runs use the seeds asked for, so a change can be judged
//! on arrivals it was not tuned on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{infergate, stdout_of};

fn sweep_header(extra: &[&str]) -> String {
    stdout_of(
        infergate()
            .args([
                "bench",
                "--scenario",
                "mixed-gpu-8b",
                "--load",
                "0.3,0.6",
                "--seeds",
                "2",
                "--duration",
                "5",
                "--policies",
                "round-robin",
            ])
            .args(extra),
    )
}

#[test]
fn first_seed_moves_the_seeds_of_a_sweep() {
    let default = sweep_header(&[]);
    assert!(default.contains("median of seeds [1, 2]"), "{default}");
    let held_out = sweep_header(&["--first-seed", "4"]);
    assert!(held_out.contains("median of seeds [4, 5]"), "{held_out}");
    // Other arrivals, so other figures.
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("| 0.30 | round-robin |"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(rows(&default).len(), 1, "{default}");
    assert_ne!(rows(&default), rows(&held_out));
}
