//! The member status document: what `infergate serve` publishes on its admin listener at
//! `/status/member` and the global tier pulls every second. One home for its shape: the member
//! writes it with these types and the tier reads it with them. `docs/global.md` describes each
//! field.

use std::time::Duration;

use infergate_picker::Pool;
use serde::{Deserialize, Serialize};

/// The document's `kind`.
pub const MEMBER_STATUS_KIND: &str = "MemberStatus";

/// The document's `apiVersion`.
pub const MEMBER_STATUS_API_VERSION: &str = "infergate.dev/v1alpha1";

/// Where the admin listener serves it.
pub const MEMBER_STATUS_PATH: &str = "/status/member";

/// One member gateway's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// `infergate.dev/v1alpha1`.
    pub api_version: String,
    /// [`MEMBER_STATUS_KIND`].
    pub kind: String,
    /// Advances each time the member's control plane refreshes its view of the pools, not per
    /// read: a member whose control plane froze while its listener still answers shows the same
    /// sequence, and the tier counts that as a missed pull. A restarted member starts again
    /// lower; the tier counts any change as progress.
    pub sequence: u64,
    /// The member's wall clock when it built the document, Unix milliseconds (informative: the
    /// tier judges age by its own receipt time, so skew between clocks does not matter).
    pub clock_unix_ms: u64,
    /// Its pools.
    pub pools: Vec<PoolStatus>,
}

/// One pool of a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The pool's name.
    pub name: String,
    /// Every model name the member routes to this pool (base models and aliases).
    pub models: Vec<String>,
    /// LoRA adapters it serves.
    #[serde(default)]
    pub adapters: Vec<String>,
    /// Endpoints eligible for picks now.
    pub ready_endpoints: u32,
    /// Endpoints known.
    pub endpoints: u32,
    /// 1 − mean KV-cache use over ready endpoints, in [0, 1]; 0 with none ready.
    pub kv_headroom: f64,
    /// Requests waiting, in the model servers and in the member's own queue.
    pub queue_depth: u64,
    /// Share of the pool's recent requests that failed, in [0, 1].
    pub error_rate: f64,
    /// P99 time to first token over the same recent window; `None` without requests.
    #[serde(default)]
    pub ttft_p99_seconds: Option<f64>,
    /// The member's flow-control saturation of the pool (1: at Standard's ceiling).
    pub saturation: f64,
    /// How the pool picks, in one line (scheduler, metric dialect, the picker's weights or
    /// policy): the same pool in two clusters should say the same. Absent from a gateway that
    /// does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<String>,
}

impl PoolStatus {
    /// A pool's entry from its endpoints as counted, the requests in the member's own queue
    /// for it and its flow-control saturation; no names, no recent requests (no errors, no
    /// TTFT) and no routing line, which the caller adds where it has them.
    pub fn from_readiness(name: &str, readiness: Readiness, queued: u64, saturation: f64) -> Self {
        PoolStatus {
            name: name.to_owned(),
            models: Vec::new(),
            adapters: Vec::new(),
            ready_endpoints: u32::try_from(readiness.ready).unwrap_or(u32::MAX),
            endpoints: u32::try_from(readiness.endpoints).unwrap_or(u32::MAX),
            kv_headroom: readiness.kv_headroom,
            queue_depth: readiness.waiting.saturating_add(queued),
            error_rate: 0.0,
            ttft_p99_seconds: None,
            // Never NaN or negative on the wire: the tier refuses such a document.
            saturation: if saturation.is_finite() {
                saturation.max(0.0)
            } else {
                0.0
            },
            routing: None,
        }
    }

    /// Whether the pool serves `model`, as a model name or an adapter.
    pub fn serves(&self, model: &str) -> bool {
        self.models.iter().any(|m| m == model) || self.adapters.iter().any(|a| a == model)
    }
}

impl MemberStatus {
    /// The document's JSON.
    pub fn to_json(&self) -> String {
        // Strings, integers and floats: serialising cannot fail (a non-finite float is written
        // as null, which `parse` then refuses, so the writer keeps them finite).
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a pulled document; the error says what is wrong with it.
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let doc: MemberStatus =
            serde_json::from_slice(body).map_err(|e| format!("not a member status: {e}"))?;
        if doc.kind != MEMBER_STATUS_KIND {
            return Err(format!("kind `{}`, not {MEMBER_STATUS_KIND}", doc.kind));
        }
        for p in &doc.pools {
            let finite = [p.kv_headroom, p.error_rate, p.saturation]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0);
            if !finite {
                return Err(format!("pool {}: a negative or non-finite figure", p.name));
            }
        }
        Ok(doc)
    }

    /// The pool serving `model`, if any (the first, should two claim it).
    pub fn pool_for(&self, model: &str) -> Option<&PoolStatus> {
        self.pools.iter().find(|p| p.serves(model))
    }
}

/// A pool's endpoints as the document counts them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Readiness {
    /// Endpoints a pick may choose now.
    pub ready: usize,
    /// Every endpoint.
    pub endpoints: usize,
    /// `1 − mean KV-cache use` over ready endpoints reporting it; 0 when none does.
    pub kv_headroom: f64,
    /// Requests waiting in the ready endpoints' servers, as last scraped.
    pub waiting: u64,
}

impl Readiness {
    /// Counts `pool`'s endpoints at `now` (the clock its scrapes and ejections are stamped
    /// by): ready means scraped no longer than `max_age` ago (frozen metrics are as old as
    /// their last change) and not ejected. Reads the snapshot and the endpoints' health
    /// atomics only.
    pub fn of(pool: &Pool, now: Duration, max_age: Duration) -> Self {
        let mut ready = 0;
        let mut waiting = 0u64;
        let (mut kv_sum, mut kv_count) = (0.0, 0u32);
        for spec in pool.specs() {
            let Some(m) = pool.metrics(spec.id).filter(|m| m.age(now) <= max_age) else {
                continue;
            };
            if pool
                .counters(spec.id)
                .is_some_and(|c| c.health().is_ejected(now))
            {
                continue;
            }
            ready += 1;
            waiting = waiting.saturating_add(m.waiting.unwrap_or(0));
            if let Some(kv) = m.kv_usage.filter(|k| k.is_finite()) {
                kv_sum += kv.clamp(0.0, 1.0);
                kv_count += 1;
            }
        }
        // No ready endpoint reporting KV use: no headroom anyone can count on.
        let kv_headroom = if kv_count == 0 {
            0.0
        } else {
            1.0 - kv_sum / f64::from(kv_count)
        };
        Self {
            ready,
            endpoints: pool.len(),
            kv_headroom,
            waiting,
        }
    }
}
