//! ITL is the gaps between successive tokens, not time per output token: a request decoding
//! alone has gaps of one decode step, and a long prompt landing in its batch makes one gap long
//! while its TPOT only averages it away.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use infergate_bench::report::summarize;
use infergate_bench::runner::{run, RunOptions};
use infergate_bench::scenario;
use infergate_bench::workload::BenchRequest;
use infergate_engine::step_time::StepTimeModel;
use infergate_engine::Profile;
use std::time::Duration;

fn request(at_ms: u64, prompt_tokens: u32, output_tokens: u32, salt: u64) -> BenchRequest {
    BenchRequest {
        at: Duration::from_millis(at_ms),
        prompt_tokens,
        output_tokens,
        // Unique blocks: nothing is served from the prefix cache.
        block_hashes: (0..u64::from(prompt_tokens / 16))
            .map(|i| salt << 32 | i)
            .collect(),
        adapter: None,
        band: None,
        tenant: None,
    }
}

#[test]
fn itl_is_the_engines_step_time_and_a_prefill_shows_as_one_long_gap() {
    let mut s = scenario::by_id("shared-prefix-8b").unwrap();
    s.fleet.truncate(1);
    s.fleet[0].count = 1;
    let kind = s.fleet[0].clone();
    // A decodes alone for about a second; B's 8,000-token prompt then joins its batch.
    let requests = vec![request(0, 128, 300, 1), request(1_000, 8_000, 2, 2)];
    let options = RunOptions {
        duration: Duration::from_secs(5),
        ..RunOptions::default()
    };
    let out = run(&s, "round-robin", &requests, &options).unwrap();
    let a = &out.requests[0];
    assert_eq!(a.output_tokens, 300);
    let gaps = &out.token_gaps_ms[0];
    assert_eq!(gaps.len(), 299, "one gap between each two of 300 tokens");

    let model = StepTimeModel::new(&Profile::lookup(kind.model(), kind.gpu(), kind.tp()).unwrap());
    let step_ms = model.decode_nanos(1, 128 + 150) / 1e6;
    let result = summarize("round-robin", &out);
    let itl = result.itl_ms;
    assert!(
        (itl.p50 - step_ms).abs() < 0.1 * step_ms,
        "ITL p50 {:.2} ms vs one decode step {step_ms:.2} ms",
        itl.p50
    );
    // B's prefill shares a step with A's decode: that gap is many decode steps long.
    let longest = gaps.iter().copied().fold(0.0f32, f32::max);
    assert!(
        f64::from(longest) > 5.0 * step_ms,
        "longest gap {longest} ms vs step {step_ms:.2} ms"
    );
    // TPOT is A's mean gap (B has one gap; its TPOT is that gap), so it hides the long gap.
    let mean_gap = gaps.iter().map(|&g| f64::from(g)).sum::<f64>() / gaps.len() as f64;
    let tpot_a = (a.finished.unwrap() - a.first_token.unwrap()).as_secs_f64() * 1e3 / 299.0;
    assert!(
        (tpot_a - mean_gap).abs() < 0.01 * mean_gap,
        "{tpot_a} vs {mean_gap}"
    );
    assert!(f64::from(longest) > 3.0 * tpot_a);
    assert!(result.tpot_ms.p50 > 0.0 && result.tpot_ms.p50.is_finite());
}
