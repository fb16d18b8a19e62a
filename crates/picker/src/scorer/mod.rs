//! Scorers: each gives every candidate a score in `[0, 1]`; the profile's total is the plain
//! weighted sum (upstream's contract).
//!
//! A signal that is missing (or withheld because the endpoint's metrics are stale) scores 0 for
//! the scorer that needs it: unknown is not free. When every candidate lacks it, all score 0 and
//! the scorer has no say, which is the right degradation for, say, KV scoring on TGI.

mod affinity;
mod cache;
mod load;
pub(crate) mod state;

pub use affinity::lora_affinity_score;
pub use cache::{kv_headroom_score, prefix_score};
pub use load::{load_aware_score, min_max_scores, share_scores};

use crate::latency::{LatencyModel, TtftFeatures};
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
    /// `latency-scorer`: the learned TTFT model; `min_predicted / predicted`.
    PredictedLatency,
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
            Scorer::PredictedLatency => "latency-scorer",
            Scorer::KvHeadroom { .. } => "kv-headroom-scorer",
        }
    }

    /// Whether the scorer reads the prefix match.
    pub(crate) fn needs_prefix(&self) -> bool {
        matches!(
            self,
            Scorer::Prefix
                | Scorer::PrefixYieldingToLoad { .. }
                | Scorer::PredictedLatency
                | Scorer::KvHeadroom { .. }
        )
    }

    /// Fills `out[i]` with the score of `cands[i]`.
    pub(crate) fn score(&self, input: &ScoreInput<'_>, cands: &[Candidate], out: &mut [f64]) {
        match self {
            Scorer::Queue => load::queue(cands, out),
            Scorer::KvCache => cache::kv_cache(cands, out),
            Scorer::RunningRequests => load::running(cands, out),
            Scorer::LoraAffinity => affinity::lora(input, cands, out),
            Scorer::Prefix => cache::prefix(input, cands, out),
            Scorer::PrefixYieldingToLoad { slack } => {
                cache::prefix_yielding(input, cands, *slack, out)
            }
            Scorer::NoHitLru => affinity::no_hit_lru(input, cands, out),
            Scorer::LoadAware { threshold } => load::load_aware(cands, *threshold, out),
            Scorer::ActiveRequest => load::active_request(cands, out),
            Scorer::TokenLoad => load::token_load(cands, out),
            Scorer::SessionAffinity => affinity::session(input, cands, out),
            Scorer::PredictedLatency => load::predicted_latency(input, cands, out),
            Scorer::KvHeadroom { soft_limit } => cache::kv_headroom(input, cands, *soft_limit, out),
        }
    }
}

/// One candidate endpoint as the scorers see it: plain values read once per pick.
///
/// Kept to one cache line (64 bytes): every scorer streams over the whole candidate list, so at
/// thousands of endpoints its size is most of a pick's cost. Unknown signals are NaN inside and
/// `None` through the accessors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    pos: u32,
    /// The picker's slot for the endpoint's learned state.
    pub slot: u32,
    waiting: f64,
    running: f64,
    kv: f64,
    kv_capacity_tokens: f64,
    /// Requests this gateway has in flight there.
    pub in_flight: u32,
    /// Prefix blocks of the request this endpoint probably holds.
    pub matched_blocks: u32,
    /// Prompt tokens this gateway has in flight there.
    pub in_flight_tokens: u64,
    /// Prompt tokens dispatched since its last scrape and still in flight.
    pub token_credit: u32,
    /// Metrics withheld from scorers (stale, kept only because every endpoint was stale).
    pub hidden: bool,
}

fn known(x: Option<f64>) -> f64 {
    x.filter(|v| v.is_finite()).unwrap_or(f64::NAN)
}

