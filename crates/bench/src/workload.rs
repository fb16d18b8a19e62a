//! Workload generators: arrival processes and request shapes.
//!
//! Requests carry block hashes directly instead of text: a prompt is a chain of 16-token block
//! hashes, equal exactly where prompts share a prefix. The engine's prefix cache and the picker's
//! approximate index both key on such chains (the picker's 64-character chunks are 16 of the
//! simulator's 4-byte tokens), so no text needs to be made or hashed.

use infergate_config::gateway::Band;
use infergate_engine::tokens::mix;
use infergate_engine::BLOCK_SIZE;
use infergate_rng::SplitMix64;
use std::time::Duration;

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Exponential gaps.
    Poisson,
    /// Gamma gaps with this coefficient of variation (1 is Poisson; 4 is very bursty).
    Gamma {
        /// Coefficient of variation of the gaps.
        cv: f64,
    },
    /// A replayed trace's own timestamps, time-scaled (see [`crate::replay`]); for synthetic
    /// lengths, where there are no timestamps, exponential gaps.
    TraceTimestamps,
}

impl Arrivals {
    /// Arrival times at mean `rate` per second over `duration`.
    pub fn times(self, rate: f64, duration: Duration, rng: &mut SplitMix64) -> Vec<Duration> {
        let mean_gap = 1.0 / rate.max(1e-9);
        let mut t = 0.0;
        let mut out = Vec::new();
        loop {
            let gap = match self {
                Arrivals::Poisson | Arrivals::TraceTimestamps => {
                    -(1.0 - rng.next_f64()).ln() * mean_gap
                }
                Arrivals::Gamma { cv } => {
                    let shape = 1.0 / (cv * cv);
                    gamma(shape, rng) * mean_gap / shape
                }
            };
            t += gap;
            if t >= duration.as_secs_f64() {
                return out;
            }
            out.push(Duration::from_secs_f64(t));
        }
    }
}

/// A Gamma(`shape`, 1) draw (Marsaglia–Tsang; shapes below one boosted by `U^(1/shape)`).
pub fn gamma(shape: f64, rng: &mut SplitMix64) -> f64 {
    if shape < 1.0 {
        let u = rng.next_f64().max(f64::MIN_POSITIVE);
        return gamma(shape + 1.0, rng) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = rng.next_f64().max(f64::MIN_POSITIVE);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// What requests look like.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Unique prompts with (input, output) lengths drawn from a trace.
    Sampled(Vec<(u32, u32)>),
    /// inference-perf's `shared_prefix`: `groups` system prompts, each followed by one of
    /// `prompts_per_group` questions.
    SharedPrefix {
        /// System prompts.
        groups: u32,
        /// Questions per system prompt.
        prompts_per_group: u32,
        /// System prompt tokens.
        system_tokens: u32,
        /// Question tokens.
        question_tokens: u32,
        /// Output tokens.
        output_tokens: u32,
    },
}

/// One request of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRequest {
    /// When the client sends it.
    pub at: Duration,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Output tokens (generation ends there).
    pub output_tokens: u32,
    /// Chained hashes of the prompt's full 16-token blocks.
    pub block_hashes: Vec<u64>,
    /// LoRA adapter, if any.
    pub adapter: Option<String>,
    /// Priority band (`x-gateway-inference-objective`); `None` is Standard.
    pub band: Option<Band>,
    /// Tenant (`x-gateway-inference-fairness-id`), if any.
    pub tenant: Option<String>,
}

