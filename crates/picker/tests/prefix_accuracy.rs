//! The approximate prefix index against the simulator's true prefix cache.
//!
//! Four simulated vLLM replicas with small KV caches (so they evict) serve a shared-prefix
//! workload — 30 system prompts of 2,000 tokens, five questions of 200 tokens each — routed in
//! virtual time by the `infergate` policy over pool snapshots built from the engines' gauges every
//! 50 ms. For every request, just before it is submitted, the index's predicted prefix match on the
//! chosen endpoint is compared with the blocks that engine really holds
//! (`Engine::cached_prefix_blocks` with the engine's own block hashes of the same text).
//!
//! Both sides cut the same ASCII text the same way: the index hashes 64-byte chunks, the engine
//! tokenizes 4 bytes a token and hashes 16-token blocks, so block `i` covers the same bytes on
//! both. Where they disagree it is the index's approximation at work: it learns on dispatch (before
//! the engine has computed the blocks) and evicts by its own LRU, not the engine's.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::collections::HashMap;
use std::time::Duration;

use infergate_engine::tokens::{block_hashes, tokenize};
use infergate_engine::{
    Engine, EngineConfig, Event, EventKind, FinishReason, NewRequest, Profile as EngineProfile,
    RequestId,
};
use infergate_picker::prefix::{hash_prompt, PrefixParams};
use infergate_picker::speed::text;
use infergate_picker::{
    EndpointId, EndpointSpec, InFlightGuard, LoraInfo, Picker, Policy, Pool, RequestFeatures,
    ScrapedMetrics, SplitMix64, TtftTicket,
};

const ENGINES: usize = 4;
const GROUPS: usize = 30;
const PER_GROUP: usize = 5;
/// 2,000 tokens at 4 bytes a token.
const SYSTEM_BYTES: usize = 8_000;
/// 200 tokens.
const QUESTION_BYTES: usize = 800;
const OUTPUT_TOKENS: u32 = 64;
/// KV blocks per replica: 10,240 tokens, about four system prompts, while the workload has 30.
const KV_BLOCKS: u32 = 640;
const SCRAPE_EVERY: Duration = Duration::from_millis(50);
const MEAN_GAP: Duration = Duration::from_millis(60);
const VOCAB: u32 = 128_256;
const MODEL: &str = "llama-3.1-8b";

/// How the index's prediction compared with the engine, over a run.
#[derive(Debug, Default, Clone, Copy)]
struct Accuracy {
    requests: usize,
    exact: usize,
    abs_error_blocks: usize,
    /// Predicted more than the engine held…
    over: usize,
    /// …because blocks it had computed for earlier requests were gone (evicted).
    over_evicted: usize,
    /// …because the earlier request that carries them had not finished its prefill yet.
    over_not_yet_computed: usize,
    /// Predicted less than the engine held.
    under: usize,
    /// Whether any prefix is held there at all, predicted right.
    hit_agrees: usize,
    /// Requests that found at least one block cached on the engine they were sent to.
    engine_hits: usize,
    /// Blocks the engine held, summed (to put the error in scale).
    true_blocks: usize,
}

impl Accuracy {
    fn share(&self, n: usize) -> f64 {
        n as f64 / self.requests.max(1) as f64
    }

    fn mae(&self) -> f64 {
        self.abs_error_blocks as f64 / self.requests.max(1) as f64
    }

    fn add(&mut self, o: &Accuracy) {
        self.requests += o.requests;
        self.exact += o.exact;
        self.abs_error_blocks += o.abs_error_blocks;
        self.over += o.over;
        self.over_evicted += o.over_evicted;
        self.over_not_yet_computed += o.over_not_yet_computed;
        self.under += o.under;
        self.hit_agrees += o.hit_agrees;
        self.engine_hits += o.engine_hits;
        self.true_blocks += o.true_blocks;
    }

    fn report(&self, label: &str) -> String {
        format!(
            "{label}: {} requests, exact {:.1} %, mean |error| {:.2} blocks (engine held {:.1} on \
             average), over-predicted {:.1} % (evicted {:.1} %, not yet computed {:.1} %), \
             under-predicted {:.1} %, hit/miss agrees {:.1} %, engine hits {:.1} %",
            self.requests,
            100.0 * self.share(self.exact),
            self.mae(),
            self.true_blocks as f64 / self.requests.max(1) as f64,
            100.0 * self.share(self.over),
            100.0 * self.share(self.over_evicted),
            100.0 * self.share(self.over_not_yet_computed),
            100.0 * self.share(self.under),
            100.0 * self.share(self.hit_agrees),
            100.0 * self.share(self.engine_hits),
        )
    }
}

