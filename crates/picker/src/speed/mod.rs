//! How long one decision takes: the figure behind `infergate bench --picker`.
//!
//! [`measure_decisions`] builds a realistic pool — every endpoint scraped (queue, running, KV use,
//! KV size, LoRA residency), a warm prefix index and a warm latency model — and times the full
//! decision of many requests of a shared-system-prompt workload: hashing a 4,000-token
//! (16,000-byte) prompt, filters, every scorer of the `infergate` policy, selection and fallbacks.
//! Between two timed decisions, untimed, it does what the gateway's other paths do: the request is
//! dispatched (the index learns, the counters are credited, a guard is kept in flight), first
//! tokens are observed, and scrapes land at the default 50 ms per endpoint, so the state the
//! decisions read keeps moving the way it does in service.
//!
//! The crate reads no clock: the caller passes one in (`Instant::elapsed` in the binary and the
//! example, a fake in tests), so the measurement is as pure as the decisions it measures.
//!
//! [`measure_rounds`] repeats the measurement in rounds over the same moving state and reports
//! the median round: on a machine shared with other work, one round's p99 is at the mercy of
//! whatever else ran during it (a compile, a page-cache flush), and the median of three rounds
//! is not moved by one disturbed round. Every round's figures are kept, and the printed line
//! gives the spread of their p99s, so the noise is visible, not hidden. An untimed round comes
//! first, so every timed round sees a warm index.

mod figures;

use std::collections::VecDeque;
use std::time::Duration;

use figures::quantile;
pub use figures::{DecisionTimes, Rounds};

use crate::counters::InFlightGuard;
use crate::endpoint::{EndpointId, EndpointSpec, LoraInfo, ScrapedMetrics};
use crate::error::PickError;
use crate::picker::{Picker, TtftTicket};
use crate::policy::Policy;
use crate::pool::Pool;
use crate::prefix::{hash_prompt_into, HashMemo, PrefixParams};
use crate::request::RequestFeatures;
use infergate_rng::SplitMix64;

/// Bytes of every measured prompt: 4,000 tokens at upstream's 4 bytes a token.
pub const PROMPT_BYTES: usize = 16_000;

/// Bytes of each shared system prompt (2,000 tokens); the rest of a prompt is its own.
pub const SYSTEM_PROMPT_BYTES: usize = 8_000;

/// Distinct system prompts in the workload.
pub const SYSTEM_PROMPTS: usize = 32;

/// Requests the binary measures per round unless told otherwise.
pub const DEFAULT_REQUESTS: usize = 20_000;

/// Rounds the binary measures per fleet size unless told otherwise.
pub const DEFAULT_ROUNDS: usize = 3;

/// Virtual time between two requests: 5,000 requests per second.
const ARRIVAL_GAP: Duration = Duration::from_micros(200);

/// How often each endpoint is scraped (the gateway's default).
const SCRAPE_INTERVAL: Duration = Duration::from_millis(50);

/// Requests each endpoint has already served when measuring starts.
const WARM_REQUESTS_PER_ENDPOINT: usize = 3;

/// Requests each endpoint holds in flight at most (older guards are dropped, as responses end).
const IN_FLIGHT_PER_ENDPOINT: usize = 8;

/// Times `requests` decisions of the `infergate` policy over a pool of `endpoints`, reading the
/// time from `now` (any monotonic clock; only differences are used) just before hashing each
/// prompt, just after hashing it and just after its pick. Everything random derives from `seed`.
///
/// Costs about `2 × requests × (decision + dispatch + 2 µs)`: a warm-up of three dispatches per
/// endpoint, then as many untimed requests as timed ones. Fails only for an empty pool.
pub fn measure_decisions(
    endpoints: usize,
    requests: usize,
    seed: u64,
    now: &mut dyn FnMut() -> Duration,
) -> Result<DecisionTimes, PickError> {
    measure_rounds(endpoints, requests, 1, seed, now).map(|r| r.median())
}

/// [`measure_decisions`] repeated: after one warm-up, `rounds` rounds of `requests` timed
/// decisions each, over the same pool and state, which keep moving from one round to the next.
/// Costs about `(rounds + 1) × requests × (decision + dispatch + 2 µs)`.
pub fn measure_rounds(
    endpoints: usize,
    requests: usize,
    rounds: usize,
    seed: u64,
    now: &mut dyn FnMut() -> Duration,
) -> Result<Rounds, PickError> {
    let mut bench = Bench::new(endpoints, seed)?;
    bench.warm_up(requests)?;
    let rounds = (0..rounds.max(1))
        .map(|_| bench.round(requests, now))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rounds { rounds })
}

