//! Benchmarks of the picker's parts: each names the figure it measures.
//!
//! - `prefix_hash/16k_chars`: hashing a ~4,000-token (16,000-byte) prompt into chained blocks.
//! - `prefix_hash_memo/shared_half`: the same through a `HashMemo` holding a prompt with the same
//!   8,000-byte system prompt and a tail of its own (as the gateway hashes a request that opens
//!   like a recent one); `prefix_hash_memo/first_seen`: a prompt the memo has never seen (and
//!   must store: the memo's worst case).
//! - `prefix_match/{100,5000}_endpoints`: matching that request against an index where every
//!   endpoint holds the shared system prompt and its own conversations.
//! - `pick/{policy}/{100,5000}_endpoints`: the whole decision for one request (filters, every
//!   scorer of the policy, selection, fallbacks) on a scraped pool with a warm index.
//! - `pick_and_hash/infergate/{100,5000}_endpoints`: the same plus hashing the prompt.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use infergate_picker::prefix::{hash_prompt, HashMemo, PrefixIndex, PrefixParams};
use infergate_picker::{EndpointSpec, Picker, Policy, Pool, RequestFeatures, ScrapedMetrics};

fn text(seed: u64, len: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

fn request(prompt: &str) -> RequestFeatures {
    RequestFeatures {
        prompt_block_hashes: hash_prompt("m", None, prompt.as_bytes(), &PrefixParams::default()),
        ..RequestFeatures::new("m", (prompt.len() / 4) as u64)
    }
}

/// A scraped pool of `n` endpoints and a picker whose index has seen a shared system prompt on
/// every endpoint plus a few conversations each.
fn fleet(n: u64, policy: &str) -> (Pool, Picker, String) {
    let specs = (0..n)
        .map(|i| {
            EndpointSpec::new(
                i,
                format!("10.{}.{}.{}:8000", i >> 16, (i >> 8) & 255, i & 255),
            )
        })
        .collect();
    let mut pool = Pool::new(specs).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..n {
        let m = ScrapedMetrics {
            waiting: Some(i % 7),
            running: Some(10 + i % 13),
            kv_usage: Some(0.2 + (i % 10) as f64 / 20.0),
            block_size: Some(16),
            num_gpu_blocks: Some(31_250),
            ..ScrapedMetrics::empty(Duration::from_millis(10))
        };
        let _ = pool.update_metrics(infergate_picker::EndpointId(i), m);
    }
    let mut picker = Picker::new(Policy::named(policy).unwrap_or_else(|e| panic!("{e}")), 1);
    let system = text(0, 6000);
    for i in 0..n {
        for c in 0..3 {
            let req = request(&format!("{system}{}", text(i * 10 + c, 2000)));
            let _ = picker.on_dispatch(
                &pool,
                infergate_picker::EndpointId(i),
                &req,
                Duration::from_millis(11),
            );
        }
    }
    let prompt = format!("{system}{}", text(u64::MAX, 10_000));
    (pool, picker, prompt)
}

fn prefix_hash(c: &mut Criterion) {
    let prompt = text(1, 16_000);
    let params = PrefixParams::default();
    let mut out = Vec::new();
    c.bench_function("prefix_hash/16k_chars", |b| {
        b.iter(|| {
            infergate_picker::prefix::hash_prompt_into(
                "llama",
                None,
                black_box(prompt.as_bytes()),
                &params,
                &mut out,
            );
            black_box(out.len())
        })
    });
}

fn prefix_hash_memo(c: &mut Criterion) {
    let params = PrefixParams::default();
    let system = text(2, 8_000);
    let stored = format!("{system}{}", text(3, 8_000));
    let asked = format!("{system}{}", text(4, 8_000));
    let mut out = Vec::new();
    let mut group = c.benchmark_group("prefix_hash_memo");
    let mut memo = HashMemo::default();
    memo.hash_into("llama", None, stored.as_bytes(), &params, &mut out);
    group.bench_function("shared_half", |b| {
        b.iter(|| {
            black_box(memo.hash_into(
                "llama",
                None,
                black_box(asked.as_bytes()),
                &params,
                &mut out,
            ))
        })
    });
    // Distinct prompts, more of them than slots, so each finds its slot taken by another.
    let prompts: Vec<String> = (0..2 * infergate_picker::prefix::DEFAULT_MEMO_SLOTS as u64)
        .map(|i| text(100 + i, 16_000))
        .collect();
    let mut memo = HashMemo::default();
    let mut next = prompts.iter().cycle();
    group.bench_function("first_seen", |b| {
        b.iter(|| {
            let prompt = next.next().map_or("", String::as_str);
            black_box(memo.hash_into(
                "llama",
                None,
                black_box(prompt.as_bytes()),
                &params,
                &mut out,
            ))
        })
    });
    group.finish();
}

fn prefix_match(c: &mut Criterion) {
    let mut group = c.benchmark_group("prefix_match");
    for n in [100u32, 5000] {
        let system = text(0, 6000);
        let mut index = PrefixIndex::new();
        for slot in 0..n {
            for k in 0..3 {
                let req = request(&format!("{system}{}", text(u64::from(slot) * 10 + k, 2000)));
                index.learn(slot, &req.prompt_block_hashes, 31_250);
            }
        }
        let query = request(&format!("{system}{}", text(u64::MAX, 10_000)));
        let mut out = Vec::new();
        group.bench_function(BenchmarkId::from_parameter(format!("{n}_endpoints")), |b| {
            b.iter(|| {
                index.match_into(black_box(&query.prompt_block_hashes), &mut out);
                black_box(out.len())
            })
        });
    }
    group.finish();
}

fn pick(c: &mut Criterion) {
    let mut group = c.benchmark_group("pick");
    for policy in ["infergate", "gie-default", "least-request"] {
        for n in [100u64, 5000] {
            let (pool, mut picker, prompt) = fleet(n, policy);
            let req = request(&prompt);
            group.bench_function(BenchmarkId::new(policy, format!("{n}_endpoints")), |b| {
                b.iter(|| {
                    picker
                        .pick(&pool, black_box(&req), Duration::from_millis(20))
                        .map(|p| p.primary)
                })
            });
        }
    }
    group.finish();
    let mut group = c.benchmark_group("pick_and_hash");
    for n in [100u64, 5000] {
        let (pool, mut picker, prompt) = fleet(n, "infergate");
        let params = PrefixParams::default();
        let mut req = RequestFeatures::new("m", (prompt.len() / 4) as u64);
        group.bench_function(
            BenchmarkId::new("infergate", format!("{n}_endpoints")),
            |b| {
                b.iter(|| {
                    infergate_picker::prefix::hash_prompt_into(
                        "m",
                        None,
                        prompt.as_bytes(),
                        &params,
                        &mut req.prompt_block_hashes,
                    );
                    picker
                        .pick(&pool, black_box(&req), Duration::from_millis(20))
                        .map(|p| p.primary)
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, prefix_hash, prefix_hash_memo, prefix_match, pick);
criterion_main!(benches);
