//! Rewrite: the canary split of a request's model name, between parse and route
//! (`spec.rewrites`, upstream's InferenceModelRewrite rules).
//!
//! A rule matches a model name exactly and sends each request to one of its targets, chosen by
//! weight. The body's `model` then names the target, so the target routes to its pool like any
//! other model, and the answer is renamed back ([`response`]) so the client sees the name it
//! asked for. A client (or a filter in front of the gateway) can name the target itself with
//! `x-gateway-model-name-rewrite`; an explicit per-request choice beats a weighted split.
//!
//! With `stickiness`, a session's id (a header, or a top-level string field of the body such as
//! OpenAI's `user`) is hashed into the weight space instead of drawing a random number: the
//! same session always lands on the same target, with no state to keep, across restarts and
//! replicas. Raising a canary's weight only moves sessions onto the canary (see
//! [`Rule::choose`]).
//!
//! The decisions here read no clock and no random source of their own: the random draw comes
//! from a seeded [`SplitMix64`] passed in.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use hyper::header::HeaderName;
use hyper::HeaderMap;
use infergate_config::gateway::{ResolvedRewrite, SessionKey};
use infergate_picker::SplitMix64;
use serde_json::value::RawValue;
use xxhash_rust::xxh64::xxh64;

use infergate_telemetry::metrics::{Metrics, RewriteLabels};

/// `x-gateway-model-name-rewrite`: the model to send the request to instead of the one it names.
pub const MODEL_NAME_REWRITE: HeaderName = HeaderName::from_static("x-gateway-model-name-rewrite");

/// Seed of the live gateway's draws: fixed, so a run is replayable from its request order.
const SEED: u64 = 0xC4A2_7E57_5EED_0001;

/// One rule: its targets and their cumulative weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    name: Option<String>,
    targets: Vec<String>,
    /// `bounds[i]` is the sum of the weights of targets `0..=i`. Invariant: as long as
    /// `targets`, never empty, strictly increasing (every weight is at least 1), so the last
    /// is the total weight.
    bounds: Vec<u64>,
    stickiness: Option<SessionKey>,
}

/// A rule's choice for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice<'a> {
    /// The model to send the request to.
    pub target: &'a str,
    /// Chosen by the session's hash rather than at random.
    pub sticky: bool,
}

impl Rule {
    /// A rule from its resolved config; `None` for one without targets (validation refuses
    /// those, so a table never holds one).
    pub fn new(r: &ResolvedRewrite) -> Option<Rule> {
        let mut total = 0u64;
        let mut targets = Vec::with_capacity(r.targets.len());
        let mut bounds = Vec::with_capacity(r.targets.len());
        for (model, weight) in &r.targets {
            // A weight of 0 is refused by validation; counting it as 1 keeps the invariant.
            total += u64::from(weight.value.max(1));
            targets.push(model.clone());
            bounds.push(total);
        }
        if targets.is_empty() {
            return None;
        }
        Some(Rule {
            name: r.name.clone(),
            targets,
            bounds,
            stickiness: r.stickiness.clone(),
        })
    }

    /// Its name, if the config gave one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Where its session ids are read, when sessions stick.
    pub fn stickiness(&self) -> Option<&SessionKey> {
        self.stickiness.as_ref()
    }

    /// The target of a request: by the session's hash when the rule is sticky and the request
    /// has a session id, else by a draw from `rng`.
    ///
    /// Both place a 64-bit number `x` in the weight space as `⌊x · total / 2⁶⁴⌋` and take the
    /// first target whose cumulative weight exceeds it. A session's place is
    /// [`session_point`], a fixed fraction of the space: when weights change, a session moves
    /// only if the boundary moved across it, so growing the last target (the usual place for a
    /// canary) moves sessions onto it and never off it.
    pub fn choose(&self, session: Option<&str>, rng: &mut SplitMix64) -> Choice<'_> {
        let sticky = self.stickiness.is_some() && session.is_some();
        let x = match session {
            Some(id) if sticky => session_point(id),
            _ => rng.next_u64(),
        };
        Choice {
            target: self.at(x),
            sticky,
        }
    }

    /// The target at 64-bit point `x`.
    fn at(&self, x: u64) -> &str {
        let total = self.bounds.last().copied().unwrap_or(1);
        let point = ((u128::from(x) * u128::from(total)) >> 64) as u64;
        let i = self.bounds.partition_point(|&b| b <= point);
        // `point < total`, so `i` is in range; the fallback only keeps this panic-free.
        self.targets
            .get(i)
            .or(self.targets.last())
            .map_or("", String::as_str)
    }

    /// Targets with their weights, in config order.
    pub fn targets(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        let mut previous = 0;
        self.targets.iter().zip(&self.bounds).map(move |(t, &b)| {
            let w = b - previous;
            previous = b;
            (t.as_str(), w)
        })
    }
}

