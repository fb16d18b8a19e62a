//! Scorers: each gives every candidate a score in `[0, 1]`; the profile's total is the plain
//! weighted sum (upstream's contract).
//!
//! A signal that is missing (or withheld because the endpoint's metrics are stale) scores 0 for
//! the scorer that needs it: unknown is not free. When every candidate lacks it, all score 0 and
//! the scorer has no say, which is the right degradation for, say, KV scoring on TGI.

mod affinity;
mod cache;
mod candidates;
mod load;
pub(crate) mod state;

pub(crate) use candidates::{Candidates, Members};

pub use affinity::lora_affinity_score;
pub use cache::{kv_headroom_score, prefix_score};
pub use load::{load_aware_score, min_max_scores, share_scores};

use crate::latency::LatencyModel;
use crate::pool::Pool;
use crate::request::RequestFeatures;
use state::{ColdLru, SessionTable};

/// A scorer and its parameters. Plugin type names are upstream's where upstream has the scorer.
#[derive(Debug, Clone, PartialEq)]
pub enum Scorer {
    /// `queue-scorer`: `(maxQ − q)/(maxQ − minQ)` on waiting requests; all equal → 1.
    Queue,
    /// `kv-cache-utilization-scorer`: `1 − kv_usage`.
    KvCache,
    /// `running-requests-size-scorer`: `(maxR − r)/(maxR − minR)`; all equal → 1.
    RunningRequests,
    /// `lora-affinity-scorer`: 1.0 adapter loaded; 0.8 a free slot; 0.6 adapter waiting; else 0.
    LoraAffinity,
    /// `prefix-cache-scorer`: matched blocks / request blocks, from the approximate index.
    Prefix,
    /// `prefix-affinity-scorer` (infergate): the prefix score damped by how much longer this
    /// endpoint's queue is than the shortest one: `ratio × slack / (slack + q − q_min)`.
    /// Affinity is worth a wait of a few requests, not an unbounded one.
    PrefixYieldingToLoad {
        /// Queue excess (requests) at which the affinity is halved.
        slack: f64,
    },
    /// `no-hit-lru-scorer`: for a request with no prefix hit anywhere, the endpoints that took a
    /// cold request least recently (or never) score highest; warm requests score 0.5 everywhere.
    NoHitLru,
    /// `load-aware-scorer`: `q == 0 → 0.5`, else `0.5 × (1 − min(q, T)/T)`.
    LoadAware {
        /// `T`, 128 by default.
        threshold: f64,
    },
    /// `active-request-scorer`: gateway-local in-flight requests, `(max − n)/max`; 0 → 1.
    ActiveRequest,
    /// `token-load-scorer`: like active-request over in-flight prompt tokens.
    TokenLoad,
    /// `session-affinity-scorer`: 1 for the endpoint the request's session last went to, else 0.
    SessionAffinity,
    /// `latency-scorer`: the learned TTFT model;
    /// `(min_predicted + tolerance) / (predicted + tolerance)`.
    ///
    /// The tolerance is added to every prediction so that the score weighs a difference by how
    /// large it is against a first token's scale, not by its ratio alone: 50 ms against 195 ms
    /// (a prefix hit against a miss, both far inside any TTFT objective) is a mild preference
    /// that KV use and affinity can outweigh, while 0.5 s against 5 s stays decisive. With a
    /// plain ratio the first pair scored 1 against 0.26, as strongly as the second, and
    /// differences of tens of milliseconds between equal pods (each pod's learned parameters,
    /// plus whose prefix it holds) herded a prefix-sharing pool's long decodes onto some pods
    /// until their KV caches filled and preempted (`docs/benchmarks.md`).
    PredictedLatency {
        /// Seconds added to every prediction (0: the plain ratio `min / predicted`).
        tolerance_s: f64,
    },
    /// `kv-headroom-scorer` (infergate): 1 while the KV use projected after this request stays
    /// under `soft_limit`, falling linearly to 0 at full, so requests avoid pods about to
    /// preempt.
    KvHeadroom {
        /// Projected KV use (0..1) from which the score starts to fall.
        soft_limit: f64,
    },
}