/// What one measured request cost.
struct Timed {
    decision: Duration,
    hashing: Duration,
    /// Blocks of the prompt, and those whose hashes were computed rather than taken from the memo.
    blocks: usize,
    computed: usize,
    dispatch: Duration,
    prefix_hit: bool,
}

/// The fleet, the picker and the workload of one measurement.
struct Bench {
    pool: Pool,
    picker: Picker,
    rng: SplitMix64,
    params: PrefixParams,
    memo: HashMemo,
    systems: Vec<String>,
    /// Random text that unique parts of prompts are cut from.
    corpus: String,
    prompt: String,
    req: RequestFeatures,
    in_flight: VecDeque<InFlightGuard>,
    max_in_flight: usize,
    /// Virtual time: what the pick is told, not what is measured.
    vt: Duration,
    next_scrape: usize,
    scrape_debt: f64,
}

impl Bench {
    fn new(endpoints: usize, seed: u64) -> Result<Self, PickError> {
        if endpoints == 0 {
            return Err(PickError::EmptyPool);
        }
        let specs = (0..endpoints as u64)
            .map(|i| {
                let address = format!("10.{}.{}.{}:8000", i >> 16, (i >> 8) & 255, i & 255);
                EndpointSpec::new(i, address).with_label("pool", "llama")
            })
            .collect();
        // Ids and addresses are unique by construction, so this cannot fail; were it to, the
        // pool would be unusable, which is what an empty pool means to a pick.
        let pool = Pool::new(specs).map_err(|_| PickError::EmptyPool)?;
        let mut rng = SplitMix64::new(seed);
        let systems = (0..SYSTEM_PROMPTS)
            .map(|_| text(&mut rng, SYSTEM_PROMPT_BYTES))
            .collect();
        let corpus = text(&mut rng, 1 << 20);
        let mut bench = Self {
            pool,
            picker: Picker::new(Policy::infergate(), seed),
            rng,
            params: Policy::infergate().prefix_params(),
            memo: HashMemo::default(),
            systems,
            corpus,
            prompt: String::with_capacity(PROMPT_BYTES),
            req: RequestFeatures::new("llama", (PROMPT_BYTES / 4) as u64),
            in_flight: VecDeque::new(),
            max_in_flight: endpoints * IN_FLIGHT_PER_ENDPOINT,
            vt: Duration::from_secs(1),
            next_scrape: 0,
            scrape_debt: 0.0,
        };
        for i in 0..endpoints {
            bench.scrape(i);
        }
        // Warm index and latency model: every endpoint has served a few requests of the workload.
        for round in 0..WARM_REQUESTS_PER_ENDPOINT {
            for i in 0..endpoints {
                bench.next_prompt();
                let id = EndpointId(i as u64);
                let d = bench.dispatch(id)?;
                bench.observe(&d, round);
            }
        }
        Ok(bench)
    }

    /// One untimed round of `requests`, so that the caches, the picker's scratch buffers and
    /// the prefix index reach their steady state before anything is timed. At 100 endpoints a
    /// round of 20,000 requests brings every endpoint's LRU to (or near) its capacity, so the
    /// timed rounds match against a full index and pay for its evictions, as a gateway in service
    /// does; with a shorter warm-up the first round measured a smaller index than the later ones.
    fn warm_up(&mut self, requests: usize) -> Result<(), PickError> {
        for _ in 0..requests.max(1) {
            self.request(&mut || Duration::ZERO)?;
        }
        Ok(())
    }

