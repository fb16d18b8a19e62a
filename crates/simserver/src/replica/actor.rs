//! The replica actor: one task owns the [`Engine`], takes commands over a channel, sleeps until
//! the engine's next step ends (in wall time, scaled) and routes each event to its request.

use super::{
    AdapterCard, Admitted, Command, LoraSeries, Progress, ReplicaHandle, SglangHistograms,
    Snapshot, Submission, COMMAND_QUEUE, LORA_SERIES, SGLANG_E2E_BUCKETS, SGLANG_ITL_BUCKETS,
    SGLANG_TTFT_BUCKETS, STALL_POLL, TIMER_GRANULARITY,
};
use crate::error::ApiError;
use crate::generation::{plan_output, OutputPlan};
use crate::prompt::{tokenize_ids, tokenize_text};
use crate::request::Prompt;
use crate::spec::ReplicaSpec;
use hyper::StatusCode;
use infergate_engine::metrics::Histogram;
use infergate_engine::{
    Engine, Event, EventKind, FinishReason, NewRequest, RequestId, SubmitError,
};
use infergate_rng::SplitMix64;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Maps engine time to wall time: engine time runs `scale` times faster.
#[derive(Debug, Clone, Copy)]
struct EngineClock {
    start: Instant,
    scale: f64,
}

impl EngineClock {
    fn now(&self) -> Duration {
        self.start.elapsed().mul_f64(self.scale)
    }

    fn wall(&self, at: Duration) -> Instant {
        self.start + at.div_f64(self.scale)
    }
}

struct Route {
    events: mpsc::UnboundedSender<Progress>,
    arrival: Duration,
    last_token: Duration,
}

struct Actor {
    engine: Engine,
    clock: EngineClock,
    routes: HashMap<RequestId, Route>,
    adapters: Vec<AdapterCard>,
    served_model_name: String,
    vocab: u32,
    mean_output_tokens: f64,
    rng: SplitMix64,
    events: Vec<Event>,
    closed: Vec<RequestId>,
    lora: Vec<LoraSeries>,
    cached_tokens: u64,
    sglang: Option<SglangHistograms>,
}