impl Scorer {
    /// The plugin type name.
    pub fn plugin_type(&self) -> &'static str {
        match self {
            Scorer::Queue => "queue-scorer",
            Scorer::KvCache => "kv-cache-utilization-scorer",
            Scorer::RunningRequests => "running-requests-size-scorer",
            Scorer::LoraAffinity => "lora-affinity-scorer",
            Scorer::Prefix => "prefix-cache-scorer",
            Scorer::PrefixYieldingToLoad { .. } => "prefix-affinity-scorer",
            Scorer::NoHitLru => "no-hit-lru-scorer",
            Scorer::LoadAware { .. } => "load-aware-scorer",
            Scorer::ActiveRequest => "active-request-scorer",
            Scorer::TokenLoad => "token-load-scorer",
            Scorer::SessionAffinity => "session-affinity-scorer",
            Scorer::PredictedLatency { .. } => "latency-scorer",
            Scorer::KvHeadroom { .. } => "kv-headroom-scorer",
        }
    }

    /// Whether the scorer reads the prefix match.
    pub(crate) fn needs_prefix(&self) -> bool {
        matches!(
            self,
            Scorer::Prefix
                | Scorer::PrefixYieldingToLoad { .. }
                | Scorer::PredictedLatency { .. }
                | Scorer::KvHeadroom { .. }
        )
    }

    /// Adds `weight ×` the score of every candidate to `totals` (one entry per candidate).
    ///
    /// Fused with the weighted sum so that each scorer is one or two passes over the columns it
    /// reads and nothing else. `work` is scratch space kept by the caller.
    pub(crate) fn add_scores(
        &self,
        input: &ScoreInput<'_>,
        cands: &Candidates,
        weight: f64,
        totals: &mut [f64],
        work: &mut Work,
    ) {
        match self {
            Scorer::Queue => load::queue(cands, weight, totals),
            Scorer::KvCache => cache::kv_cache(cands, weight, totals),
            Scorer::RunningRequests => load::running(cands, weight, totals),
            Scorer::LoraAffinity => affinity::lora(input, cands, weight, totals),
            Scorer::Prefix => cache::prefix(input, cands, weight, totals),
            Scorer::PrefixYieldingToLoad { slack } => {
                cache::prefix_yielding(input, cands, *slack, weight, totals)
            }
            Scorer::NoHitLru => affinity::no_hit_lru(input, cands, weight, totals, work),
            Scorer::LoadAware { threshold } => load::load_aware(cands, *threshold, weight, totals),
            Scorer::ActiveRequest => load::active_request(cands, weight, totals),
            Scorer::TokenLoad => load::token_load(cands, weight, totals),
            Scorer::SessionAffinity => affinity::session(input, cands, weight, totals),
            Scorer::PredictedLatency { tolerance_s } => {
                load::predicted_latency(input, cands, *tolerance_s, weight, totals, work)
            }
            Scorer::KvHeadroom { soft_limit } => {
                cache::kv_headroom(cands, *soft_limit, weight, totals)
            }
        }
    }
}

/// Scratch buffers a scorer may need, kept by the picker so that a pick allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Work {
    /// One value per candidate.
    pub values: Vec<f64>,
    /// `(key, candidate)` pairs, for scorers that rank.
    pub order: Vec<(u64, u32)>,
}

