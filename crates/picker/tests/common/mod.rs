//! Shared helpers for the integration tests: small pools with hand-set metrics.
#![allow(dead_code)]

use std::time::Duration;

use infergate_picker::prefix::{hash_prompt, PrefixParams};
use infergate_picker::{EndpointId, EndpointSpec, LoraInfo, Pool, RequestFeatures, ScrapedMetrics};

pub fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

pub fn id(i: u64) -> EndpointId {
    EndpointId(i)
}

/// A pool of `n` endpoints `10.0.0.i:8000` with ids `0..n`.
pub fn pool(n: u64) -> Pool {
    Pool::new(
        (0..n)
            .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:8000")))
            .collect(),
    )
    .unwrap()
}

pub fn metrics(at: Duration, waiting: u64, running: u64, kv: f64) -> ScrapedMetrics {
    ScrapedMetrics {
        scraped_at: at,
        waiting: Some(waiting),
        running: Some(running),
        kv_usage: Some(kv),
        ..ScrapedMetrics::empty(at)
    }
}

pub fn scrape(pool: &mut Pool, i: u64, at: Duration, waiting: u64, kv: f64) {
    pool.update_metrics(id(i), metrics(at, waiting, 0, kv))
        .unwrap();
}

pub fn with_lora(
    mut m: ScrapedMetrics,
    max: u32,
    running: &[&str],
    waiting: &[&str],
) -> ScrapedMetrics {
    m.lora = Some(LoraInfo {
        max_lora: max,
        running: running.iter().map(|s| s.to_string()).collect(),
        waiting: waiting.iter().map(|s| s.to_string()).collect(),
    });
    m
}

/// A request whose prompt is `prompt` (hashed with the default parameters), ~4 bytes per token.
pub fn request(prompt: &str) -> RequestFeatures {
    RequestFeatures {
        prompt_block_hashes: hash_prompt("m", None, prompt.as_bytes(), &PrefixParams::default()),
        ..RequestFeatures::new("m", (prompt.len() / 4) as u64)
    }
}

/// A prompt of `len` bytes unique to `seed`.
pub fn unique_prompt(seed: u64, len: usize) -> String {
    let mut s = String::with_capacity(len);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while s.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push(char::from(b'a' + (x % 26) as u8));
    }
    s
}