/// Starts a replica with a fresh engine (cold cache, the spec's start-up adapters).
pub(crate) fn start(spec: &ReplicaSpec) -> (ReplicaHandle, JoinHandle<()>) {
    let mut config = spec.engine.clone();
    config.report_every_token = true;
    let mut engine = Engine::new(config);
    engine.set_slowdown(spec.faults.slowdown);
    let mut adapters = Vec::new();
    for name in &spec.lora_adapters {
        if engine.register_adapter(name) {
            adapters.push(AdapterCard {
                name: name.clone(),
                path: format!("/adapters/{name}"),
            });
        }
    }
    let profile = &spec.engine.profile;
    let actor = Actor {
        vocab: u32::try_from(profile.model.vocab).unwrap_or(u32::MAX),
        engine,
        clock: EngineClock {
            start: Instant::now(),
            scale: spec.time_scale,
        },
        routes: HashMap::new(),
        adapters,
        served_model_name: spec.served_model_name.clone(),
        mean_output_tokens: spec.mean_output_tokens,
        rng: SplitMix64::new(spec.seed),
        events: Vec::with_capacity(256),
        closed: Vec::new(),
        lora: vec![LoraSeries {
            running: String::new(),
            waiting: String::new(),
            at: unix_now(),
        }],
        cached_tokens: 0,
        sglang: (spec.dialect == crate::Dialect::Sglang).then(|| SglangHistograms {
            ttft: Histogram::new(SGLANG_TTFT_BUCKETS),
            itl: Histogram::new(SGLANG_ITL_BUCKETS),
            e2e: Histogram::new(SGLANG_E2E_BUCKETS),
        }),
    };
    let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
    let task = tokio::spawn(actor.run(rx));
    (ReplicaHandle { commands: tx }, task)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Actor {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        let mut advanced_to = Duration::ZERO;
        loop {
            // The engine time the timer stands for, if armed.
            let armed = match self.engine.next_wakeup() {
                // tokio's timer cannot wait less than a millisecond, so a step due sooner (the
                // `instant` profile, high time scales) is taken now: ahead of the wall clock by
                // less than the timer would have made it late. Commands that queued meanwhile
                // are taken too, and the task yields so connections keep moving.
                Some(at)
                    if at > advanced_to
                        && self.clock.wall(at) <= Instant::now() + TIMER_GRANULARITY =>
                {
                    self.advance(at);
                    advanced_to = at;
                    while let Ok(command) = commands.try_recv() {
                        self.handle(command, advanced_to);
                    }
                    self.advance(advanced_to);
                    tokio::task::yield_now().await;
                    continue;
                }
                Some(at) if at > advanced_to => {
                    timer.as_mut().reset(self.clock.wall(at));
                    Some(at)
                }
                // Queued work the engine could not schedule at `advanced_to`: look again soon
                // rather than spin.
                Some(_) => {
                    timer.as_mut().reset(Instant::now() + STALL_POLL);
                    Some(advanced_to)
                }
                None => None,
            };
            tokio::select! {
                biased;
                command = commands.recv() => {
                    let Some(command) = command else { break };
                    let now = self.clock.now().max(advanced_to);
                    self.advance(now);
                    self.handle(command, now);
                    while let Ok(command) = commands.try_recv() {
                        self.handle(command, now);
                    }
                    self.advance(now);
                    advanced_to = now;
                }
                () = &mut timer, if armed.is_some() => {
                    let now = self.clock.now().max(armed.unwrap_or_default()).max(advanced_to);
                    self.advance(now);
                    advanced_to = now;
                }
            }
        }
    }

    fn advance(&mut self, now: Duration) {
        let mut events = std::mem::take(&mut self.events);
        self.engine.advance(now, &mut events);
        for event in events.drain(..) {
            self.route(event);
        }
        self.events = events;
        for id in self.closed.drain(..) {
            self.engine.abort(id);
        }
    }

    fn route(&mut self, event: Event) {
        match event.kind {
            EventKind::Token { index } => {
                let Some(route) = self.routes.get_mut(&event.id) else {
                    return;
                };
                if let Some(h) = &mut self.sglang {
                    let since = if index == 0 {
                        route.arrival
                    } else {
                        route.last_token
                    };
                    let hist = if index == 0 { &mut h.ttft } else { &mut h.itl };
                    hist.observe(event.at.saturating_sub(since).as_secs_f64());
                }
                route.last_token = event.at;
                if route.events.send(Progress::Token { index }).is_err() {
                    self.closed.push(event.id);
                }
            }
            EventKind::Finished { reason, usage } => {
                let Some(route) = self.routes.remove(&event.id) else {
                    return;
                };
                self.cached_tokens += u64::from(usage.cached_tokens);
                if let (Some(h), false) = (&mut self.sglang, reason == FinishReason::Abort) {
                    h.e2e
                        .observe(event.at.saturating_sub(route.arrival).as_secs_f64());
                }
                // The client may be gone; nothing more to do for it then.
                let _ = route.events.send(Progress::Finished { reason, usage });
            }
            EventKind::Preempted => {}
        }
    }

    fn handle(&mut self, command: Command, now: Duration) {
        match command {
            Command::Submit(submission, reply) => {
                let result = self.submit(*submission, now);
                if let Err(Ok(admitted)) = reply.send(result) {
                    // The handler went away before it heard back.
                    self.engine.abort(admitted.id);
                }
            }
            Command::Abort(id) => {
                self.engine.abort(id);
            }
            Command::LoadAdapter(card, reply) => {
                let _ = reply.send(self.load_adapter(card));
            }
            Command::UnloadAdapter(name, reply) => {
                let _ = reply.send(self.unload_adapter(&name));
            }
            Command::Adapters(reply) => {
                let _ = reply.send(self.adapters.clone());
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(self.snapshot());
            }
            Command::SetSlowdown(factor) => self.engine.set_slowdown(factor),
        }
    }

    fn submit(&mut self, s: Submission, now: Duration) -> Result<Admitted, ApiError> {
        let adapter = match s.model {
            None => None,
            Some(m) if m == self.served_model_name => None,
            Some(m) if self.adapters.iter().any(|a| a.name == m) => Some(m),
            Some(m) => return Err(ApiError::unknown_model(&m)),
        };
        let key = self.engine.adapter_hash_key(adapter.as_deref());
        let prompt = match &s.prompt {
            Prompt::Text(text) => tokenize_text(text, self.vocab, key),
            Prompt::Tokens(ids) => tokenize_ids(ids, key),
        };
        if prompt.tokens == 0 {
            return Err(ApiError::bad_request("prompt: must not be empty"));
        }
        // vLLM refuses on prompt + max_tokens, before any output length is known.
        let max_model_len = self.engine.config().max_model_len;
        let too_long = |output: u32| {
            let e = SubmitError::TooLong {
                max_model_len,
                prompt: prompt.tokens,
                output,
            };
            ApiError::bad_request(e.to_string())
        };
        let cap = match s.max_tokens {
            Some(m) if u64::from(prompt.tokens) + u64::from(m) > u64::from(max_model_len) => {
                return Err(too_long(m))
            }
            Some(m) => m,
            None if prompt.tokens >= max_model_len => return Err(too_long(1)),
            None => max_model_len - prompt.tokens,
        };
        // A seeded answer is planned whole from its seed, as if nothing had been written: the
        // part still to write is what a continuation writes, so an answer continued elsewhere
        // ends where it would have.
        let (seed, output) = match s.seed {
            Some(seed) => {
                let whole = plan_output(
                    &mut SplitMix64::new(seed),
                    self.mean_output_tokens,
                    cap.saturating_add(s.written),
                    s.ignore_eos,
                );
                let rest = OutputPlan {
                    tokens: whole.tokens.saturating_sub(s.written).clamp(1, cap),
                    finish: whole.finish,
                };
                (seed, rest)
            }
            None => {
                let output = plan_output(&mut self.rng, self.mean_output_tokens, cap, s.ignore_eos);
                (self.rng.next_u64(), output)
            }
        };
        let request = NewRequest {
            prompt_tokens: prompt.tokens,
            block_hashes: prompt.block_hashes,
            output_tokens: output.tokens,
            finish: output.finish,
            adapter,
            priority: s.priority,
        };
        let id = self.engine.submit(now, request).map_err(|e| match e {
            SubmitError::UnknownAdapter(name) => ApiError::unknown_model(&name),
            other => ApiError::bad_request(other.to_string()),
        })?;
        self.routes.insert(
            id,
            Route {
                events: s.events,
                arrival: now,
                last_token: now,
            },
        );
        Ok(Admitted {
            id,
            output,
            seed,
            first_word: s.written,
        })
    }

    fn load_adapter(&mut self, card: AdapterCard) -> Result<(), ApiError> {
        let invalid = |m: String| ApiError::new(StatusCode::BAD_REQUEST, "InvalidUserInput", m);
        if card.name.is_empty() || card.path.is_empty() {
            return Err(invalid(
                "Both 'lora_name' and 'lora_path' must be provided.".into(),
            ));
        }
        if self.engine.config().max_loras == 0 {
            return Err(ApiError::bad_request(
                "LoRA is not enabled on this server (max_loras is 0).",
            ));
        }
        if card.name == self.served_model_name || !self.engine.register_adapter(&card.name) {
            return Err(invalid(format!(
                "The lora adapter '{}' has already been loaded.",
                card.name
            )));
        }
        self.adapters.push(card);
        Ok(())
    }

    fn unload_adapter(&mut self, name: &str) -> Result<(), ApiError> {
        if name.is_empty() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "InvalidUserInput",
                "either 'lora_name' and 'lora_int_id' needs to be provided.",
            ));
        }
        if !self.engine.unregister_adapter(name) {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "NotFoundError",
                format!("The lora adapter '{name}' cannot be found."),
            ));
        }
        self.adapters.retain(|a| a.name != name);
        Ok(())
    }

    fn snapshot(&mut self) -> Snapshot {
        let gauges = self.engine.gauges();
        let (running, waiting) = (
            gauges.running_adapters.join(","),
            gauges.waiting_adapters.join(","),
        );
        // vLLM stamps the series of the current label combination at every engine step, so
        // an idle engine's newest series keeps its last stamp.
        let current = self
            .lora
            .iter()
            .position(|s| s.running == running && s.waiting == waiting);
        let newest = current == Some(0);
        if !newest || !self.engine.is_idle() {
            let mut series = match current {
                Some(i) => self.lora.remove(i),
                None => LoraSeries {
                    running,
                    waiting,
                    at: 0.0,
                },
            };
            series.at = unix_now();
            self.lora.insert(0, series);
            self.lora.truncate(LORA_SERIES);
        }
        Snapshot {
            counters: self.engine.counters().clone(),
            gauges,
            lora: self.lora.clone(),
            cached_tokens: self.cached_tokens,
            sglang: self.sglang.clone(),
        }
    }
}
