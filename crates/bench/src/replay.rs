//! Trace replay: a production trace's own arrivals, time-scaled to the load a scenario asks for,
//! with its prompt lengths and (for Mooncake) its real prefix sharing.

use crate::trace::{CapturedRequest, MooncakeRequest, TraceRequest, MOONCAKE_BLOCK_TOKENS};
use crate::workload::BenchRequest;
use infergate_engine::tokens::mix;
use infergate_engine::BLOCK_SIZE;
use infergate_rng::SplitMix64;
use std::time::Duration;

/// A trace to replay.
#[derive(Debug, Clone, PartialEq)]
pub enum Recorded {
    /// Lengths only (the Azure trace): every prompt is unique.
    Lengths(Vec<TraceRequest>),
    /// Lengths and 512-token prefix block ids (the Mooncake trace).
    Blocks(Vec<MooncakeRequest>),
    /// infergate's own capture: lengths, the picker's 16-token prefix hashes, and each
    /// request's adapter, tenant and band, all replayed.
    Captured(Vec<CapturedRequest>),
}

impl Recorded {
    /// Requests in the trace.
    pub fn len(&self) -> usize {
        match self {
            Recorded::Lengths(r) => r.len(),
            Recorded::Blocks(r) => r.len(),
            Recorded::Captured(r) => r.len(),
        }
    }

    fn request(&self, i: usize) -> Option<&TraceRequest> {
        match self {
            Recorded::Lengths(r) => r.get(i),
            Recorded::Blocks(r) => r.get(i).map(|m| &m.request),
            Recorded::Captured(r) => r.get(i).map(|c| &c.request),
        }
    }

    /// (input, output) lengths of every request, for measuring capacity on the trace's mix.
    pub fn lengths(&self) -> Vec<(u32, u32)> {
        (0..self.len())
            .filter_map(|i| self.request(i))
            .map(|r| (r.input_tokens, r.output_tokens))
            .collect()
    }

    /// Whether the trace holds no request.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// From the first arrival to the last.
    pub fn span(&self) -> Duration {
        self.request(self.len().saturating_sub(1))
            .map_or(Duration::ZERO, |r| r.at)
    }

    /// Requests per second over the whole trace.
    fn natural_rate(&self) -> f64 {
        let n = self.len();
        let span = self
            .request(n.saturating_sub(1))
            .map_or(0.0, |r| r.at.as_secs_f64());
        if n < 2 || span <= 0.0 {
            return 0.0;
        }
        (n - 1) as f64 / span
    }

    /// The requests of one window of the trace, its clock sped up (or slowed) so that they
    /// arrive at `rate` on average, for `duration`. The window starts at a point drawn from
    /// `rng` (each seed replays a different stretch) such that it fits inside the trace when the
    /// trace is long enough. Lengths are capped so prompt + output fits `max_model_len`.
    pub fn window(
        &self,
        rate: f64,
        duration: Duration,
        max_model_len: u32,
        rng: &mut SplitMix64,
    ) -> Vec<BenchRequest> {
        let natural = self.natural_rate();
        if natural <= 0.0 || rate <= 0.0 {
            return Vec::new();
        }
        // Trace seconds per replayed second.
        let speedup = rate / natural;
        let needed = duration.as_secs_f64() * speedup;
        let span = self
            .request(self.len().saturating_sub(1))
            .map_or(0.0, |r| r.at.as_secs_f64());
        let start = rng.next_f64() * (span - needed).max(0.0);
        let mut out = Vec::new();
        for i in 0..self.len() {
            let Some(r) = self.request(i) else { continue };
            let t = r.at.as_secs_f64();
            if t < start {
                continue;
            }
            if t >= start + needed {
                break;
            }
            let output = r.output_tokens.max(1).min(max_model_len / 2);
            let input = r.input_tokens.max(1).min(max_model_len - output);
            let block_hashes = match self {
                Recorded::Lengths(_) => unique_blocks(i as u64, input / BLOCK_SIZE),
                Recorded::Blocks(m) => m
                    .get(i)
                    .map(|m| shared_blocks(&m.hash_ids, input / BLOCK_SIZE))
                    .unwrap_or_default(),
                Recorded::Captured(c) => c
                    .get(i)
                    .map(|c| captured_blocks(&c.prefix_hashes, i as u64, input / BLOCK_SIZE))
                    .unwrap_or_default(),
            };
            let (adapter, band, tenant) = match self {
                Recorded::Captured(c) => c
                    .get(i)
                    .map(|c| (c.adapter.clone(), Some(c.band), c.tenant.clone()))
                    .unwrap_or_default(),
                _ => (None, None, None),
            };
            out.push(BenchRequest {
                at: Duration::from_secs_f64((t - start) / speedup),
                prompt_tokens: input,
                output_tokens: output,
                block_hashes,
                adapter,
                band,
                tenant,
            });
        }
        out
    }
}

/// Engine blocks of a prompt no other request shares.
fn unique_blocks(request: u64, blocks: u32) -> Vec<u64> {
    let mut parent = mix(0x7ACE_0000_0000 ^ request);
    (0..u64::from(blocks))
        .map(|i| {
            parent = mix(parent ^ i.wrapping_mul(0x9E37_79B9));
            parent
        })
        .collect()
}