    /// Times `requests` requests.
    fn round(
        &mut self,
        requests: usize,
        now: &mut dyn FnMut() -> Duration,
    ) -> Result<DecisionTimes, PickError> {
        let mut decisions = Vec::with_capacity(requests);
        let mut dispatches = Vec::with_capacity(requests);
        let mut hashings = Vec::with_capacity(requests);
        let (mut hits, mut blocks, mut computed) = (0usize, 0usize, 0usize);
        for _ in 0..requests {
            let t = self.request(now)?;
            decisions.push(t.decision);
            dispatches.push(t.dispatch);
            hashings.push(t.hashing);
            hits += usize::from(t.prefix_hit);
            blocks += t.blocks;
            computed += t.computed;
        }
        let mean = if decisions.is_empty() {
            Duration::ZERO
        } else {
            decisions.iter().sum::<Duration>() / decisions.len() as u32
        };
        decisions.sort_unstable();
        dispatches.sort_unstable();
        hashings.sort_unstable();
        Ok(DecisionTimes {
            endpoints: self.pool.len(),
            requests,
            p50: quantile(&decisions, 0.50),
            p99: quantile(&decisions, 0.99),
            max: decisions.last().copied().unwrap_or_default(),
            mean,
            hash_p50: quantile(&hashings, 0.50),
            hash_p99: quantile(&hashings, 0.99),
            dispatch_p50: quantile(&dispatches, 0.50),
            dispatch_p99: quantile(&dispatches, 0.99),
            dispatch_max: dispatches.last().copied().unwrap_or_default(),
            prefix_hit_share: hits as f64 / requests.max(1) as f64,
            memo_share: 1.0 - computed as f64 / blocks.max(1) as f64,
        })
    }

    /// One request: untimed preparation, the timed decision, the untimed dispatch.
    fn request(&mut self, now: &mut dyn FnMut() -> Duration) -> Result<Timed, PickError> {
        self.vt += ARRIVAL_GAP;
        self.scrape_due();
        self.next_prompt();

        let start = now();
        let computed = self.memo.hash_into(
            &self.req.model,
            None,
            self.prompt.as_bytes(),
            &self.params,
            &mut self.req.prompt_block_hashes,
        );
        let hashed = now();
        let pick = self.picker.pick(&self.pool, &self.req, self.vt)?;
        let decided = now();

        let ticket = self.dispatch(pick.primary)?;
        let dispatched = now();
        let prefix_hit = ticket.features.uncached_tokens < self.req.prompt_tokens as f64;
        self.observe(&ticket, self.in_flight.len());
        Ok(Timed {
            decision: decided.saturating_sub(start),
            hashing: hashed.saturating_sub(start),
            blocks: self.req.prompt_block_hashes.len(),
            computed,
            dispatch: dispatched.saturating_sub(decided),
            prefix_hit,
        })
    }

    /// Records the dispatch of the current request to `id` and keeps its guard in flight.
    fn dispatch(&mut self, id: EndpointId) -> Result<TtftTicket, PickError> {
        if self.req.prompt_block_hashes.is_empty() {
            hash_prompt_into(
                &self.req.model,
                None,
                self.prompt.as_bytes(),
                &self.params,
                &mut self.req.prompt_block_hashes,
            );
        }
        let d = self
            .picker
            .on_dispatch(&self.pool, id, &self.req, self.vt)?;
        if self.in_flight.len() >= self.max_in_flight {
            self.in_flight.pop_front();
        }
        self.in_flight.push_back(d.guard);
        Ok(d.ticket)
    }

    /// Feeds a synthetic first token to the latency model: two GPU generations, told apart by
    /// the endpoint's id, with a little noise.
    fn observe(&mut self, ticket: &TtftTicket, salt: usize) {
        let slow = ticket.endpoint.0.is_multiple_of(4);
        let (base, step, per_token) = if slow {
            (0.03, 0.08, 1.0 / 4_000.0)
        } else {
            (0.02, 0.04, 1.0 / 12_000.0)
        };
        let f = &ticket.features;
        let noise = 1.0 + 0.05 * (self.rng.next_f64() - 0.5) + 0.001 * (salt % 3) as f64;
        let ttft = (base + step * f.queue_ahead + per_token * f.uncached_tokens) * noise;
        self.picker
            .observe_ttft(ticket, Duration::from_secs_f64(ttft.max(0.0)));
    }

    /// Lands the scrapes due since the last request, round-robin over the endpoints, so each is
    /// scraped every [`SCRAPE_INTERVAL`].
    fn scrape_due(&mut self) {
        let n = self.pool.len();
        self.scrape_debt += n as f64 * ARRIVAL_GAP.as_secs_f64() / SCRAPE_INTERVAL.as_secs_f64();
        while self.scrape_debt >= 1.0 {
            self.scrape_debt -= 1.0;
            let i = self.next_scrape;
            self.next_scrape = (i + 1) % n.max(1);
            self.scrape(i);
        }
    }

