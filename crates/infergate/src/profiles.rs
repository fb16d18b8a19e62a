//! `infergate sim --list-profiles` and `--anchors`: the simulator's derived figures and its
//! fidelity, printed as Markdown tables.

use infergate_engine::anchors::{
    by_gpu, by_model, by_profile, held_out_by_profile, run_all, summary, AnchorResult, Split,
    Summary, FLAG_ABOVE,
};
use infergate_engine::profile::{Profile, REFERENCE_PROFILES};
use infergate_engine::step_time::StepTimeModel;
use infergate_engine::EngineConfig;

/// Prints every reference profile with the figures derived from its geometry and datasheet.
///
/// The last column is the profile's median error on the held-out anchors (`sim --anchors`), or
/// a warning where that error is above 20 % or no held-out anchor runs on the profile.
pub fn list_profiles() -> anyhow::Result<()> {
    let held = held_out_by_profile();
    println!("| profile | KV capacity (tokens) | blocks | decode ms B=1 ctx 1k | B=32 ctx 2k | B=128 ctx 2k | prefill tok/s | TTFT 1k tokens, idle | max_num_seqs / batched tokens | max_model_len | held-out error |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &(model, gpu, tp) in REFERENCE_PROFILES {
        let profile = Profile::lookup(model, gpu, tp)?;
        print_row(&profile, &fidelity(held.get(&profile.to_string())));
    }
    print_row(&Profile::instant(), "—");
    Ok(())
}

/// The held-out error column of a profile.
fn fidelity(held: Option<&Summary>) -> String {
    match held {
        None => "⚠ no held-out anchor".to_owned(),
        Some(s) if s.flagged() => format!(
            "⚠ {:.0} % over {} (above {:.0} %)",
            s.median_error * 100.0,
            s.anchors,
            FLAG_ABOVE * 100.0
        ),
        Some(s) => format!("{:.0} % over {}", s.median_error * 100.0, s.anchors),
    }
}

fn print_row(profile: &Profile, fidelity: &str) {
    let config = EngineConfig::new(profile.clone());
    let m = StepTimeModel::calibrated(profile, &config.calibration);
    let ttft = config.api_overhead.as_secs_f64() * 1e3
        + m.idle_prefill_nanos(1000, u64::from(config.max_num_batched_tokens)) / 1e6;
    println!(
        "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} ms | {} / {} | {} | {fidelity} |",
        profile,
        profile.kv_capacity_tokens(),
        profile.num_gpu_blocks(),
        m.decode_nanos(1, 1000) / 1e6,
        m.decode_nanos(32, 2000) / 1e6,
        m.decode_nanos(128, 2000) / 1e6,
        m.prefill_tokens_per_second(u64::from(config.max_num_batched_tokens)),
        ttft,
        config.max_num_seqs,
        config.max_num_batched_tokens,
        config.max_model_len,
    );
}

/// Runs every measured anchor in virtual time and prints predicted against measured, each
/// with its set, then each set's median error (the held-out set per GPU and per model); as one
/// JSON object with `json`.
pub fn anchors(json: bool) -> anyhow::Result<()> {
    let results = run_all();
    let pct = |e: f64| {
        if e.is_finite() {
            format!("{:.1} %", e * 100.0)
        } else {
            "∞ (not reproduced)".to_owned()
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&anchors_json(&results))?);
        return Ok(());
    }
    println!("| set | experiment | figure | measured | simulated | error | profile |");
    println!("|---|---|---|---|---|---|---|");
    for split in [Split::Fitting, Split::HeldOut] {
        for r in results.iter().filter(|r| r.split == split) {
            let (predicted, error) = if r.reproduced() {
                (
                    format!("{:.2}", r.predicted),
                    format!("{:+.1} %", r.error() * 100.0),
                )
            } else {
                ("not run".to_owned(), "∞".to_owned())
            };
            println!(
                "| {} | {} | {} | {:.4} | {predicted} | {error} | {} |",
                split.label(),
                r.experiment,
                r.figure,
                r.measured,
                r.profile(),
            );
        }
    }
    println!();
    for split in [Split::Fitting, Split::HeldOut] {
        let s = summary(&results, split);
        println!(
            "{}: median absolute error {} (worst {}) over {} anchors, {} not reproduced",
            split.label(),
            pct(s.median_error),
            pct(s.worst_error),
            s.anchors,
            s.not_reproduced
        );
    }
    println!();
    println!("| held out, by | anchors | median error | worst |");
    println!("|---|---|---|---|");
    for (kind, groups) in [
        ("GPU", by_gpu(&results, Split::HeldOut)),
        ("model", by_model(&results, Split::HeldOut)),
        ("profile", by_profile(&results, Split::HeldOut)),
    ] {
        for (name, s) in groups {
            println!(
                "| {kind} {name} | {} | {} | {} |",
                s.anchors,
                pct(s.median_error),
                pct(s.worst_error)
            );
        }
    }
    Ok(())
}

/// `sim --anchors --json`: each set's count and median error (fractions), the held-out set also
/// per GPU and per model, and every anchor.
fn anchors_json(results: &[AnchorResult]) -> serde_json::Value {
    let group = |g: std::collections::BTreeMap<String, Summary>| -> serde_json::Value {
        g.into_iter()
            .map(|(k, s)| (k, summary_json(&s)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let mut held = summary_json(&summary(results, Split::HeldOut));
    held["by_gpu"] = group(by_gpu(results, Split::HeldOut));
    held["by_model"] = group(by_model(results, Split::HeldOut));
    held["by_profile"] = group(by_profile(results, Split::HeldOut));
    serde_json::json!({
        "fitted": summary_json(&summary(results, Split::Fitting)),
        "held_out": held,
        "anchors": results.iter().map(|r| serde_json::json!({
            "set": r.split.label(),
            "experiment": r.experiment,
            "figure": r.figure,
            "measured": r.measured,
            "predicted": r.predicted,
            "error": r.error(),
            "profile": r.profile(),
            "source": r.source,
        })).collect::<Vec<_>>(),
    })
}

fn summary_json(s: &Summary) -> serde_json::Value {
    serde_json::json!({
        "anchors": s.anchors,
        "median_error": s.median_error,
        // Infinite when an anchor was not reproduced, which JSON cannot hold: null then.
        "worst_error": s.worst_error.is_finite().then_some(s.worst_error),
        "not_reproduced": s.not_reproduced,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(median_error: f64, anchors: usize) -> Summary {
        Summary {
            anchors,
            median_error,
            worst_error: median_error,
            not_reproduced: 0,
        }
    }

    #[test]
    fn the_column_flags_an_error_above_the_limit_and_a_profile_without_anchors() {
        assert_eq!(fidelity(Some(&summary(0.14, 3))), "14 % over 3");
        assert_eq!(
            fidelity(Some(&summary(0.25, 1))),
            "⚠ 25 % over 1 (above 20 %)"
        );
        assert!(fidelity(Some(&summary(f64::INFINITY, 2))).starts_with('⚠'));
        assert_eq!(fidelity(None), "⚠ no held-out anchor");
    }
}