/// The `blocks` engine blocks of a captured prompt: its prefix hashes as they are — each names a
/// 64-character (16-token) block and the chain before it, exactly an engine block — then filler
/// no other request shares, where the picker stopped hashing (its block limit) or the prompt's
/// tokens outnumber its text's 64-character blocks.
fn captured_blocks(prefix: &[u64], request: u64, blocks: u32) -> Vec<u64> {
    let shared = prefix.len().min(blocks as usize);
    let mut out = prefix[..shared].to_vec();
    out.extend(unique_blocks(
        request ^ 0xCA97_0000_0000,
        blocks - shared as u32,
    ));
    out
}

/// The first `blocks` engine blocks (16 tokens) of a prompt made of 512-token blocks named by
/// `ids`: chained, so two prompts share exactly the engine blocks of their common leading ids.
fn shared_blocks(ids: &[u64], blocks: u32) -> Vec<u64> {
    let per_id = (MOONCAKE_BLOCK_TOKENS / BLOCK_SIZE) as usize;
    let mut parent = 0x300C_CA4E_u64;
    let mut out = Vec::with_capacity(blocks as usize);
    'ids: for &id in ids {
        let seed = mix(id);
        for j in 0..per_id {
            if out.len() >= blocks as usize {
                break 'ids;
            }
            parent = mix(parent ^ seed ^ (j as u64).wrapping_mul(0x9E37_79B9));
            out.push(parent);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(n: u64, gap_ms: u64) -> Recorded {
        Recorded::Lengths(
            (0..n)
                .map(|i| TraceRequest {
                    at: Duration::from_millis(i * gap_ms),
                    input_tokens: 100,
                    output_tokens: 10,
                })
                .collect(),
        )
    }

    #[test]
    fn a_window_is_time_scaled_to_the_asked_rate() {
        // 10 req/s for 1,000 s, replayed at 40 req/s for 20 s: 800 requests, 4× faster.
        let trace = lengths(10_001, 100);
        let reqs = trace.window(
            40.0,
            Duration::from_secs(20),
            4_096,
            &mut SplitMix64::new(1),
        );
        assert!((reqs.len() as i64 - 800).abs() <= 1, "{}", reqs.len());
        let gap = reqs[1].at - reqs[0].at;
        assert_eq!(gap, Duration::from_millis(25));
        assert!(reqs.last().unwrap().at < Duration::from_secs(20));
        // Another seed replays another stretch.
        let other = trace.window(
            40.0,
            Duration::from_secs(20),
            4_096,
            &mut SplitMix64::new(2),
        );
        assert_ne!(reqs[0].block_hashes, other[0].block_hashes);
    }

    #[test]
    fn captured_prompts_share_exactly_their_captured_prefix_and_keep_adapter_tenant_band() {
        use infergate_config::gateway::Band;
        let req = |at_ms: u64, hashes: Vec<u64>, input, band| CapturedRequest {
            request: TraceRequest {
                at: Duration::from_millis(at_ms),
                input_tokens: input,
                output_tokens: 5,
            },
            prefix_hashes: hashes,
            adapter: Some("sql-lora".into()),
            tenant: Some("t".into()),
            band,
        };
        let trace = Recorded::Captured(vec![
            req(0, vec![10, 11, 12], 100, Band::Critical),
            req(1_000, vec![10, 11, 99], 64, Band::Sheddable),
            req(2_000, vec![], 40, Band::Standard),
        ]);
        // Three requests over 2 s replayed at 1.5 req/s for 10 s: all of them, at their times.
        let reqs = trace.window(1.5, Duration::from_secs(10), 4_096, &mut SplitMix64::new(1));
        assert_eq!(reqs.len(), 3);
        let gap = (reqs[1].at - reqs[0].at).as_secs_f64();
        assert!((gap - 2.0 / 3.0).abs() < 1e-6, "{gap}");
        // 100 tokens: 6 engine blocks, 3 captured then 3 of the request's own.
        assert_eq!(reqs[0].block_hashes.len(), 6);
        assert_eq!(reqs[0].block_hashes[..3], [10, 11, 12]);
        assert_eq!(
            reqs[1].block_hashes,
            vec![10, 11, 99, reqs[1].block_hashes[3]]
        );
        assert!(!reqs[0].block_hashes[3..].contains(&reqs[1].block_hashes[3]));
        assert_eq!(reqs[2].block_hashes.len(), 2);
        assert_eq!(reqs[0].adapter.as_deref(), Some("sql-lora"));
        assert_eq!(reqs[0].tenant.as_deref(), Some("t"));
        assert_eq!(
            reqs.iter().map(|r| r.band).collect::<Vec<_>>(),
            vec![
                Some(Band::Critical),
                Some(Band::Sheddable),
                Some(Band::Standard)
            ]
        );
    }

    #[test]
    fn mooncake_prompts_share_exactly_their_common_leading_blocks() {
        let req = |ids: Vec<u64>, input| MooncakeRequest {
            request: TraceRequest {
                at: Duration::ZERO,
                input_tokens: input,
                output_tokens: 5,
            },
            hash_ids: ids,
        };
        let a = shared_blocks(&req(vec![0, 1, 2], 1_500).hash_ids, 1_500 / 16);
        let b = shared_blocks(&req(vec![0, 1, 7], 1_100).hash_ids, 1_100 / 16);
        let c = shared_blocks(&req(vec![9, 1, 2], 1_500).hash_ids, 1_500 / 16);
        assert_eq!(a.len(), 93);
        assert_eq!(b.len(), 68);
        // Two 512-token ids in common: 64 engine blocks.
        let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        assert_eq!(common, 64);
        // A different first id shares nothing, even where later ids are equal.
        assert!(a.iter().zip(&c).all(|(x, y)| x != y));
    }
}