    /// A scrape of endpoint `i` landing now, with the load signals of a busy fleet.
    fn scrape(&mut self, i: usize) {
        let r = &mut self.rng;
        let m = ScrapedMetrics {
            waiting: Some(r.below(8) as u64),
            running: Some(8 + r.below(48) as u64),
            kv_usage: Some(0.1 + 0.85 * r.next_f64()),
            lora: Some(LoraInfo {
                max_lora: 4,
                running: vec!["sql".into(), "chat".into()],
                waiting: Vec::new(),
            }),
            block_size: Some(16),
            num_gpu_blocks: Some(if i.is_multiple_of(4) { 15_000 } else { 31_250 }),
            prefix_cache_queries: Some(1_000_000),
            prefix_cache_hits: Some(600_000),
            ..ScrapedMetrics::empty(self.vt)
        };
        // The position is the id here; an unknown id cannot happen.
        let _ = self.pool.update_metrics(EndpointId(i as u64), m);
    }

    /// The next prompt: one of the shared system prompts, then text of its own (a slice of the
    /// corpus at a random offset), [`PROMPT_BYTES`] in all. Clears the request's hashes.
    fn next_prompt(&mut self) {
        let g = self.rng.below(self.systems.len());
        let own = PROMPT_BYTES - SYSTEM_PROMPT_BYTES;
        let at = self.rng.below(self.corpus.len() - own);
        self.prompt.clear();
        self.prompt
            .push_str(self.systems.get(g).map_or("", String::as_str));
        self.prompt
            .push_str(self.corpus.get(at..at + own).unwrap_or(""));
        self.req.prompt_tokens = (self.prompt.len() / 4) as u64;
        self.req.prompt_block_hashes.clear();
    }
}

/// `len` bytes of lowercase words and spaces: prompt text for workloads.
pub fn text(rng: &mut SplitMix64, len: usize) -> String {
    let mut s = String::with_capacity(len);
    while s.len() < len {
        if rng.below(6) == 0 {
            s.push(' ');
        } else {
            s.push(char::from(b'a' + rng.below(26) as u8));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that advances by `step` on every reading.
    fn ticking(step: Duration) -> impl FnMut() -> Duration {
        let mut t = Duration::ZERO;
        move || {
            t += step;
            t
        }
    }

    #[test]
    fn times_come_from_the_clock_passed_in() {
        let mut clock = ticking(Duration::from_micros(3));
        let t = measure_decisions(20, 200, 1, &mut clock).unwrap();
        // The clock is read before hashing, after hashing, after the pick and after the
        // dispatch: a decision spans two ticks, hashing and the dispatch one each.
        assert_eq!((t.endpoints, t.requests), (20, 200));
        assert_eq!(t.p50, Duration::from_micros(6));
        assert_eq!(t.p99, Duration::from_micros(6));
        assert_eq!(t.max, Duration::from_micros(6));
        assert_eq!(
            (t.hash_p50, t.hash_p99),
            (Duration::from_micros(3), Duration::from_micros(3))
        );
        assert_eq!(t.dispatch_p99, Duration::from_micros(3));
        assert_eq!(t.dispatch_max, Duration::from_micros(3));
        assert_eq!(
            t.to_json(),
            r#"{"endpoints": 20, "p50_us": 6.00, "p99_us": 6.00}"#
        );
    }

    #[test]
    fn rounds_are_full_rounds_timed_by_the_clock_passed_in() {
        let us = Duration::from_micros;
        let mut clock = ticking(Duration::from_micros(2));
        let r = measure_rounds(20, 50, 3, 1, &mut clock).unwrap();
        assert_eq!(r.rounds.len(), 3);
        assert!(r.rounds.iter().all(|t| t.requests == 50 && t.p99 == us(4)));
    }

    #[test]
    fn the_workload_hits_a_warm_index_and_an_empty_pool_is_an_error() {
        let mut clock = ticking(Duration::from_nanos(1));
        let t = measure_decisions(50, 500, 7, &mut clock).unwrap();
        // 32 system prompts over 50 endpoints that have each served three requests: most
        // decisions find the system prompt somewhere and follow it (79 % with this seed; the
        // rest go where the load is lower).
        assert!(t.prefix_hit_share > 0.6, "{t}");
        // Each prompt's 125-block system prompt, less its first block (hashed to find the memo
        // slot), comes from the memo once seen: just under half of the 250 blocks.
        assert!(t.memo_share > 0.45 && t.memo_share < 0.5, "{t}");
        assert_eq!(
            measure_decisions(0, 10, 1, &mut clock),
            Err(PickError::EmptyPool)
        );
    }
}
