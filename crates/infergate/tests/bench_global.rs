//! `infergate bench --global` as a user runs it: the table, the JSON, and the errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{infergate, stdout_of, TempDir};

#[test]
fn a_multi_cluster_run_prints_every_policy_at_every_load_and_writes_its_json() {
    let dir = TempDir::new("bench-global");
    let json = dir.path().join("global.json");
    let text = stdout_of(
        infergate()
            .args([
                "bench",
                "--global",
                "three-regions-8b",
                "--seeds",
                "1",
                "--duration",
                "20",
                "--load",
                "0.5,0.9",
                "--json",
            ])
            .arg(&json),
    );
    assert!(
        text.contains("us-east-1 black-holed from 40 % to 65 %"),
        "{text}"
    );
    for load in ["0.50", "0.90"] {
        for policy in [
            "infergate-global",
            "infergate-global-without-cost",
            "round-robin-clusters",
            "nearest-region",
        ] {
            let row = format!("| {load} | {policy} |");
            assert_eq!(text.matches(&row).count(), 1, "{row} in {text}");
        }
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let points = doc[0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 8);
    for p in points {
        let r = &p["result"];
        assert!(r["cost_per_million_tokens"].as_f64().unwrap() > 0.0, "{p}");
        assert!(
            r["last_attempt_at_faulty_s"].as_f64().unwrap() <= 5.0,
            "{p}"
        );
        assert_eq!(r["cluster_shares"].as_array().unwrap().len(), 3, "{p}");
    }
}

#[test]
fn a_wrong_scenario_policy_or_flag_is_named() {
    let run = |args: &[&str]| {
        let out = infergate().arg("bench").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let err = run(&["--global", "nowhere"]);
    assert!(
        err.contains("unknown multi-cluster scenario `nowhere`")
            && err.contains("three-regions-8b")
            && err.contains("east-heavy-8b"),
        "{err}"
    );
    let err = run(&["--global", "all", "--policies", "least-request"]);
    assert!(err.contains("not `least-request`"), "{err}");
    assert!(err.contains("nearest-region"), "{err}");
    let err = run(&["--global", "all", "--scenario", "mixed-gpu-8b"]);
    assert!(err.contains("drop --scenario"), "{err}");
    let err = run(&["--global", "all", "--capacity"]);
    assert!(err.contains("drop --capacity"), "{err}");
    let err = run(&["--scenario", "mixed-gpu-8b", "--spill-at", "0.5"]);
    assert!(
        err.contains("--spill-at sets the global tier's spillAt"),
        "{err}"
    );
    let err = run(&["--global", "three-regions-8b", "--spill-at", "1.5"]);
    assert!(err.contains("spillAt"), "{err}");
}