/// `opt(x)`: a column value as an `Option`, NaN meaning unknown.
pub(crate) fn opt(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

/// Everything a scorer may read besides the candidates.
pub(crate) struct ScoreInput<'a> {
    pub pool: &'a Pool,
    pub req: &'a RequestFeatures,
    pub latency: &'a LatencyModel,
    pub cold_lru: &'a ColdLru,
    pub sessions: &'a SessionTable,
    /// No endpoint holds the request's first block.
    pub cold: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{EndpointId, EndpointSpec, ScrapedMetrics};
    use crate::latency::{LatencyParams, TtftFeatures};
    use std::time::Duration;

    /// Three endpoints with the given waiting / running / kv (None = not exported).
    fn pool(rows: [(Option<u64>, Option<u64>, Option<f64>); 3]) -> Pool {
        let specs = (0..3)
            .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:80")))
            .collect();
        let mut pool = Pool::new(specs).unwrap();
        for (i, (w, r, kv)) in rows.into_iter().enumerate() {
            let m = ScrapedMetrics {
                waiting: w,
                running: r,
                kv_usage: kv,
                block_size: Some(16),
                num_gpu_blocks: Some(625), // 10,000 tokens
                ..ScrapedMetrics::empty(Duration::ZERO)
            };
            pool.update_metrics(EndpointId(i as u64), m).unwrap();
        }
        pool
    }

    struct Fixture {
        pool: Pool,
        req: RequestFeatures,
        latency: LatencyModel,
        cold_lru: ColdLru,
        sessions: SessionTable,
        cold: bool,
        matched: [u32; 3],
    }

    impl Fixture {
        fn new(pool: Pool) -> Self {
            Self {
                pool,
                req: RequestFeatures {
                    prompt_block_hashes: (1..=8).collect(),
                    ..RequestFeatures::new("m", 1000)
                },
                latency: LatencyModel::new(LatencyParams::default()),
                cold_lru: ColdLru::default(),
                sessions: SessionTable::new(16),
                cold: false,
                matched: [0; 3],
            }
        }

        fn score(&self, scorer: Scorer) -> Vec<f64> {
            let mut cands = Candidates::default();
            cands.fill(&self.pool, Members::All, &[0, 1, 2], false);
            cands.matched_blocks = self.matched.to_vec();
            cands.derive(self.req.prompt_tokens, 16);
            let input = ScoreInput {
                pool: &self.pool,
                req: &self.req,
                latency: &self.latency,
                cold_lru: &self.cold_lru,
                sessions: &self.sessions,
                cold: self.cold,
            };
            // Scores add onto what is there, weighted: start from 1 and weigh by 2 to prove it.
            let mut totals = vec![1.0; 3];
            scorer.add_scores(&input, &cands, 2.0, &mut totals, &mut Work::default());
            totals.iter().map(|t| (t - 1.0) / 2.0).collect()
        }
    }

    fn assert_close(got: &[f64], want: &[f64], what: &str) {
        assert!(
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9),
            "{what}: got {got:?}, want {want:?}"
        );
    }

    #[test]
    fn every_scorer_against_hand_computed_cases() {
        let f = Fixture::new(pool([
            (Some(0), Some(2), Some(0.2)),
            (Some(5), Some(4), Some(0.5)),
            (Some(10), Some(6), None),
        ]));
        let cases: Vec<(Scorer, [f64; 3])> = vec![
            (Scorer::Queue, [1.0, 0.5, 0.0]),
            (Scorer::RunningRequests, [1.0, 0.5, 0.0]),
            (Scorer::KvCache, [0.8, 0.5, 0.0]),
            (Scorer::LoadAware { threshold: 10.0 }, [0.5, 0.25, 0.0]),
            // Nothing in flight anywhere: all idle.
            (Scorer::ActiveRequest, [1.0, 1.0, 1.0]),
            (Scorer::TokenLoad, [1.0, 1.0, 1.0]),
            // No prefix match anywhere.
            (Scorer::Prefix, [0.0, 0.0, 0.0]),
            // Defaults, all cold: 0.02 + q × 0.05 + 1000 tokens / 10k tok/s.
            (
                Scorer::PredictedLatency { tolerance_s: 0.0 },
                [1.0, 0.12 / 0.37, 0.12 / 0.62],
            ),
            // The same with 0.5 s added to each prediction.
            (
                Scorer::PredictedLatency { tolerance_s: 0.5 },
                [1.0, 0.62 / 0.87, 0.62 / 1.12],
            ),
            // Projected: 0.2 + 1000/10000 = 0.3 → 1; 0.5 + 0.1 = 0.6 → 1; unknown → 0.
            (Scorer::KvHeadroom { soft_limit: 0.8 }, [1.0, 1.0, 0.0]),
            // No adapter: neutral.
            (Scorer::LoraAffinity, [1.0, 1.0, 1.0]),
            // No session.
            (Scorer::SessionAffinity, [0.0, 0.0, 0.0]),
            // A warm request: neutral.
            (Scorer::NoHitLru, [0.5, 0.5, 0.5]),
        ];
        for (scorer, want) in cases {
            assert_close(&f.score(scorer.clone()), &want, scorer.plugin_type());
        }
    }

    #[test]
    fn prefix_and_prefix_yielding_to_load() {
        let mut f = Fixture::new(pool([
            (Some(0), None, None),
            (Some(4), None, None),
            (Some(12), None, None),
        ]));
        f.matched = [8, 8, 4];
        assert_close(&f.score(Scorer::Prefix), &[1.0, 1.0, 0.5], "prefix");
        // × 4 / (4 + q − q_min): 1, 4/8, 0.5 × 4/16.
        assert_close(
            &f.score(Scorer::PrefixYieldingToLoad { slack: 4.0 }),
            &[1.0, 0.5, 0.125],
            "prefix-affinity",
        );
        // Fewer uncached tokens predict a faster first token: e0 and e1 have 128 of 1000 cached.
        let p = |q: f64, u: f64| 0.02 + q * 0.05 + u / 10_000.0;
        let (a, b, c) = (p(0.0, 872.0), p(4.0, 872.0), p(12.0, 936.0));
        assert_close(
            &f.score(Scorer::PredictedLatency { tolerance_s: 0.0 }),
            &[1.0, a / b, a / c],
            "latency",
        );
    }

    #[test]
    fn in_flight_scorers_read_the_gateway_counters() {
        let f = Fixture::new(pool([(None, None, None); 3]));
        let c0 = f.pool.counters(EndpointId(0)).unwrap();
        let c1 = f.pool.counters(EndpointId(1)).unwrap();
        let _g = [
            c0.dispatch(300, 0),
            c0.dispatch(100, 0),
            c1.dispatch(100, 0),
        ];
        // Requests 2, 1, 0 → (2 − n)/2; tokens 400, 100, 0 → (400 − t)/400.
        assert_close(&f.score(Scorer::ActiveRequest), &[0.0, 0.5, 1.0], "active");
        assert_close(&f.score(Scorer::TokenLoad), &[0.0, 0.75, 1.0], "token");
        // No scraped queue: unknown scores 0.
        assert_close(&f.score(Scorer::Queue), &[0.0, 0.0, 0.0], "queue");
    }

    #[test]
    fn no_hit_lru_ranks_never_used_first_then_least_recent() {
        let mut f = Fixture::new(pool([(Some(0), None, None); 3]));
        f.cold = true;
        f.cold_lru.touch(0);
        f.cold_lru.touch(2);
        // Ranks: e1 never (0) → 1; e0 older (1) → 0.5; e2 most recent (2) → 0.
        assert_close(&f.score(Scorer::NoHitLru), &[0.5, 1.0, 0.0], "no-hit-lru");
        f.cold_lru.touch(0);
        assert_close(
            &f.score(Scorer::NoHitLru),
            &[0.0, 1.0, 0.5],
            "no-hit-lru after touch",
        );
    }

    #[test]
    fn session_affinity_scores_the_sessions_endpoint() {
        let mut f = Fixture::new(pool([(Some(0), None, None); 3]));
        f.sessions.learn("s1", EndpointId(2));
        f.req.session = Some("s1".into());
        assert_close(
            &f.score(Scorer::SessionAffinity),
            &[0.0, 0.0, 1.0],
            "session",
        );
        f.req.session = Some("other".into());
        assert_close(
            &f.score(Scorer::SessionAffinity),
            &[0.0, 0.0, 0.0],
            "unknown session",
        );
    }

    /// One candidate's signals, as the property test draws them: `None` is unknown.
    type Row = (
        Option<f64>,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        u32,
        u32,
        u32,
        u32,
    );

    fn row() -> impl proptest::strategy::Strategy<Value = Row> {
        use proptest::prelude::*;
        let opt = |s: std::ops::Range<f64>| proptest::option::weighted(0.8, s);
        (
            opt(0.0..40.0).prop_map(|w| w.map(f64::round)),
            opt(0.0..200.0).prop_map(|r| r.map(f64::round)),
            opt(0.0..1.0),
            opt(1_000.0..500_000.0).prop_map(|c| c.map(f64::round)),
            0u32..8,
            0u32..20_000,
            0u32..5_000,
            0u32..300,
        )
    }

    proptest::proptest! {
        /// The column kernels compute the published per-candidate formulas (to within rounding:
        /// some multiply by a reciprocal where the formula divides), unknowns included.
        #[test]
        fn column_kernels_equal_the_formulas(
            rows in proptest::collection::vec(row(), 1..24),
            prompt_blocks in 1usize..300,
        ) {
            let n = rows.len();
            let specs = (0..n as u64)
                .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:80")))
                .collect();
            let pool = Pool::new(specs).unwrap();
            let mut c = Candidates::default();
            c.fill(&pool, Members::All, &(0..n as u32).collect::<Vec<_>>(), false);
            let nan = |x: Option<f64>| x.unwrap_or(f64::NAN);
            for (i, &(w, r, kv, cap, in_flight, tokens, credit, matched)) in rows.iter().enumerate() {
                c.waiting[i] = nan(w);
                c.running[i] = nan(r);
                c.kv[i] = nan(kv);
                c.kv_share_per_token[i] = cap.map_or(0.0, |c| 1.0 / c);
                c.in_flight[i] = in_flight;
                c.in_flight_tokens[i] = u64::from(tokens);
                c.token_credit[i] = credit;
                c.matched_blocks[i] = matched.min(prompt_blocks as u32);
            }
            let prompt_tokens = prompt_blocks as u64 * 16 + 7;
            c.derive(prompt_tokens, 16);
            let req = RequestFeatures {
                prompt_block_hashes: (0..prompt_blocks as u64).collect(),
                ..RequestFeatures::new("m", prompt_tokens)
            };
            let latency = LatencyModel::new(LatencyParams::default());
            let (cold_lru, sessions) = (ColdLru::default(), SessionTable::new(4));
            let input = ScoreInput {
                pool: &pool,
                req: &req,
                latency: &latency,
                cold_lru: &cold_lru,
                sessions: &sessions,
                cold: false,
            };
            let kernel = |scorer: Scorer| {
                let mut totals = vec![0.0; n];
                scorer.add_scores(&input, &c, 1.0, &mut totals, &mut Work::default());
                totals
            };
            let opt = |x: f64| (!x.is_nan()).then_some(x);
            let mut want = vec![0.0; n];
            let total = prompt_blocks;

            min_max_scores(c.waiting.iter().map(|&w| opt(w)), &mut want);
            assert_close(&kernel(Scorer::Queue), &want, "queue");
            min_max_scores(c.running.iter().map(|&r| opt(r)), &mut want);
            assert_close(&kernel(Scorer::RunningRequests), &want, "running");
            share_scores(c.in_flight.iter().map(|&x| f64::from(x)), &mut want);
            assert_close(&kernel(Scorer::ActiveRequest), &want, "active");
            share_scores(c.in_flight_tokens.iter().map(|&x| x as f64), &mut want);
            assert_close(&kernel(Scorer::TokenLoad), &want, "tokens");

            let per = |f: &dyn Fn(usize) -> f64| (0..n).map(f).collect::<Vec<f64>>();
            let kv_cache = per(&|i| opt(c.kv[i]).map_or(0.0, |k| 1.0 - k));
            assert_close(&kernel(Scorer::KvCache), &kv_cache, "kv");
            let load_aware = per(&|i| load_aware_score(opt(c.waiting[i]), 16.0));
            assert_close(&kernel(Scorer::LoadAware { threshold: 16.0 }), &load_aware, "load-aware");
            let prefix = per(&|i| prefix_score(c.matched_blocks[i], total));
            assert_close(&kernel(Scorer::Prefix), &prefix, "prefix");
            let q_min = c.queue_ahead.iter().copied().fold(f64::INFINITY, f64::min);
            let yielding = per(&|i| {
                prefix_score(c.matched_blocks[i], total) * 4.0
                    / (4.0 + (c.queue_ahead[i] - q_min).max(0.0))
            });
            assert_close(
                &kernel(Scorer::PrefixYieldingToLoad { slack: 4.0 }),
                &yielding,
                "prefix-affinity",
            );
            for soft in [0.0, 0.85, 1.0] {
                let headroom = per(&|i| {
                    let cap = rows[i].3;
                    let added = f64::from(c.token_credit[i]) + c.uncached_tokens[i];
                    kv_headroom_score(opt(c.kv[i]), added, cap, soft)
                });
                assert_close(
                    &kernel(Scorer::KvHeadroom { soft_limit: soft }),
                    &headroom,
                    "kv-headroom",
                );
            }
            let predicted = per(&|i| {
                latency.predict(
                    i as u32,
                    &TtftFeatures {
                        queue_ahead: c.queue_ahead[i],
                        uncached_tokens: c.uncached_tokens[i],
                        prefill_ahead: c.prefill_ahead[i],
                    },
                )
            });
            let fastest = predicted.iter().copied().fold(f64::INFINITY, f64::min);
            for tolerance_s in [0.0, 0.5] {
                let latency_scores =
                    per(&|i| (fastest + tolerance_s) / (predicted[i] + tolerance_s));
                assert_close(
                    &kernel(Scorer::PredictedLatency { tolerance_s }),
                    &latency_scores,
                    "latency",
                );
            }
        }
    }
}
