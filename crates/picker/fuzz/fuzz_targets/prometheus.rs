//! The Prometheus text-format parser and every engine dialect on arbitrary bytes: no input may
//! panic, overflow or hang, and what comes out must make sense.
#![no_main]

use std::time::Duration;

use infergate_picker::metrics::{for_each_sample, parse, read_metrics_with, Engine, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for limits in [
        Limits::default(),
        // Tight limits, so the limit paths are exercised by small inputs too.
        Limits {
            max_bytes: 512,
            max_samples: 8,
            max_labels: 2,
        },
    ] {
        let parsed = parse(data, &limits);
        // The collecting and the streaming entry points agree.
        let mut streamed = 0usize;
        let each = for_each_sample(data, &limits, |s| {
            assert!(!s.name.is_empty());
            assert!(s.labels.len() <= limits.max_labels);
            streamed += 1;
        });
        match (&parsed, &each) {
            (Ok(samples), Ok(())) => {
                assert_eq!(samples.len(), streamed);
                assert!(samples.len() <= limits.max_samples);
            }
            (Err(a), Err(b)) => assert_eq!(a, b),
            _ => panic!("parse and for_each_sample disagree: {parsed:?} vs {each:?}"),
        }
        for engine in [Engine::Vllm, Engine::Sglang, Engine::Tgi, Engine::Trtllm] {
            let Ok(scrape) = read_metrics_with(engine, data, Duration::from_millis(7), &limits)
            else {
                continue;
            };
            let m = scrape.metrics;
            assert_eq!(m.scraped_at, Duration::from_millis(7));
            // Fractions are fractions: a value outside 0..=1 or NaN never reaches a scorer.
            for f in [m.kv_usage, m.prefix_cache_hit_rate].into_iter().flatten() {
                assert!((0.0..=1.0).contains(&f), "{engine:?}: fraction {f}");
            }
            if let Some(lora) = &m.lora {
                assert!(lora
                    .running
                    .iter()
                    .chain(&lora.waiting)
                    .all(|a| !a.is_empty()));
            }
        }
    }
});