fn opt(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

impl Candidate {
    /// Reads one endpoint's signals from the pool.
    pub(crate) fn read(pool: &Pool, pos: usize, slot: u32, fresh_load: bool) -> Self {
        let s = pool.signals_at(pos);
        let local = pool.local_load_since(pos, s.mark);
        let credit = if fresh_load {
            local.queue_credit() as f64
        } else {
            0.0
        };
        Self {
            pos: pos as u32,
            slot,
            waiting: s.waiting + credit,
            running: s.running,
            kv: s.kv,
            kv_capacity_tokens: s.kv_capacity_tokens,
            in_flight: u32::try_from(local.in_flight_requests).unwrap_or(u32::MAX),
            matched_blocks: 0,
            in_flight_tokens: local.in_flight_tokens,
            token_credit: u32::try_from(local.token_credit()).unwrap_or(u32::MAX),
            hidden: false,
        }
    }

    /// Position in the pool.
    pub(crate) fn pos(&self) -> usize {
        self.pos as usize
    }

    /// Waiting requests: scraped, plus the dispatch credit when the profile uses fresh load.
    pub(crate) fn waiting(&self) -> Option<f64> {
        opt(self.waiting)
    }

    /// Running requests (scraped).
    pub(crate) fn running(&self) -> Option<f64> {
        opt(self.running)
    }

    /// KV use in `0..=1` (scraped).
    pub(crate) fn kv(&self) -> Option<f64> {
        opt(self.kv)
    }

    /// KV capacity in tokens (scraped block size × blocks).
    pub(crate) fn kv_capacity_tokens(&self) -> Option<f64> {
        opt(self.kv_capacity_tokens)
    }

    /// Withholds every scraped signal (the endpoint's metrics are stale).
    pub(crate) fn hide_metrics(&mut self) {
        self.hidden = true;
        self.waiting = f64::NAN;
        self.running = f64::NAN;
        self.kv = f64::NAN;
        self.kv_capacity_tokens = f64::NAN;
    }

    /// Requests ahead of a new one: the (fresh) scraped queue, or, when the server does not
    /// report one, what this gateway has in flight there.
    pub(crate) fn queue_ahead(&self) -> f64 {
        self.waiting().unwrap_or(f64::from(self.in_flight))
    }
}

/// A scraped signal as stored in the pool's compact per-endpoint array.
pub(crate) fn signal(x: Option<f64>) -> f64 {
    known(x)
}

/// Everything a scorer may read besides the candidates.
pub(crate) struct ScoreInput<'a> {
    pub pool: &'a Pool,
    pub req: &'a RequestFeatures,
    /// Tokens per prefix block.
    pub block_tokens: u64,
    pub latency: &'a LatencyModel,
    pub cold_lru: &'a ColdLru,
    pub sessions: &'a SessionTable,
    /// No endpoint holds the request's first block.
    pub cold: bool,
}

impl ScoreInput<'_> {
    /// Prompt tokens of the request that `c` probably does not have cached.
    pub(crate) fn uncached_tokens(&self, c: &Candidate) -> f64 {
        let cached = u64::from(c.matched_blocks).saturating_mul(self.block_tokens);
        self.req.prompt_tokens.saturating_sub(cached) as f64
    }

    /// The latency model's features for `c`.
    pub(crate) fn ttft_features(&self, c: &Candidate) -> TtftFeatures {
        TtftFeatures {
            queue_ahead: c.queue_ahead(),
            uncached_tokens: self.uncached_tokens(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{EndpointId, EndpointSpec, ScrapedMetrics};
    use crate::latency::LatencyParams;
    use std::time::Duration;

    #[test]
    fn a_candidate_fits_one_cache_line() {
        assert!(std::mem::size_of::<Candidate>() <= 64);
    }

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
            let cands: Vec<Candidate> = (0..3)
                .map(|i| {
                    let mut c = Candidate::read(&self.pool, i, i as u32, false);
                    c.matched_blocks = self.matched[i];
                    c
                })
                .collect();
            let input = ScoreInput {
                pool: &self.pool,
                req: &self.req,
                block_tokens: 16,
                latency: &self.latency,
                cold_lru: &self.cold_lru,
                sessions: &self.sessions,
                cold: self.cold,
            };
            let mut out = vec![f64::NAN; 3];
            scorer.score(&input, &cands, &mut out);
            out
        }
    }

    fn assert_close(got: &[f64], want: &[f64], what: &str) {
        assert!(
            got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9),
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
            (Scorer::PredictedLatency, [1.0, 0.12 / 0.37, 0.12 / 0.62]),
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
            &f.score(Scorer::PredictedLatency),
            &[1.0, a / b, a / c],
            "latency",
        );
    }

    #[test]
    fn in_flight_scorers_read_the_gateway_counters() {
        let f = Fixture::new(pool([(None, None, None); 3]));
        let c0 = f.pool.counters(EndpointId(0)).unwrap();
        let c1 = f.pool.counters(EndpointId(1)).unwrap();
        let _g = [c0.dispatch(300), c0.dispatch(100), c1.dispatch(100)];
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
}