/// A request on its way through an engine.
struct InFlight {
    _guard: InFlightGuard,
    ticket: TtftTicket,
    /// The engine's block hashes of its prompt.
    hashes: Vec<u64>,
    /// Its first token came out: every prompt block has been computed (and cached).
    prefilled: bool,
}

struct Fleet {
    engines: Vec<Engine>,
    pool: Pool,
    picker: Picker,
    in_flight: HashMap<(usize, RequestId), InFlight>,
    next_scrape: Duration,
    events: Vec<Event>,
}

impl Fleet {
    fn new(seed: u64) -> Self {
        let engines = (0..ENGINES)
            .map(|i| {
                let mut config =
                    EngineConfig::new(EngineProfile::lookup(MODEL, "h100", 1).unwrap());
                config.num_gpu_blocks = KV_BLOCKS;
                config.max_model_len = 4_096;
                config.seed = seed * 31 + i as u64;
                config.validate().unwrap();
                Engine::new(config)
            })
            .collect();
        let specs = (0..ENGINES as u64)
            .map(|i| EndpointSpec::new(i, format!("10.0.0.{i}:8000")))
            .collect();
        Self {
            engines,
            pool: Pool::new(specs).unwrap(),
            picker: Picker::new(Policy::infergate(), seed),
            in_flight: HashMap::new(),
            next_scrape: Duration::ZERO,
            events: Vec::new(),
        }
    }

    /// A scrape of every engine's gauges landing at `now`, as the gateway's scraper would build it
    /// from `/metrics`.
    fn scrape(&mut self, now: Duration) {
        for (i, engine) in self.engines.iter().enumerate() {
            let g = engine.gauges();
            let m = ScrapedMetrics {
                waiting: Some(g.waiting as u64),
                running: Some(g.running as u64),
                kv_usage: Some(g.kv_usage),
                lora: Some(LoraInfo {
                    max_lora: g.max_lora as u32,
                    running: g.running_adapters,
                    waiting: g.waiting_adapters,
                }),
                block_size: Some(g.block_size),
                num_gpu_blocks: Some(u64::from(g.num_gpu_blocks)),
                ..ScrapedMetrics::empty(now)
            };
            self.pool.update_metrics(EndpointId(i as u64), m).unwrap();
        }
    }

    /// Runs every engine step and scrape due up to `until`, feeding first tokens to the latency
    /// model and releasing finished requests.
    fn advance_to(&mut self, until: Duration) {
        for _ in 0..10_000_000 {
            let wake = self
                .engines
                .iter()
                .enumerate()
                .filter_map(|(i, e)| Some((e.next_wakeup()?, i)))
                .min();
            if self.next_scrape <= until && wake.is_none_or(|(w, _)| self.next_scrape <= w) {
                let at = self.next_scrape;
                self.scrape(at);
                self.next_scrape += SCRAPE_EVERY;
                continue;
            }
            let Some((at, i)) = wake.filter(|&(w, _)| w <= until) else {
                return;
            };
            self.events.clear();
            self.engines[i].advance(at, &mut self.events);
            for event in std::mem::take(&mut self.events) {
                let key = (i, event.id);
                match event.kind {
                    EventKind::Token { index: 0 } => {
                        if let Some(r) = self.in_flight.get_mut(&key) {
                            r.prefilled = true;
                            self.picker.observe_first_token(&r.ticket, event.at);
                        }
                    }
                    EventKind::Finished { .. } => {
                        self.in_flight.remove(&key);
                    }
                    EventKind::Preempted => {
                        if let Some(r) = self.in_flight.get_mut(&key) {
                            r.prefilled = false;
                        }
                    }
                    EventKind::Token { .. } => {}
                }
            }
        }
        panic!("the simulation did not settle");
    }