impl Shape {
    /// Requests at `times`, their lengths capped so prompt + output fits `max_model_len`.
    pub fn requests(
        &self,
        times: &[Duration],
        max_model_len: u32,
        rng: &mut SplitMix64,
    ) -> Vec<BenchRequest> {
        times
            .iter()
            .enumerate()
            .map(|(i, &at)| {
                let (prompt_tokens, output_tokens, block_hashes) = match self {
                    Shape::Sampled(pairs) => {
                        let (input, output) = pairs[rng.below(pairs.len())];
                        let output = output.max(1).min(max_model_len / 2);
                        let input = input.max(1).min(max_model_len - output);
                        (input, output, unique_chain(i as u64, input / BLOCK_SIZE))
                    }
                    Shape::SharedPrefix {
                        groups,
                        prompts_per_group,
                        system_tokens,
                        question_tokens,
                        output_tokens,
                    } => {
                        let group = rng.below(*groups as usize) as u64;
                        let question = rng.below(*prompts_per_group as usize) as u64;
                        let prompt = system_tokens + question_tokens;
                        let system_blocks = system_tokens / BLOCK_SIZE;
                        let mut hashes = chain(mix(0x5157_0000 ^ group), system_blocks, 0);
                        let tail = prompt / BLOCK_SIZE - system_blocks;
                        let parent = hashes.last().copied().unwrap_or(group);
                        hashes.extend(chain(
                            mix(parent ^ mix(question + 1)),
                            tail,
                            u64::from(system_blocks),
                        ));
                        (prompt, *output_tokens, hashes)
                    }
                };
                BenchRequest {
                    at,
                    prompt_tokens,
                    output_tokens,
                    block_hashes,
                    adapter: None,
                    band: None,
                    tenant: None,
                }
            })
            .collect()
    }
}

/// Hashes of `blocks` blocks no other request shares.
fn unique_chain(request: u64, blocks: u32) -> Vec<u64> {
    chain(mix(0xA11C_E000_0000 ^ request), blocks, 0)
}

/// A chain of `blocks` hashes seeded with `seed`; `offset` numbers the first block.
fn chain(seed: u64, blocks: u32, offset: u64) -> Vec<u64> {
    let mut parent = seed;
    (0..u64::from(blocks))
        .map(|i| {
            parent = mix(parent ^ (offset + i).wrapping_mul(0x9E37_79B9));
            parent
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cv(times: &[Duration]) -> f64 {
        let gaps: Vec<f64> = times
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        var.sqrt() / mean
    }

    #[test]
    fn arrival_processes_have_the_asked_rate_and_burstiness() {
        let mut rng = SplitMix64::new(1);
        let poisson = Arrivals::Poisson.times(100.0, Duration::from_secs(200), &mut rng);
        assert!((poisson.len() as f64 / 200.0 - 100.0).abs() < 3.0);
        assert!((cv(&poisson) - 1.0).abs() < 0.05, "{}", cv(&poisson));
        let bursty = Arrivals::Gamma { cv: 4.0 }.times(100.0, Duration::from_secs(2_000), &mut rng);
        assert!(
            (bursty.len() as f64 / 2_000.0 - 100.0).abs() < 10.0,
            "{}",
            bursty.len()
        );
        assert!((cv(&bursty) - 4.0).abs() < 0.5, "{}", cv(&bursty));
    }

    #[test]
    fn shared_prefix_requests_share_exactly_their_system_prompt() {
        let shape = Shape::SharedPrefix {
            groups: 2,
            prompts_per_group: 3,
            system_tokens: 64,
            question_tokens: 32,
            output_tokens: 8,
        };
        let times = vec![Duration::ZERO; 200];
        let reqs = shape.requests(&times, 4096, &mut SplitMix64::new(3));
        let a = &reqs[0];
        assert_eq!(a.block_hashes.len(), 6);
        let same_group: Vec<_> = reqs
            .iter()
            .filter(|r| r.block_hashes[..4] == a.block_hashes[..4])
            .collect();
        let other_group: Vec<_> = reqs
            .iter()
            .filter(|r| r.block_hashes[0] != a.block_hashes[0])
            .collect();
        assert!(!other_group.is_empty() && same_group.len() + other_group.len() == reqs.len());
        let distinct: std::collections::BTreeSet<_> =
            same_group.iter().map(|r| r.block_hashes[4]).collect();
        assert_eq!(distinct.len(), 3, "three questions per group");
    }

    #[test]
    fn sampled_prompts_are_unique_and_fit_the_model() {
        let shape = Shape::Sampled(vec![(5_000, 900), (100, 10)]);
        let reqs = shape.requests(&[Duration::ZERO; 50], 2_048, &mut SplitMix64::new(2));
        assert!(reqs
            .iter()
            .all(|r| r.prompt_tokens + r.output_tokens <= 2_048));
        let firsts: std::collections::BTreeSet<_> =
            reqs.iter().filter_map(|r| r.block_hashes.first()).collect();
        assert_eq!(
            firsts.len(),
            reqs.iter().filter(|r| !r.block_hashes.is_empty()).count()
        );
    }
}