/// A session id's fixed place in a rule's weight space: xxh64 of its UTF-8 bytes, seed 0.
/// Stable across processes, versions and platforms, so every replica agrees.
pub fn session_point(id: &str) -> u64 {
    xxh64(id.as_bytes(), 0)
}

/// Every rule of a config, by the model names they match. Built once per config.
#[derive(Debug)]
pub struct Rewrites {
    rules: Vec<Rule>,
    by_model: HashMap<String, usize>,
    /// The draws of non-sticky splits; locked for one draw.
    rng: Mutex<SplitMix64>,
}

/// What a request's rewrite decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The model the client asked for, which its answer will name again.
    pub requested: String,
    /// The model the request goes to (may equal `requested`: a rule may keep some traffic on
    /// the model it matches).
    pub target: String,
    /// Why.
    pub cause: Cause,
}

/// Why a request was rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The `x-gateway-model-name-rewrite` header named the target.
    Header,
    /// A rule split it.
    Rule {
        /// By the session's hash.
        sticky: bool,
    },
}

impl Decision {
    /// The model the answer must name again, when the request goes to another model.
    pub fn restore(&self) -> Option<&str> {
        (self.target != self.requested).then_some(self.requested.as_str())
    }

    /// Counts it in `infergate_rewrites_total{model, target}`.
    pub fn count(&self, metrics: &Metrics) {
        metrics
            .rewrites
            .get_or_create(&RewriteLabels {
                model: self.requested.clone(),
                target: self.target.clone(),
            })
            .inc();
    }
}

impl Rewrites {
    /// The table of `rules`. Validation has made sure a model is matched by one rule at most.
    pub fn new(rules: &[ResolvedRewrite]) -> Rewrites {
        let mut table = Rewrites {
            rules: Vec::with_capacity(rules.len()),
            by_model: HashMap::new(),
            rng: Mutex::new(SplitMix64::new(SEED)),
        };
        for r in rules {
            let Some(rule) = Rule::new(r) else { continue };
            for m in &r.models {
                table.by_model.entry(m.clone()).or_insert(table.rules.len());
            }
            table.rules.push(rule);
        }
        table
    }

    /// No rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule that matches `model` exactly.
    pub fn rule(&self, model: &str) -> Option<&Rule> {
        self.rules.get(*self.by_model.get(model)?)
    }

    /// A request's rewrite: the header's target if the request has one, else its rule's
    /// choice; `None` when neither applies and the model stays as it is.
    pub fn decide(&self, model: &str, headers: &HeaderMap, body: &[u8]) -> Option<Decision> {
        if let Some(v) = headers.get(MODEL_NAME_REWRITE) {
            // A value that is not text is kept (lossily), so it fails routing with a 404
            // rather than being ignored.
            let target = String::from_utf8_lossy(v.as_bytes()).trim().to_owned();
            if !target.is_empty() {
                return Some(Decision {
                    requested: model.to_owned(),
                    target,
                    cause: Cause::Header,
                });
            }
        }
        let rule = self.rule(model)?;
        let session = rule.stickiness().and_then(|k| session_id(k, headers, body));
        let choice = {
            let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
            rule.choose(session.as_deref(), &mut rng)
        };
        Some(Decision {
            requested: model.to_owned(),
            target: choice.target.to_owned(),
            cause: Cause::Rule {
                sticky: choice.sticky,
            },
        })
    }
}

/// A request's session id: the header's value, or the body field's string (or number) value.
/// `None` when absent or empty.
pub fn session_id(key: &SessionKey, headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let id = match key {
        SessionKey::Header(h) => String::from_utf8_lossy(headers.get(h.as_str())?.as_bytes())
            .trim()
            .to_owned(),
        SessionKey::Field(f) => {
            let fields: HashMap<String, &RawValue> = serde_json::from_slice(body).ok()?;
            let raw = fields.get(f.as_str())?.get();
            match serde_json::from_str::<String>(raw) {
                Ok(s) => s,
                Err(_) if raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) => {
                    raw.to_owned()
                }
                Err(_) => return None,
            }
        }
    };
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
#[path = "rewrites_tests.rs"]
mod tests;