    /// Routes and submits one request at `now`; returns how the prediction compared.
    fn send(&mut self, now: Duration, text: &str) -> Accuracy {
        self.advance_to(now);
        let tokens = tokenize(text, VOCAB);
        let req = RequestFeatures {
            prompt_block_hashes: hash_prompt(
                "llama",
                None,
                text.as_bytes(),
                &PrefixParams::default(),
            ),
            ..RequestFeatures::new("llama", tokens.len() as u64)
        };
        let pick = self.picker.pick(&self.pool, &req, now).unwrap();
        let e = pick.primary.0 as usize;
        let engine = &self.engines[e];
        let hashes = block_hashes(&tokens, engine.adapter_hash_key(None));
        // The same text, cut the same way on both sides.
        assert_eq!(hashes.len(), req.prompt_block_hashes.len());

        let predicted = self.picker.predicted_prefix_blocks(pick.primary, &req);
        let truth = engine.cached_prefix_blocks(&hashes);
        // The deepest block of this prompt that an earlier request sent there carries and has
        // not computed yet.
        let pending = self
            .in_flight
            .iter()
            .filter(|((i, _), r)| *i == e && !r.prefilled)
            .map(|(_, r)| common_prefix(&r.hashes, &hashes))
            .max()
            .unwrap_or(0);
        let mut a = Accuracy {
            requests: 1,
            exact: usize::from(predicted == truth),
            abs_error_blocks: predicted.abs_diff(truth),
            under: usize::from(predicted < truth),
            hit_agrees: usize::from((predicted > 0) == (truth > 0)),
            engine_hits: usize::from(truth > 0),
            true_blocks: truth,
            ..Accuracy::default()
        };
        if predicted > truth {
            a.over = 1;
            if predicted <= truth.max(pending) {
                a.over_not_yet_computed = 1;
            } else {
                a.over_evicted = 1;
            }
        }

        let dispatch = self
            .picker
            .on_dispatch(&self.pool, pick.primary, &req, now)
            .unwrap();
        let id = self.engines[e]
            .submit(
                now,
                NewRequest {
                    prompt_tokens: tokens.len() as u32,
                    block_hashes: hashes.clone(),
                    output_tokens: OUTPUT_TOKENS,
                    finish: FinishReason::Length,
                    adapter: None,
                    priority: 0,
                },
            )
            .unwrap();
        self.in_flight.insert(
            (e, id),
            InFlight {
                _guard: dispatch.guard,
                ticket: dispatch.ticket,
                hashes,
                prefilled: false,
            },
        );
        a
    }
}

fn common_prefix(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Runs the whole workload with `seed` and returns the accuracy over every request.
fn run(seed: u64) -> (Accuracy, Fleet) {
    let mut rng = SplitMix64::new(seed);
    let systems: Vec<String> = (0..GROUPS).map(|_| text(&mut rng, SYSTEM_BYTES)).collect();
    // Every (group, question) once, in a random order: a group's questions are spread over the
    // run, so its system prompt is sometimes still cached and sometimes long evicted.
    let mut order: Vec<(usize, usize)> = (0..GROUPS)
        .flat_map(|g| (0..PER_GROUP).map(move |q| (g, q)))
        .collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut fleet = Fleet::new(seed);
    let mut total = Accuracy::default();
    let mut now = Duration::from_millis(1);
    for (g, _) in order {
        let prompt = format!("{}{}", systems[g], text(&mut rng, QUESTION_BYTES));
        total.add(&fleet.send(now, &prompt));
        // Poisson arrivals.
        let gap = -(1.0 - rng.next_f64()).ln() * MEAN_GAP.as_secs_f64();
        now += Duration::from_secs_f64(gap);
    }
    fleet.advance_to(now + Duration::from_secs(600));
    (total, fleet)
}

#[test]
fn the_prefix_index_predicts_the_engines_cached_blocks() {
    let mut all = Accuracy::default();
    for seed in [1, 2, 3] {
        let (a, fleet) = run(seed);
        println!("{}", a.report(&format!("seed {seed}")));
        assert_eq!(a.requests, GROUPS * PER_GROUP);
        assert!(fleet.in_flight.is_empty() && fleet.engines.iter().all(Engine::is_idle));
        all.add(&a);
    }
    println!("{}", all.report("all seeds"));

    // The workload does what it is meant to: many requests find their system prompt cached
    // where they were sent (prefix affinity works; a group's first request cannot, and caches of
    // four system prompts for 30 groups forget often), and the small caches evict, so the index
    // is sometimes wrong for that reason.
    assert!(all.share(all.engine_hits) >= 0.35, "{}", all.report("all"));
    assert!(all.over_evicted > 0, "{}", all.report("all"));
    // Accuracy, with margins under what was measured when this test was written (3 seeds × 150
    // requests: exact 88 %, hit/miss 98 %, mean error 4.0 blocks, over-predicted after eviction
    // 10.4 %, never under-predicted).
    assert!(all.share(all.exact) >= 0.78, "{}", all.report("all"));
    assert!(all.share(all.hit_agrees) >= 0.90, "{}", all.report("all"));
    assert!(all.mae() <= 8.0, "{}", all.report("all"));
    assert!(all.share(all.over_evicted) <= 0.20, "{}", all.report("all"));
    assert!(all.share(all.under) <= 0.05, "{}", all.report("all"));
}
